"""One set of engine capabilities for every dataset kind an engine serves: each engine's W runs
under one durability setting whatever the dataset (the paper's W and the market's M-W through
the same capability, :class:`~tickbench.engines.base.BulkLoad`, and the suites' one operation,
:func:`tickbench.suites.cells.bulk_op`), at the tiniest scale. QuestDB's commit mode, which
once drifted between the two, is also read from the server itself in tests/engines/test_questdb.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tickbench.data.dataset import Dataset
from tickbench.datasets.market.params import MarketParams
from tickbench.datasets.paper.params import QueryParams
from tickbench.engines.base import BulkLoad, EngineUnavailable, Ingest, Server
from tickbench.engines.registry import adapter, adapter_class, availability, engine_infos
from tickbench.suites.cells import bulk_op
from tickbench.suites.market.suite import SUITE as MARKET
from tickbench.suites.published.suite import SUITE as PUBLISHED


def _both_kinds_with_w() -> list[object]:
    """The engines whose client is installed that serve both suites' datasets and have W."""
    out: list[object] = []
    for name, info in engine_infos().items():
        try:
            cls = adapter_class(name)
        except ImportError:
            continue  # its client is not installed: test_engines says so
        if issubclass(cls, BulkLoad) and MARKET.refusal(cls, info) is None and PUBLISHED.refusal(cls, info) is None:
            marks = [pytest.mark.slow, pytest.mark.server] if issubclass(cls, Server) else []
            out.append(pytest.param(name, marks=marks, id=name))
    return out


@pytest.mark.parametrize("name", _both_kinds_with_w())
def test_w_runs_under_one_durability_setting_for_both_kinds(name: str, tiny: Dataset, tiny_params: QueryParams,
                                                            market_tiny: Dataset, market_tiny_params: MarketParams,
                                                            tmp_path: Path) -> None:
    if not (avail := availability(name)).available:
        pytest.skip(f"{name} is not available here: {avail.reason}")
    seen: dict[str, object] = {}
    for bench, ds, params in (("W", tiny, tiny_params), ("M-W", market_tiny, market_tiny_params)):
        e = adapter(name, tmp_path / bench, ds, params)
        e.start()
        try:
            w = bulk_op(e, {"fmt": "parquet", "scratch": str(tmp_path / bench / "scratch")})
        finally:
            e.stop()
        assert w["rows"] > 0, (name, bench)
        seen[bench] = w["detail"].get("durability")
    assert seen["W"] == seen["M-W"], seen


def test_a_part_for_another_kind_is_refused_by_name(tiny: Dataset, tiny_params: QueryParams, tmp_path: Path) -> None:
    """What an adapter serves for one kind alone is refused on another kind's dataset, naming the
    kinds it serves, never run on the wrong tables: the market's during-ingest reader on the paper's."""
    e = adapter("duckdb", tmp_path / "duckdb", tiny, tiny_params)
    assert isinstance(e, Ingest)
    with pytest.raises(EngineUnavailable, match="serves the market datasets, not a paper dataset"):
        e.ingest_reader()
