"""Polars-specific behaviour: an in-memory engine with no W/SE, data gone after stop."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from tickbench.data.dataset import Dataset
from tickbench.datasets.paper.params import QueryParams
from tickbench.engines.registry import adapter, engine_infos
from tickbench.suites.published import QUERY_IDS


def test_w_and_se_are_not_applicable_with_reasons() -> None:
    info = engine_infos()["polars"]
    assert info.kind == "in-memory"  # the runner reloads it after every restart
    for bench in ("W", "SE"):
        assert "in-memory" in info.unsupported[bench]
    assert not set(info.unsupported) & set(QUERY_IDS)


def test_bindings_are_utc_aware() -> None:
    from tickbench.engines.polars.adapter import bindings

    out = bindings({"sym": "BTC-USD", "day_start": dt.datetime(2022, 6, 18),
                    "ot_times": [dt.datetime(2022, 6, 18, 1)]})
    assert out["sym"] == "BTC-USD"
    assert out["day_start"] == dt.datetime(2022, 6, 18, tzinfo=dt.UTC)
    assert out["ot_times"][0].tzinfo is dt.UTC


@pytest.mark.slow
def test_load_holds_time_ordered_tables_and_stop_releases_them(
    tiny: Dataset, tiny_params: QueryParams, tmp_path: Path
) -> None:
    engine = adapter("polars", tmp_path, tiny, tiny_params)
    engine.start()
    month, multi = tiny_params.days("month"), tiny_params.days("multi_day")
    held = sum(r["rows"] for r in tiny.manifest.partitions
               if (r["table"] == "trades" and r["day"] in month)
               or (r["table"] == "book" and r["day"] in month + multi))
    assert engine.load() == held
    store = engine.store  # type: ignore[attr-defined]
    syms = {r["sym"] for r in tiny.manifest.partitions}
    for (table, sym, _), df in store.frames.items():
        assert sym in syms and table in ("trades", "book", "book_depth")
        assert df["ts"].is_sorted()
        assert "sym" not in df.columns and "exchange" not in df.columns  # the frame's key
    assert "b20size" not in store.frames["book", tiny_params.symbol, "COINBASE"].columns  # not read by any query
    assert engine.run_query("O-B2").num_rows == 3
    engine.stop()
    engine.start()  # nothing durable: a restart must load again
    with pytest.raises(RuntimeError, match="load"):
        engine.run_query("O-B2")
    engine.stop()
