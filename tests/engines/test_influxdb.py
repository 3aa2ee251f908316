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
from tickbench.datasets.market.params import MarketParams
from tickbench.datasets.paper.params import QueryParams
from tickbench.engines.registry import adapter, adapter_class, availability

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
    from tickbench.engines.influxdb import load

    shard = {"settled": False}  # the snapshot finishes while the first count runs

    def count(db: str) -> int:
        shard["settled"] = True
        return 497_305

    monkeypatch.setattr(load, "settled", lambda root, db: shard["settled"])
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


def test_lookback_header_binds_growing_windows_clamped_to_the_floor() -> None:
    from tickbench.engines.influxdb.results import parse_header, parse_lookback

    h = parse_header("-- probe: t=ot_times\n-- lookback: lo=month_start, 1m, 1h, 1d\nSELECT 1")
    assert h.lookback is not None
    assert h.lookback.windows_ns == (60 * 10**9, 3600 * 10**9, 86_400 * 10**9)
    binds = {"month_start": 1_000 * 10**9}
    lows = h.lookback.lows(binds, [(0, 1_030 * 10**9), (3, 5_000 * 10**9)], 60 * 10**9)
    assert lows == {"lo_0": 1_000 * 10**9, "lo_3": 4_940 * 10**9}  # never below the floor
    assert h.lookback.lows(binds, [(1, 5_000 * 10**9)], None) == {"lo_1": 1_000 * 10**9}
    for bad in ("lo=month_start", "lo, 1m", "lo=month_start, 1h, 1m", "lo=month_start, 1w"):
        with pytest.raises(ValueError, match="bad lookback header"):
            parse_lookback(bad)
    with pytest.raises(ValueError, match="needs a probe header"):
        parse_header("-- lookback: lo=month_start, 1m\nSELECT 1")


def test_tied_trades_get_distinct_series() -> None:
    from tickbench.engines.influxdb.lineprotocol import line_batches

    ts = pl.Series([1, 1, 1, 2], dtype=pl.Int64).cast(pl.Datetime("ns", "UTC"))
    trades = pl.DataFrame({"ts": ts, "exchange": "X", "sym": "A,B", "side": "buy",
                           "price": [1.5, 1.0, 2.0, 3.0], "amount": [0.1, 1e-05, 100.0, 1.0],
                           "trade_id": [11, 10, 12, 13]})
    lines = b"".join(line_batches([("trades", trades)])).decode().splitlines()
    assert lines[0] == "trades,exchange=X,sym=A\\,B,side=buy,seq=1 price=1.5,amount=0.1,trade_id=11i 1"
    assert [line.split(" ")[0].rsplit(",", 1)[1] for line in lines] == ["seq=1", "seq=0", "seq=2", "seq=0"]


def test_market_ingest_payloads_are_the_loads_lines_however_the_day_is_cut(market_tiny: Dataset) -> None:
    """The market ingest target's payloads, pickled as into a writer process, carry the load's
    tie tags and tape order whatever rows a payload holds: day D cut into payloads of 37 rows
    (ties split between them) and 1 row gives exactly the load's lines of D."""
    import pickle

    import pyarrow as pa
    import pyarrow.parquet as pq

    from tickbench.datasets.market.params import market_params
    from tickbench.engines.influxdb.market import LINES
    from tickbench.engines.influxdb.market_ingest import MarketLineTarget, day_tape

    day = market_params(market_tiny, 7).D
    target = pickle.loads(pickle.dumps(MarketLineTarget(1, "db", day_tape(market_tiny, day))))
    for table in ("quotes", "trades"):
        files = market_tiny.files(table, [day])
        want = sorted("".join(LINES[table](pl.concat([pl.read_parquet(f) for f in files])).to_list()).splitlines())
        rows = pa.concat_tables(pq.read_table(f) for f in files).sort_by([("ts", "ascending")])
        for size in (37, 1) if table == "trades" else (37,):
            got = [line for off in range(0, rows.num_rows, size)
                   for line in target.encode(table, rows.slice(off, size)).decode().splitlines()]
            assert sorted(got) == want
        assert any(",tie=1 " in line for line in want)  # ties were there to split
    with pytest.raises(ValueError, match="outside the day"):
        other = market_params(market_tiny, 7).load_days()[0]
        target.encode("trades", pq.read_table(market_tiny.files("trades", [other])[0]))

@pytest.mark.server
@needs_install
def test_install_is_idempotent() -> None:
    from tickbench.engines.influxdb.server import VERSION, bin_dir

    cls = adapter_class("influxdb")
    before = {b: (bin_dir() / b).stat().st_mtime_ns for b in ("influxd", "influx")}
    assert cls.install() == cls.probe() == VERSION
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
    engine = adapter("influxdb", workdir, tiny, tiny_params)
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

    engine = adapter("influxdb", workdir, tiny, tiny_params)
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
    from tickbench.engines.influxdb.load import du
    from tickbench.engines.influxdb.server import DB
    from tickbench.run.visibility import wait_settled, wait_visible

    assert tiny_params.multi_day not in tiny_params.days("month")  # its shard must be left out
    engine = adapter("influxdb", workdir, tiny, tiny_params)
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
        whole = du(workdir / "influxdb" / "data" / DB)
        alone_bytes = du(workdir / "influxdb" / "data" / "alone")
        total = sizes["shards_and_series_allocated"]
        assert total == sizes["data_bytes"] + sizes["index_bytes"] and sizes["index_bytes"] > 0  # the series file
        assert total < whole  # the multi-exchange day is left out
        assert abs(total - alone_bytes) <= 0.02 * alone_bytes, (sizes, alone_bytes)

        first = next(i for i, _, start in engine._shards(DB) if start[:10] == month[0])  # type: ignore[attr-defined]
        engine._query(f"DROP SHARD {first}", db="")  # type: ignore[attr-defined]
        with pytest.raises(RuntimeError, match=f"{len(month) - 1} of the period's {len(month)} daily shards"):
            engine.storage_bytes()
    finally:
        engine.stop()


@pytest.mark.server
@needs_install
def test_lookback_rounds_find_the_newest_point_behind_gaps(tiny: Dataset, tiny_params: QueryParams,
                                                          workdir: Path) -> None:
    """O-T's bounded lookback: a probe whose newest point before it lies 30 minutes, 5 hours or
    36 hours back is answered by the hour, the day and the month round; every answer is the
    newest point before the probe (as over the whole range), in probe order, and the server time
    covers all four rounds' requests."""
    import dataclasses

    from tickbench.engines.influxdb.server import DB
    from tickbench.run.visibility import wait_visible

    day = dt.datetime.fromisoformat(tiny_params.month[0]).replace(tzinfo=dt.UTC)
    hour, sym = dt.timedelta(hours=1), tiny_params.symbol
    probes = [day + h * hour for h in (2, 3, 4, 5, 6, 7, 8, 12, 18, 60)]  # the file's ten
    gaps = [(probes[7] - hour / 2, probes[7]), (probes[8] - 5 * hour, probes[8]),
            (day + 24 * hour, probes[9])]  # the last: all of day 2 and half of day 3
    book = pl.concat([pl.read_parquet(f) for f in tiny.files("book", tiny_params.days("month")[:3])])
    book = book.filter(pl.col("sym") == sym)
    for lo, hi in gaps:
        book = book.filter(~pl.col("ts").is_between(lo, hi, closed="both"))
    times = tuple(int(p.timestamp()) * 10**9 for p in probes)
    params = dataclasses.replace(tiny_params, ot_times=times)
    engine = adapter("influxdb", workdir, tiny, params)
    engine.start()
    try:
        engine._load_frames(DB, [("book", book)], book.height)  # type: ignore[attr-defined]
        wait_visible(engine)
        engine.connect()  # type: ignore[attr-defined]
        table = engine.run_query("O-T")
        assert engine.query_requests == 4  # type: ignore[attr-defined]  # 1m, 1h, 1d, the month
        assert engine.query_server_ns() is not None
    finally:
        engine.stop()
    got = pl.from_arrow(table)
    assert isinstance(got, pl.DataFrame)
    want = [book.filter(pl.col("ts") <= p).sort("ts").tail(1) for p in probes]
    assert got["t"].to_list() == probes
    assert got["ts"].to_list() == [w["ts"].item() for w in want]
    assert got["b1price"].to_list() == [w["b1price"].item() for w in want]
    assert got["a1size"].to_list() == [w["a1size"].item() for w in want]
    # each gap probe's answer lies before its gap: the later rounds found it
    assert [got["ts"][i] < gaps[i - 7][0] for i in (7, 8, 9)] == [True] * 3


@pytest.mark.server
@needs_install
def test_o_s_takes_min_and_max_over_all_forty_prices(tiny: Dataset, tiny_params: QueryParams,
                                                     workdir: Path) -> None:
    """O-S's arithmetic levels reach every price: in the generated book a1price is always the
    lowest ask and b1price the highest bid, so an answer from those two alone would verify. Here
    each snapshot's 20 ask prices and 20 bid prices are shuffled among their fields (a row of its
    own order each), and the answer must still be min(asks) − max(bids), within the tolerance."""
    import numpy as np

    from tickbench.engines.influxdb.server import DB
    from tickbench.run.visibility import wait_visible
    from tickbench.verify import compare, normalize

    asks, bids = [f"a{i}price" for i in range(1, 21)], [f"b{i}price" for i in range(1, 21)]
    book = pl.concat([pl.read_parquet(f) for f in tiny.files("book", [tiny_params.day])])
    rng = np.random.default_rng(7)
    for side in (asks, bids):
        values = book.select(side).to_numpy()
        order = rng.permuted(np.tile(np.arange(20), (len(values), 1)), axis=1)
        book = book.with_columns(pl.DataFrame(np.take_along_axis(values, order, axis=1), schema=side))
    lowest = book.select(pl.min_horizontal(asks)).to_series()
    assert (book["a1price"] > lowest).sum() > 0.9 * book.height  # a1price alone would not verify
    engine = adapter("influxdb", workdir, tiny, tiny_params)
    engine.start()
    try:
        engine._load_frames(DB, [("book", book)], book.height)  # type: ignore[attr-defined]
        wait_visible(engine)
        engine.connect()  # type: ignore[attr-defined]
        got = pl.from_arrow(engine.run_query("O-S"))
    finally:
        engine.stop()
    assert isinstance(got, pl.DataFrame)
    want = (book.filter(pl.col("sym") == tiny_params.symbol)
            .select("ts", spread=pl.min_horizontal(asks) - pl.max_horizontal(bids)).sort("ts"))
    assert want.height > 1000
    assert compare(normalize(got, want), want).ok


def _influx_status(port: int, user: str | None, password: str = "") -> int:
    import base64
    import http.client

    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if user is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", "/query", body=b"q=SHOW+DATABASES", headers=headers)
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


@pytest.mark.server
@needs_install
def test_auth_is_enabled_with_the_runs_secret(tiny: Dataset, tiny_params: QueryParams, workdir: Path) -> None:
    """auth-enabled, an admin with the run's random password: requests without credentials or
    with a wrong password are refused (401), the secret works, also after a restart over the
    same data; the data directory is the server's alone (0700)."""
    import os
    import pwd
    import stat

    from tickbench.engines.server import ensure_service_user

    engine = adapter("influxdb", workdir, tiny, tiny_params)
    engine.start()
    try:
        user, secret = engine.credentials()  # type: ignore[attr-defined]
        assert len(secret) >= 24
        port = engine.ports["http"]  # type: ignore[attr-defined]
        assert _influx_status(port, None) == 401
        assert _influx_status(port, user, secret + "x") == 401
        assert _influx_status(port, "admin", "admin") == 401
        assert _influx_status(port, user, secret) == 200
        root: Path = engine.root  # type: ignore[attr-defined]
        st = root.stat()
        assert stat.S_IMODE(st.st_mode) == 0o700
        service = ensure_service_user()
        assert st.st_uid == (os.getuid() if service is None else pwd.getpwnam(service).pw_uid)
        assert stat.S_IMODE(engine.secret_file.stat().st_mode) == 0o600  # type: ignore[attr-defined]
        engine.stop()
        engine.start()  # the admin the meta directory keeps, with the same secret
        port = engine.ports["http"]  # type: ignore[attr-defined]
        assert _influx_status(port, None) == 401
        assert _influx_status(port, user, secret) == 200
    finally:
        engine.stop()


@pytest.mark.server
@needs_install
def test_market_ingest_store_is_a_database_of_its_own(market_tiny: Dataset, market_tiny_params: MarketParams,
                                                      workdir: Path) -> None:
    """The market ingest store: a database market_ingest_<hex> beside the loaded one, written by
    the pickled target's line protocol, counted to the nanosecond, M-SNAP verified through a
    user's reader; dropped at close."""
    from tests.market_ingest_checks import check_market_ingest

    engine = adapter("influxdb", workdir, market_tiny, market_tiny_params)
    engine.start()
    try:
        def leftovers() -> set[str]:
            return {d for d in engine._databases() if d.startswith("market_ingest_")}  # type: ignore[attr-defined]

        check_market_ingest(engine, market_tiny, market_tiny_params, workdir / "market-ingest", leftovers)
    finally:
        engine.stop()
