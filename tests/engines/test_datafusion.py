"""DataFusion-specific behaviour: the Parquet store's layout (a file per table and day, sorted by
(sym, exchange, ts), row groups and page statistics), the sort order declared to the planner, W
writing that layout durably (every file and directory fsynced) from CSV and from Parquet, SE
counting the month's files, and the point lookups' fallback level."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tickbench import verify
from tickbench.data.dataset import Dataset
from tickbench.datasets.paper import reference
from tickbench.datasets.paper.params import QueryParams
from tickbench.engines.registry import adapter, availability

pytestmark = pytest.mark.skipif(not availability("datafusion").available, reason="datafusion is not installed")

KEY = ["sym", "exchange", "ts"]


def _plain(table: pa.Table) -> pa.Table:
    """``table`` with DataFusion's string views as plain strings (pyarrow sorts only those)."""
    schema = pa.schema([pa.field(f.name, pa.string()) if f.type == pa.string_view() else f for f in table.schema])
    return table.cast(schema)


def _sorted_by_key(table: pa.Table) -> bool:
    table = _plain(table)
    order = pc.sort_indices(table, sort_keys=[(k, "ascending") for k in KEY])
    return bool(pc.all(pc.equal(order, pa.array(range(table.num_rows), pa.uint64()))).as_py())


@pytest.fixture(scope="module")
def loaded(tiny: Dataset, tiny_params: QueryParams, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    engine = adapter("datafusion", tmp_path_factory.mktemp("datafusion"), tiny, tiny_params)
    engine.start()
    rows = engine.load()
    yield engine, rows
    engine.stop()


@pytest.mark.slow
def test_store_is_a_sorted_parquet_file_per_table_and_day(loaded, tiny: Dataset,  # type: ignore[no-untyped-def]
                                                           tiny_params: QueryParams) -> None:
    from tickbench.engines.datafusion.adapter import ROW_GROUP_ROWS

    engine, rows = loaded
    days = tiny_params.load_days()
    assert rows == tiny.sizes(days)["rows"]
    store = engine.workdir / "store"
    for table in ("trades", "book"):
        assert sorted(p.name for p in (store / table).iterdir()) == [f"day={d}" for d in days]
        for day in days:
            files = list((store / table / f"day={day}").iterdir())
            assert [f.name for f in files] == ["part-0.parquet"]
            pf = pq.ParquetFile(files[0])
            data = pf.read()
            assert data.num_rows == sum(r["rows"] for r in tiny.manifest.partitions
                                        if r["table"] == table and r["day"] == day)
            assert _sorted_by_key(data), f"{table} {day} is not sorted by {KEY}"
            meta = pf.metadata
            for g in range(meta.num_row_groups):
                group = meta.row_group(g)
                assert group.num_rows <= ROW_GROUP_ROWS
                ts = group.column(pf.schema_arrow.get_field_index("ts"))
                assert ts.compression == "ZSTD" and ts.statistics.has_min_max
                assert ts.has_column_index and ts.has_offset_index  # the page index


@pytest.mark.slow
def test_sort_order_is_declared_to_the_planner(loaded) -> None:  # type: ignore[no-untyped-def]
    engine, _ = loaded
    plan = engine.ctx.sql("EXPLAIN SELECT sym, exchange, ts FROM book ORDER BY sym, exchange, ts").to_arrow_table()
    physical = "\n".join(plan.column("plan").to_pylist())
    assert "output_ordering=[sym@0 ASC NULLS LAST, exchange@1 ASC NULLS LAST, ts@2 ASC NULLS LAST]" in physical
    assert "SortExec" not in physical  # the files' order is used, not re-sorted


@pytest.mark.slow
def test_point_lookups_fall_back_when_the_minute_is_empty(loaded, tiny: Dataset,  # type: ignore[no-untyped-def]
                                                          tiny_params: QueryParams) -> None:
    """A probe after a gap of more than a minute in S's snapshots has an empty minute before it,
    and one before the month's first row has nothing at all: the fallback to the month so far
    finds what the reference finds."""
    engine, _ = loaded
    first = pl.scan_parquet([str(f) for f in tiny.files("book", [tiny_params.month[0]], tiny_params.symbol)])
    ts = first.select(pl.col("ts").cast(pl.Int64).sort()).collect().to_series()
    gaps = ts.diff() > 61_000_000_000
    assert gaps.any(), "the tiny dataset has no minute without a snapshot of S on the month's first day"
    after_gap = int(ts.filter(gaps.shift(-1, fill_value=False))[0]) + 61_000_000_000  # nothing in its minute
    times = (int(ts[0]) - 10_000_000_000, after_gap, *tiny_params.ot_times[2:])
    params = QueryParams(**{**tiny_params.__dict__, "ot_times": tuple(sorted(times))})
    engine.set_params(params)
    try:
        expected = reference.answer("O-T", tiny, params)
        got = verify.normalize(pl.from_arrow(engine.run_query("O-T")), expected)
        assert verify.compare(got, expected).ok
        assert expected.height == len(times) - 1  # the probe before the first row has no answer
        assert after_gap in expected["t"].dt.epoch("ns").to_list()
    finally:
        engine.set_params(tiny_params)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_w_writes_the_layout_durably(loaded, tiny: Dataset, tmp_path: Path,  # type: ignore[no-untyped-def]
                                     monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    engine, _ = loaded
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    figures = engine.bulk_load(fmt, tmp_path / "w")
    expected_rows = sum(tiny.manifest.csv[t]["rows"] for t in tiny.manifest.csv)
    assert figures.rows == expected_rows
    day = tiny.bulk_day
    store = tmp_path / "w" / "store"
    for table in ("trades", "book"):
        part = store / table / f"day={day}" / "part-0.parquet"
        # the file, its day directory and the table directory, each after it was written
        assert str(part) in synced and str(part.parent) in synced and str(part.parent.parent) in synced
        assert synced.index(str(part)) < synced.index(str(part.parent))
        written = _plain(pq.read_table(part))
        assert _sorted_by_key(written)
        # CSV or Parquet, the same rows with the same values (timestamps to the nanosecond)
        source = pa.concat_tables([pq.read_table(f) for f in tiny.files(table, [day])])
        keys = [(k, "ascending") for k in KEY] + ([("trade_id", "ascending")] if table == "trades" else [])
        assert written.sort_by(keys).equals(source.cast(written.schema).sort_by(keys))
    base = engine.baseline_load(fmt, tmp_path / "baseline")
    assert base.rows == expected_rows
    again = engine.bulk_load(fmt, tmp_path / "w")  # a repeated W replaces its store
    assert again.rows == expected_rows


@pytest.mark.slow
def test_venues_are_each_days_book_pairs(loaded, tiny: Dataset, tiny_params: QueryParams) -> None:  # type: ignore[no-untyped-def]
    """O-NBBO reads S's venues on X from table venues: each day's distinct (sym, exchange) of the
    book, so it must hold exactly those."""
    engine, _ = loaded
    for day in tiny_params.load_days():
        book = pl.read_parquet(tiny.files("book", [day]))
        expected = book.select("sym", "exchange").unique().sort("sym", "exchange")
        written = pl.read_parquet(engine.workdir / "store" / "venues" / f"day={day}" / "part-0.parquet")
        assert written.equals(expected), day
    got = engine.ctx.sql(f"SELECT DISTINCT exchange FROM venues WHERE day = DATE '{tiny_params.multi_day}' "
                         "ORDER BY exchange").to_pydict()["exchange"]
    day_book = pl.read_parquet(tiny.files("book", [tiny_params.multi_day]))
    assert got == sorted(day_book["exchange"].unique().to_list()) and len(got) > 1


@pytest.mark.slow
def test_se_counts_the_month_files(loaded, tiny_params: QueryParams) -> None:  # type: ignore[no-untyped-def]
    engine, _ = loaded
    store = engine.workdir / "store"
    month = set(tiny_params.days("month"))
    files = [f for f in store.rglob("*.parquet") if f.parent.name.removeprefix("day=") in month]
    assert len(files) == 3 * len(month)  # trades, book and venues
    total = sum(f.stat().st_size for f in files)
    assert engine.storage_bytes() == {"parquet_files": total, "data_bytes": total, "index_bytes": 0, "log_bytes": 0}
    # the multi-exchange day lies outside the month here: loaded, but not counted
    assert tiny_params.multi_day not in month and (store / "book" / f"day={tiny_params.multi_day}").is_dir()


@pytest.mark.slow
def test_suites_beyond_the_paper(tiny: Dataset, tmp_path: Path) -> None:
    """Concurrency (client processes over the same files) and scaling run verified; the ingest
    suites are recorded as unsupported, with engine.toml's reason."""
    from tickbench.engines.registry import engine_infos
    from tickbench.run.cell import Protocol
    from tickbench.run.session import run
    from tickbench.suites.registry import run_config, suite_options

    opts = suite_options(concurrency_clients=(1, 2), concurrency_seconds=2.0, scaling_factor=1.0,
                         scaling_spans=("day", "week"), scaling_queries=("O-T", "O-NBBO"),
                         tick_matrix=((2, 200),), tick_reps=1)

    def records(suite: str):  # type: ignore[no-untyped-def]
        return run(run_config(engines=["datafusion"], data=tiny.root, out=tmp_path / suite, seed=7, suite=suite,
                              protocol=Protocol(warmup=1, repetitions=1, timeout_s=120, load_timeout_s=300),
                              verify_dataset=False, options=opts)).records

    for rec in records("concurrency"):
        assert rec.status == "ok" and rec.verified and rec.figures["model"] == "processes", (rec.benchmark, rec.reason)
    scaling = records("scaling")
    assert [r.benchmark for r in scaling] == ["scaling/O-T", "scaling/O-NBBO"]
    for rec in scaling:
        assert rec.status == "ok" and rec.verified and len(rec.figures["points"]) == 2, (rec.benchmark, rec.reason)
    reason = engine_infos()["datafusion"].unsupported["tick-latency"]
    for rec in records("tick-latency"):
        assert rec.status == "unsupported" and rec.reason == reason
