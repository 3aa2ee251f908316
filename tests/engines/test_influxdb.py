"""InfluxDB-specific behaviour: the server listens on 127.0.0.1 only and leaves nothing running
after stop(), install is idempotent, trades tied on a timestamp all survive as points, and the
adapter's parameter binding, header comments and result flattening."""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import psutil
import pytest

from tickbench.data.dataset import Dataset
from tickbench.engines.registry import adapter_class, availability
from tickbench.params import QueryParams

installed = availability("influxdb")
needs_install = pytest.mark.skipif(
    not installed.available, reason=f"influxdb is not installed: {installed.reason}")


def test_bindings_are_ns_and_lists_are_numbered() -> None:
    from tickbench.engines.influxdb.adapter import influx_bindings

    t = dt.datetime(2022, 6, 18, 0, 0, 1, 5)
    assert influx_bindings({"sym": "BTC-USD", "day_start": t, "ot_times": [t, t]}) == {
        "sym": "BTC-USD", "day_start": 1655510401000005000,
        "ot_times_0": 1655510401000005000, "ot_times_1": 1655510401000005000,
    }


def test_a_short_count_while_the_shard_settles_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A count taken during a cache snapshot can be short and the shard look settled a moment
    later (the flaky '502311 rows written but 497305 points read back'): only a count that is
    short with the shard settled before and after it is an error."""
    from tickbench.engines.influxdb import adapter as mod

    shard = {"settled": False}  # the snapshot finishes while the first count runs

    def count(db: str) -> int:
        shard["settled"] = True
        return 497_305

    monkeypatch.setattr(mod, "settled", lambda root, db: shard["settled"])
    engine = object.__new__(mod.Adapter)
    engine.endpoint, engine.workdir, engine._expected = None, Path("/nonexistent"), {"se": 502_311}
    monkeypatch.setattr(engine, "_count", count, raising=False)
    assert engine.pending_visibility()  # asked again, no error yet
    with pytest.raises(RuntimeError, match="se: 502311 rows written but 497305 points read back"):
        engine.pending_visibility()


def test_header_and_flattening() -> None:
    from tickbench.engines.influxdb.adapter import parse_header, to_table

    h = parse_header("-- columns: time=bucket\n-- sort: sym, bucket\nSELECT 1")
    assert h.renames == {"time": "bucket"} and h.sort == ("sym", "bucket") and h.probe is None
    assert parse_header("-- probe: t=ot_times\n").probe == ("t", "ot_times")
    results = [{"statement_id": 0, "series": [
        {"name": "m", "tags": {"sym": "B"}, "columns": ["time", "v"], "values": [[60, 1], [0, 2.5]]},
        {"name": "m", "tags": {"sym": "A"}, "columns": ["time", "v"], "values": [[0, 3.0]]},
    ]}]
    table = to_table(results, h.renames, ("sym", "bucket", "v"), None, None)
    assert table.column_names == ["sym", "bucket", "v"]
    assert table.column("sym").to_pylist() == ["B", "B", "A"]
    assert table.column("v").to_pylist() == [1.0, 2.5, 3.0]
    assert str(table.schema.field("bucket").type) == "timestamp[ns, tz=UTC]"


def test_tied_trades_get_distinct_series() -> None:
    from tickbench.engines.influxdb.adapter import line_batches

    ts = pl.Series([1, 1, 1, 2], dtype=pl.Int64).cast(pl.Datetime("ns", "UTC"))
    trades = pl.DataFrame({"ts": ts, "exchange": "X", "sym": "A,B", "side": "buy",
                           "price": [1.5, 1.0, 2.0, 3.0], "amount": [0.1, 1e-05, 100.0, 1.0],
                           "trade_id": [11, 10, 12, 13]})
    lines = b"".join(line_batches([("trades", trades)])).decode().splitlines()
    assert lines[0] == "trades,exchange=X,sym=A\\,B,side=buy,seq=1 price=1.5,amount=0.1,trade_id=11i 1"
    assert [line.split(" ")[0].rsplit(",", 1)[1] for line in lines] == ["seq=1", "seq=0", "seq=2", "seq=0"]


@pytest.mark.server
@needs_install
def test_install_is_idempotent() -> None:
    from tickbench.engines.influxdb.adapter import bin_dir

    cls = adapter_class("influxdb")
    before = {b: (bin_dir() / b).stat().st_mtime_ns for b in ("influxd", "influx")}
    assert cls.install() == cls.probe() == "1.8.10"
    assert {b: (bin_dir() / b).stat().st_mtime_ns for b in ("influxd", "influx")} == before


@pytest.fixture
def workdir() -> Iterator[Path]:
    # Not under pytest's tmp_path: its parents are private to root, and influxd runs as the
    # unprivileged service user, which must reach its data directory.
    d = Path(tempfile.mkdtemp(prefix="tickbench-influxdb-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.server
@pytest.mark.slow
@needs_install
def test_loopback_ties_restart_and_clean_stop(tiny: Dataset, tiny_params: QueryParams,
                                             workdir: Path) -> None:
    engine = adapter_class("influxdb")(workdir, tiny, tiny_params)
    engine.start()
    try:
        (pid,) = engine.memory_pids()
        assert psutil.Process(pid).name() == "influxd"
        addrs = [c.laddr for c in psutil.net_connections(kind="inet")
                 if c.pid == pid and c.status == psutil.CONN_LISTEN]
        assert len(addrs) == 2  # HTTP and the RPC (backup) service; everything else is off
        assert all(a.ip == "127.0.0.1" for a in addrs), addrs

        # The bulk-load day has trades tied on (exchange, sym, side, ts): every row must come
        # back as a point (bulk_load raises if a point replaced another).
        expected = sum(tiny.manifest.csv[t]["rows"] for t in tiny.manifest.csv)
        assert engine.bulk_load("csv", workdir / "w").rows == expected
        assert engine.bulk_load("parquet", workdir / "w").rows == expected  # fresh database again

        engine.stop()
        assert not psutil.pid_exists(pid)
        assert not [c for c in psutil.net_connections(kind="inet") if c.laddr in addrs]
        engine.start()  # the cold protocol: the same data reopens
        assert engine._count("w_parquet") == expected  # type: ignore[attr-defined]
        pid = engine.memory_pids()[0]
    finally:
        engine.stop()
    assert engine.memory_pids() == []
    assert not psutil.pid_exists(pid)


@pytest.mark.server
@needs_install
def test_replaced_points_are_an_error_once_settled(tiny: Dataset, tiny_params: QueryParams, workdir: Path) -> None:
    """The row count is checked by pending_visibility (a count during a cache snapshot can
    briefly miss points, so the runner asks again); rows that InfluxDB replaced — the same
    series and time written twice — are still an error, raised once the database has settled."""
    from tickbench.run.visibility import wait_settled, wait_visible

    engine = adapter_class("influxdb")(workdir, tiny, tiny_params)
    engine.start()
    try:
        book = pl.read_parquet(tiny.files("book", [tiny_params.day])[0])
        twice = pl.concat([book, book])  # every point written twice: each second write replaces the first
        assert engine._load_frames("dup", [("book", twice)], twice.height) == twice.height  # type: ignore[attr-defined]
        with pytest.raises(RuntimeError, match=f"dup: {twice.height} rows written but {book.height} points"):
            wait_visible(engine)
        engine._load_frames("ok", [("book", book)], book.height)  # type: ignore[attr-defined]
        wait_visible(engine)  # every row shows: nothing pending, no error
        assert not engine.pending_visibility()
        wait_settled(engine)
    finally:
        engine.stop()


@pytest.mark.server
@pytest.mark.slow
@needs_install
def test_se_measures_the_periods_shards_of_the_loaded_database(tiny: Dataset, tiny_params: QueryParams,
                                                               workdir: Path) -> None:
    """SE is measured on the loaded database, not on a second copy of the month: its daily
    shards of the 30-day period must come to what a database holding the period alone takes,
    without the multi-exchange day's shard, and a missing day of the period is an error."""
    from tickbench.engines.influxdb.adapter import DB, du
    from tickbench.run.visibility import wait_settled, wait_visible

    assert tiny_params.multi_day not in tiny_params.days("month")  # its shard must be left out
    engine = adapter_class("influxdb")(workdir, tiny, tiny_params)
    engine.start()
    try:
        engine.load()
        month = tiny_params.days("month")
        alone = [(t, pl.read_parquet(f)) for t in ("trades", "book") for f in tiny.files(t, month)]
        engine._load_frames("alone", alone, sum(f.height for _, f in alone))  # type: ignore[attr-defined]
        engine._settling.add("alone")  # type: ignore[attr-defined]
        wait_visible(engine)
        wait_settled(engine)
        sizes = engine.storage_bytes()
        whole = sum(du(workdir / "influxdb" / area / DB) for area in ("data", "wal"))
        alone_bytes = sum(du(workdir / "influxdb" / area / "alone") for area in ("data", "wal"))
        assert sizes["month_shards_and_series_allocated"] == sizes["shards_allocated"] + sizes["series_file_allocated"]
        assert sizes["month_shards_and_series_allocated"] < whole  # the multi-exchange day is left out
        assert abs(sizes["month_shards_and_series_allocated"] - alone_bytes) <= 0.02 * alone_bytes, (sizes, alone_bytes)

        first = next(i for i, _, start in engine._shards(DB) if start[:10] == month[0])  # type: ignore[attr-defined]
        engine._query(f"DROP SHARD {first}", db="")  # type: ignore[attr-defined]
        with pytest.raises(RuntimeError, match=f"{len(month) - 1} of the period's {len(month)} daily shards"):
            engine.storage_bytes()
    finally:
        engine.stop()
