"""ArcticDB-specific behaviour: what ran where is recorded for every query, the symbol layout,
data that survives a restart, and the W/SE stores built apart from the query store."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from tickbench.data.dataset import Dataset
from tickbench.datasets.paper.params import QueryParams
from tickbench.engines.registry import adapter, engine_infos
from tickbench.suites.published import QUERY_IDS

pytest.importorskip("arcticdb")
pd = pytest.importorskip("pandas")  # comes with arcticdb


def test_every_query_says_what_ran_where(tmp_path: Path, tiny: Dataset, tiny_params: QueryParams) -> None:
    info = engine_infos()["arcticdb"]
    assert not info.unsupported
    engine = adapter("arcticdb", tmp_path, tiny, tiny_params)
    for qid in QUERY_IDS:
        notes = engine.query_notes(qid)  # type: ignore[attr-defined]
        assert notes.startswith("QueryBuilder:") and "Polars:" in notes, qid
        assert info.query_text(qid).startswith(f'"""{notes}')


def test_ranges_are_inclusive_of_the_last_nanosecond_only() -> None:
    from tickbench.engines.arcticdb.adapter import bindings

    raw = {f"{s}_{e}": dt.datetime(2022, 6, 18 + (e == "end")) for s in ("day", "week", "month", "multi")
           for e in ("start", "end")}
    lo, hi = bindings(raw)["day_range"]
    assert lo == pd.Timestamp("2022-06-18")
    assert hi == pd.Timestamp("2022-06-19") - pd.Timedelta(1, "ns")


def test_map_size_grows_with_the_data() -> None:
    from tickbench.engines.arcticdb.adapter import lmdb_uri

    assert lmdb_uri(Path("/x"), 0).endswith("?map_size=1GB")
    assert lmdb_uri(Path("/x"), 3_000_000_000).endswith("?map_size=13GB")


@pytest.mark.slow
def test_layout_restart_and_separate_stores(tiny: Dataset, tiny_params: QueryParams, tmp_path: Path) -> None:
    engine = adapter("arcticdb", tmp_path, tiny, tiny_params)
    engine.start()
    try:
        days = tiny_params.load_days()
        assert engine.load() == tiny.sizes(days)["rows"]
        store = engine.store  # type: ignore[attr-defined]
        assert set(store.lib.list_symbols()) == {f"{t}.{s}" for t in ("trades", "book")
                                                 for s in ("BTC-USD", "ETH-USD", "USDT-USD")}
        desc = store.lib.get_description("book.BTC-USD")
        assert desc.sorted == "ASCENDING" and desc.index[0].name == "ts"
        # Each day's venues are the symbol's metadata (O-NBBO's venue count): as in the dataset.
        for day in (tiny_params.multi_day, tiny_params.day):
            want = {p["exchange"] for p in tiny.manifest.partitions
                    if p["table"] == "book" and p["sym"] == "BTC-USD" and p["day"] == day}
            assert store.venues("book.BTC-USD", [day]) == want and want
        assert len(store.venues("book.BTC-USD", [tiny_params.multi_day])) > 1
        before = engine.run_query("O-NBBO")
        engine.stop()
        engine.start()  # the cold protocol: the stored data is reopened, not reloaded
        assert engine.run_query("O-NBBO").equals(before)

        se = engine.storage_bytes()
        assert next(iter(se)) == "lmdb_dir" and se["lmdb_dir"] > 0
        assert (tmp_path / "se").is_dir() and (tmp_path / "lmdb").is_dir()
        csv_rows = sum(c["rows"] for c in tiny.manifest.csv.values())
        for fmt in ("csv", "parquet"):
            assert engine.bulk_load(fmt, tmp_path / "w").rows == csv_rows
            assert engine.baseline_load(fmt, tmp_path / "w").rows == csv_rows
        assert engine.run_query("O-NBBO").equals(before)  # W and SE left the query store alone
        # A symbol without the venues metadata (not written by the load) is a clear error.
        store = engine.store  # type: ignore[attr-defined]
        store.lib.write_metadata("book.BTC-USD", {})
        with pytest.raises(RuntimeError, match="no venues_by_day metadata"):
            engine.run_query("O-NBBO")
    finally:
        engine.stop()


# ArcticDB 6.28's own pandas read (the merge reads the overlapped tail as pandas) builds its frame
# through an API pandas 2.3 deprecates: the warning is ArcticDB's, not tickbench's.
@pytest.mark.filterwarnings("ignore:Passing a BlockManagerUnconsolidated:DeprecationWarning")
def test_market_ingest_keeps_the_tie_order_across_writes_and_counts_up_to_a_time(tmp_path: Path) -> None:
    """The market ingest store (queries during ingest): a write whose first trade ties the
    symbol's last ts but sorts before it in (ts, exchange, trade_id) is merged into place, not
    appended after it (M-SNAP's as-of joins take the last equal row); a write that sorts after
    it appends. ``count_upto`` counts the rows at or before a time, within a symbol and whole."""
    import pyarrow as pa

    from tickbench.datasets.market.schema import MARKET_SCHEMAS
    from tickbench.engines.arcticdb.ingest import FramesTarget, IngestStore
    from tickbench.engines.arcticdb.market import INGEST

    def trades(ts: list[int], exchange: list[str], ids: list[int], sym: str = "S1") -> pa.Table:
        n = len(ts)
        return pa.table({"ts": pa.array(ts, pa.int64()).cast(MARKET_SCHEMAS["trades"].field("ts").type),
                         "exchange": exchange, "sym": [sym] * n, "side": ["buy"] * n, "price": [1.0] * n,
                         "amount": [1.0] * n, "trade_id": pa.array(ids, pa.int64())})

    store = IngestStore(tmp_path / "store", INGEST)
    try:
        target = FramesTarget(store)
        sender = target.connect()
        for batch in (trades([10, 20], ["B", "B"], [1, 2]), trades([20], ["A"], [3]),  # ties, sorts first: merged
                      trades([20, 30], ["C", "A"], [4, 5]), trades([5], ["Z"], [6], "S2")):  # after: appended
            sender.send(target.encode("trades", batch))
        got = store.library("trades").read("trades.S1", output_format="PYARROW").data
        assert got.column("exchange").to_pylist() == ["B", "A", "B", "C", "A"]
        assert got.column("trade_id").to_pylist() == [1, 3, 2, 4, 5]
        assert [store.count_upto("trades", t) for t in (4, 5, 10, 19, 20, 29, 30, 2**62)] == [0, 1, 2, 2, 5, 5, 6, 6]
    finally:
        store.close()
