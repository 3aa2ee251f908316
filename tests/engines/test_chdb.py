"""chDB-specific behaviour: one session path per process holding the query store and the W
stores as databases, parameters passed as ClickHouse text, memory from query_log, SE keys."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pytest

from tickbench.data.dataset import Dataset
from tickbench.datasets.market.params import MarketParams
from tickbench.datasets.paper.params import QueryParams
from tickbench.engines.registry import adapter, adapter_class, availability, engine_infos

pytestmark = pytest.mark.skipif(not availability("chdb").available, reason="chdb is not installed")


def test_param_text_is_what_clickhouse_parses() -> None:
    from tickbench.engines.chdb.adapter import param_text

    assert param_text(dt.datetime(2022, 6, 18, 1, 2, 3, 4)) == "2022-06-18 01:02:03.000004"
    assert param_text([dt.datetime(2022, 6, 18), dt.datetime(2022, 6, 19)]) == (
        "['2022-06-18 00:00:00.000000', '2022-06-19 00:00:00.000000']")
    assert param_text("a\tb\nc\\") == "a\\tb\\nc\\\\"
    assert param_text(["it's"]) == "['it\\'s']"
    assert param_text([3, -4]) == "[3, -4]"  # an Array(Int64) does not read quoted numbers
    assert param_text([dt.date(2024, 1, 16)]) == "['2024-01-16']"


def test_file_glob_names_exactly_the_files(tmp_path: Path) -> None:
    from tickbench.engines.chdb.adapter import file_glob

    files = [tmp_path / "a" / "x.parquet", tmp_path / "b" / "y.parquet"]
    links = tmp_path / "links"
    assert file_glob(files, links) == f"{tmp_path}/{{a/x.parquet,b/y.parquet}}"
    assert file_glob(files[:1], links) == str(files[0])
    assert not links.exists()
    # A glob character in a path has no escape in file(): plain-named links to the files instead.
    odd = [tmp_path / "run[1],x" / "x.parquet", tmp_path / "run[1],x" / "y.parquet"]
    glob = file_glob(odd, links)
    assert not set(glob) & set("*?[]") and glob.startswith(str(links))
    linked = sorted(p for p in links.rglob("*.parquet"))
    assert [p.readlink() for p in linked] == odd and glob.count(",") == 1


@pytest.mark.slow
def test_store_memory_w_and_se(tiny: Dataset, tiny_params: QueryParams, tmp_path: Path) -> None:
    engine = adapter("chdb", tmp_path / "engine", tiny, tiny_params)
    engine.start()
    try:
        days = tiny_params.load_days()
        assert engine.load() == tiny.sizes(days)["rows"]
        parts = engine._sql("SELECT count() AS n FROM system.parts WHERE active AND database = 'tickbench'",  # type: ignore[attr-defined]
                            fmt="ArrowTable").to_pylist()
        assert parts == [{"n": 2 * len(days)}]  # one part per day and table
        memory = engine.query_memory_bytes  # type: ignore[attr-defined]
        assert memory() is None  # no benchmark query ran yet
        assert engine.run_query("O-B2").num_rows == 3
        first = memory()
        assert first > 0
        # the query_log row is read once and serves both figures: asking again gives the same row
        assert memory() == first
        assert engine.query_server_ns() > 0  # type: ignore[attr-defined]

        # Cold protocol: the same process closes and reopens the session path.
        engine.stop()
        engine.start()
        assert engine.run_query("O-B2").num_rows == 3

        expected = sum(tiny.manifest.csv[t]["rows"] for t in tiny.manifest.csv)
        for fmt in ("csv", "parquet"):
            for _ in range(2):  # a repeated W replaces its store
                mine = engine.bulk_load(fmt, tmp_path / "w")
                base = engine.baseline_load(fmt, tmp_path / "w")
                assert mine.rows == base.rows == expected
                assert mine.detail["database"] == f"w_{fmt}" and mine.detail["bytes_on_disk"] > 0
                assert mine.detail["active_parts"] == 2  # one part per day, as the query store

        se = engine.storage_bytes()
        assert next(iter(se)) == "parts_bytes_on_disk"  # the runner's primary figure
        assert se["parts_bytes_on_disk"] > 0 and se["merges_running"] == 0
        assert se["data_bytes"] + se["index_bytes"] == se["parts_bytes_on_disk"] and se["index_bytes"] > 0  # marks
        assert se["active_parts"] == 2 * len(tiny_params.days("month"))  # one per day and table
        assert engine.run_query("O-B2").num_rows == 3  # the W stores left the query store alone
    finally:
        engine.stop()


@pytest.mark.slow
def test_a_second_process_cannot_open_a_held_path(tiny: Dataset, tiny_params: QueryParams,
                                                  tmp_path: Path) -> None:
    import subprocess
    import sys

    engine = adapter("chdb", tmp_path, tiny, tiny_params)
    engine.start()
    try:
        code = ("from pathlib import Path; from tickbench.engines.registry import adapter_class, engine_infos; "
                f"adapter_class('chdb')(engine_infos()['chdb'], Path({str(tmp_path)!r}), None, None).start()")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert out.returncode != 0 and "another process may hold it" in out.stderr
    finally:
        engine.stop()



@pytest.mark.slow
def test_lookups_behind_empty_windows(tiny: Dataset, tiny_params: QueryParams, tmp_path: Path) -> None:
    """O-T and O-NBBO read the ten probes' one-minute windows at once and answer a probe whose
    window is empty (or misses a venue) by a second read gated on the first's result: over the
    crafted gaps of ``lookup_gaps``, every answer is the latest row at or before its probe."""
    import polars as pl

    from tests.engines.lookup_gaps import Gaps
    from tickbench.engines.chdb.adapter import DB, SCHEMA

    gaps = Gaps.make(tiny, tiny_params)
    # two inserts that split the multi-exchange day's partition in two parts
    cut = gaps.book["ts"].max() - dt.timedelta(hours=12)  # type: ignore[operator]
    gaps.book.filter(pl.col("ts") <= cut).write_parquet(tmp_path / "a.parquet")
    gaps.book.filter(pl.col("ts") > cut).write_parquet(tmp_path / "b.parquet")
    engine = adapter_class("chdb")(engine_infos()["chdb"], tmp_path / "engine", tiny, gaps.params)
    engine.start()
    try:
        engine._sql(SCHEMA, {"db": DB})  # type: ignore[attr-defined]
        for name in ("a", "b"):
            engine._insert(DB, "book", "parquet", [tmp_path / f"{name}.parquet"])  # type: ignore[attr-defined]
        parts = "SELECT count() AS n FROM system.parts WHERE active AND database = 'tickbench' AND table = 'book'"
        assert engine._sql(parts, fmt="ArrowTable").to_pylist() == [{"n": 5}]  # type: ignore[attr-defined]
        engine._merge_split_days(DB)  # type: ignore[attr-defined]  # that partition alone is merged
        assert engine._sql(parts, fmt="ArrowTable").to_pylist() == [{"n": 4}]  # type: ignore[attr-defined]
        got_ot, got_nbbo = (pl.from_arrow(engine.run_query(q)) for q in ("O-T", "O-NBBO"))
        # the window read runs as a scalar subquery, before the plan: explain counts it from the log
        plan = engine.explain("O-T")
        assert plan.startswith("Read by one run") and "ReadFromMergeTree" in plan
    finally:
        engine.stop()
    assert isinstance(got_ot, pl.DataFrame) and isinstance(got_nbbo, pl.DataFrame)
    gaps.check(got_ot, got_nbbo)


@pytest.mark.slow
def test_market_store_w_se_and_hostile_baskets(market_tiny: Dataset, market_tiny_params: MarketParams,
                                                tmp_path: Path) -> None:
    engine = adapter("chdb", tmp_path / "engine", market_tiny, market_tiny_params)
    engine.start()
    try:
        days = market_tiny_params.load_days()
        rows = engine.load()
        assert rows == len(market_tiny.instruments()) + sum(
            r["rows"] for t in ("quotes", "trades") for r in market_tiny.entries(t, days))
        parts = engine._sql(  # type: ignore[attr-defined]
            "SELECT table, count() AS n FROM system.parts WHERE active AND database = 'tickbench' "
            "GROUP BY table ORDER BY table", fmt="ArrowTable").to_pylist()
        assert parts == [{"table": "instruments", "n": 1}, {"table": "quotes", "n": len(days)},
                         {"table": "trades", "n": len(days)}]  # one part per day and table
        # M-LAST reads each pair's last day from the projection, then those days alone
        engine.run_query("M-LAST")
        log = engine._last_query_log()  # type: ignore[attr-defined]
        quotes = sum(r["rows"] for r in market_tiny.entries("quotes", days))
        assert 0 < log["read_rows"] < quotes / 4

        # names from the data are bound as array parameters, never written into the SQL
        hostile = ["S001') OR 1=1 --", "x\\'y", "S001"]
        engine.params = dataclasses.replace(market_tiny_params, B50=tuple(hostile))
        asof = engine.run_query("M-ASOF")
        assert asof.column("sym").to_pylist() in ([], ["S001"])

        d_rows = sum(market_tiny.manifest.csv[t]["rows"] for t in ("quotes", "trades"))
        for fmt in ("csv", "parquet"):
            for _ in range(2):  # a repeated M-W replaces its store
                mine = engine.bulk_load(fmt, tmp_path / "w")  # type: ignore[attr-defined]
                base = engine.baseline_load(fmt, tmp_path / "w")  # type: ignore[attr-defined]
                assert mine.rows == base.rows == d_rows
                assert mine.detail["database"] == f"mw_{fmt}" and mine.detail["active_parts"] == 2

        se = engine.storage_bytes()  # type: ignore[attr-defined]
        assert next(iter(se)) == "parts_bytes_on_disk" and se["parts_bytes_on_disk"] > 0
        assert se["active_parts"] == 1 + 2 * len(days) and se["merges_running"] == 0
    finally:
        engine.stop()
