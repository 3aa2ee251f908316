"""QuestDB-specific behaviour: literal parameters, the /imp schema, /exec answers as Arrow, an
idempotent install, a server that listens on 127.0.0.1 only and leaves nothing behind, each
answer's transport and server time, reopening after a restart, repeatable W loads and the SE
figures."""

from __future__ import annotations

import dataclasses
import datetime as dt
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import psutil
import pytest

from tickbench.data.dataset import Dataset
from tickbench.datasets.market.params import MarketParams, iso_ns
from tickbench.datasets.paper.params import QueryParams
from tickbench.engines.base import Engine, EngineUnavailable
from tickbench.engines.registry import adapter, adapter_class
from tickbench.run.visibility import wait_visible


def _installed() -> str | None:
    """Why the server tests cannot run here, or None when QuestDB is installed."""
    try:
        adapter_class("questdb").probe()
    except (EngineUnavailable, ImportError) as exc:
        return f"QuestDB is not installed ({exc}); `tickbench install questdb` installs it"
    return None


needs_server = pytest.mark.skipif(_installed() is not None, reason=str(_installed()))


def test_bind_writes_quoted_literals() -> None:
    from tickbench.engines.questdb.schema import bind

    sql = "WHERE sym = $sym AND ts >= $day_start AND ts < $day_end"
    out = bind(sql, {"sym": "it's", "day_start": dt.datetime(2022, 6, 18),
                     "day_end": dt.datetime(2022, 6, 19, 0, 0, 0, 5)})
    assert out == ("WHERE sym = 'it''s' AND ts >= '2022-06-18T00:00:00.000000Z' "
                   "AND ts < '2022-06-19T00:00:00.000005Z'")
    with pytest.raises(KeyError):
        bind("$nope", {})
    with pytest.raises(TypeError):
        bind("$ot_times", {"ot_times": [1.5]})


def test_bind_writes_lists_dates_and_hostile_names_as_literals() -> None:
    from tickbench.engines.questdb.schema import bind

    names = ["S0001", "x'); DROP TABLE quotes; --", "back\\slash'"]
    out = bind("sym IN ($b50_syms) AND day = $days_1 AND n IN ($ids) AND s = $b50_syms_2 AND e IN ($none)",
               {"b50_syms": names, "days": [dt.date(2024, 1, 2), dt.date(2024, 1, 3)], "ids": [3, -4], "none": []})
    assert out == ("sym IN ('S0001', 'x''); DROP TABLE quotes; --', 'back\\slash''') AND day = '2024-01-03' "
                   "AND n IN (3, -4) AND s = 'back\\slash''' AND e IN (NULL)")


def test_bind_form_is_the_bound_text_url_encoded() -> None:
    """What /exec is sent: the bound text, encoded as urlencode would encode it, for hostile
    names, list items, a repeated part and text that needs escaping between the parameters;
    the file's text is encoded once, so a second binding of it gives its own values."""
    import urllib.parse

    from tickbench.engines.questdb.schema import bind, bind_form

    sql = ("SELECT 'a b&c=d%' AS x, <<venues: last(CASE WHEN exchange = $item THEN bid END) AS b_@i>> "
           "FROM quotes WHERE sym IN ($b_syms) AND sym = $b_syms_1 AND ts >= $d -- é+#")
    for names in (["S0001", "x'); DROP TABLE quotes; --&q=1"], ["Z", "Ü + ?"]):
        binds = {"venues": ["XNYS", "a&b=c"], "b_syms": names, "d": dt.datetime(2024, 1, 2, 3, 4, 5, 6)}
        plain, form = bind_form(sql, binds)
        assert plain == bind(sql, binds) and names[1].replace("'", "''") in plain
        assert form == urllib.parse.urlencode({"query": plain})[len("query="):]
        assert urllib.parse.parse_qs("query=" + form)["query"] == [plain]


def test_bind_repeats_a_part_per_venue_of_the_calendar() -> None:
    from tickbench.engines.questdb.schema import bind

    out = bind("greatest(<<venues: b_@i>>), <<venues:\n last(CASE WHEN exchange = $item THEN bid END) AS b_@i>> "
               "WHERE ts >= $d", {"venues": ["XNYS", "Z'); DROP TABLE quotes; --"], "d": dt.date(2024, 1, 2)})
    assert out == ("greatest(b_0, b_1), last(CASE WHEN exchange = 'XNYS' THEN bid END) AS b_0, "
                   "last(CASE WHEN exchange = 'Z''); DROP TABLE quotes; --' THEN bid END) AS b_1 "
                   "WHERE ts >= '2024-01-02'")
    with pytest.raises(ValueError, match="non-empty list"):
        bind("<<venues: b_@i>>", {"venues": []})


def test_market_ingest_reader_renames_every_market_table() -> None:
    """The market ingest store's readers send each market query file with its tables renamed to
    the store's; no market table name is left in the code, and the rest of the text is as written."""
    import re

    from tickbench.engines.questdb import market_ingest
    from tickbench.engines.questdb.market_ingest import store_sql

    names = {t: f"mi_0123456789ab_{t}" for t in ("instruments", "quotes", "trades")}
    folder = Path(market_ingest.__file__).parent / "queries"
    files = sorted(folder.glob("M-*.sql"))
    assert files
    for path in files:
        text = path.read_text()
        out = store_sql(text, names)
        code = "\n".join(line for line in out.splitlines() if not line.lstrip().startswith("--"))
        assert not re.findall(r"\b(instruments|quotes|trades)\b", code), path.name
        assert re.sub(r"mi_0123456789ab_", "", out) == text


def test_imp_schema_follows_schema_sql() -> None:
    from tickbench.datasets.paper.schema import SCHEMAS
    from tickbench.engines.questdb.schema import TS_PATTERN, imp_schema

    for table, schema in SCHEMAS.items():
        columns = imp_schema(table)
        assert [c["name"] for c in columns] == schema.names
        assert columns[0] == {"name": "ts", "type": "TIMESTAMP_NS", "pattern": TS_PATTERN}
    assert {c["name"]: c["type"] for c in imp_schema("trades")}["side"] == "SYMBOL"


def test_json_table_types_every_column() -> None:
    import pyarrow as pa

    from tickbench.engines.questdb.adapter import json_table

    answer = {"columns": [{"name": "ts", "type": "TIMESTAMP_NS"}, {"name": "sym", "type": "SYMBOL"},
                          {"name": "v", "type": "DOUBLE"}, {"name": "n", "type": "LONG"}],
              "dataset": [["2022-06-18T00:00:26.925756123Z", "BTC-USD", 0.1, 3],
                          ["2022-06-18T00:00:27.000000001Z", None, None, None]]}
    table = json_table(answer)
    assert table.schema == pa.schema([("ts", pa.timestamp("ns", "UTC")), ("sym", pa.string()),
                                      ("v", pa.float64()), ("n", pa.int64())])
    assert table.column("ts").cast(pa.int64()).to_pylist() == [1655510426925756123, 1655510427000000001]
    assert table.column("v").to_pylist() == [0.1, None]
    empty = json_table({"columns": answer["columns"], "dataset": []})
    assert empty.num_rows == 0 and empty.schema == table.schema
    with pytest.raises(RuntimeError, match="type UUID"):
        json_table({"columns": [{"name": "u", "type": "UUID"}], "dataset": []})


@pytest.fixture
def workdir() -> Iterator[Path]:
    # Not under pytest's tmp_path: its parents are private to root, and the server runs as
    # the unprivileged service user, which must reach its data directory.
    d = Path(tempfile.mkdtemp(prefix="tickbench-questdb-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def engine(workdir: Path, tiny: Dataset, tiny_params: QueryParams) -> Iterator[Engine]:
    e = adapter("questdb", workdir, tiny, tiny_params)
    e.start()
    try:
        yield e
    finally:
        e.stop()


def _listening(pid: int) -> list[tuple[str, int]]:
    """The (address, port) of every socket of process ``pid`` that listens or is bound (UDP)."""
    return [
        (c.laddr.ip, c.laddr.port)
        for c in psutil.net_connections(kind="inet")
        if c.pid == pid and c.laddr and (c.status == psutil.CONN_LISTEN or c.type.name == "SOCK_DGRAM")
    ]


@needs_server
@pytest.mark.server
def test_install_is_idempotent() -> None:
    from tickbench.engines.questdb.server import VERSION, jar_path

    cls = adapter_class("questdb")
    before = jar_path().stat().st_mtime_ns
    assert cls.install() == VERSION == cls.probe()
    assert jar_path().stat().st_mtime_ns == before  # nothing fetched again


@needs_server
@pytest.mark.server
@pytest.mark.slow
def test_listens_on_loopback_only_and_stops_cleanly(engine: Engine) -> None:
    pids = engine.memory_pids()
    assert len(pids) == 1
    pid = pids[0]
    sockets = _listening(pid)
    assert sockets, "the server should listen somewhere"
    assert all(ip == "127.0.0.1" for ip, _ in sockets), sockets
    assert {port for _, port in sockets} == set(engine.ports.values())  # type: ignore[attr-defined]
    # Its copy of the native library lies in its own data directory, not in the machine's /tmp.
    root: Path = engine.root  # type: ignore[attr-defined]
    assert list((root / "tmp").glob("libquestdb*.so")), "QuestDB's native library copy is not in DIR/tmp"
    engine.stop()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert engine.memory_pids() == []


@needs_server
@pytest.mark.server
@pytest.mark.slow
def test_load_restart_w_and_se(engine: Engine, tiny: Dataset, tiny_params: QueryParams,
                               workdir: Path) -> None:
    days = tiny_params.load_days()
    expected = sum(r["rows"] for r in tiny.manifest.partitions
                   if r["day"] in days and r["table"] in ("trades", "book"))
    first_pid = engine.memory_pids()[0]
    assert engine.load() == expected
    wait_visible(engine)  # the runner waits for QuestDB's WAL apply; the adapter does not
    # The load's rows committed under sync; the query cells run under QuestDB's default.
    assert engine.commit_mode == "nosync" and engine.memory_pids()[0] != first_pid  # type: ignore[attr-defined]
    shown = {r["property_path"]: r["value"] for r in engine._rows("SHOW PARAMETERS")}  # type: ignore[attr-defined]
    assert shown["cairo.commit.mode"] == "nosync"
    assert engine.run_query("O-B2").num_rows == 3
    assert engine.query_server_ns() > 0  # type: ignore[operator]  # /exec's own timings
    assert engine.run_query("O-T").num_rows == len(tiny_params.ot_times)

    # O-S comes as Parquet from /exp; its server time is its span in QuestDB's export log.
    from tickbench.engines.questdb.server import PARQUET_ANSWERS

    assert {"O-S", "T-V1", "O-V1"} <= PARQUET_ANSWERS
    assert engine.run_query("T-V1").num_rows > 0 and engine.query_server_ns() > 0  # type: ignore[operator]
    answer = engine.run_query("O-S")
    assert answer.schema.names == ["ts", "spread"] and str(answer.schema.field("ts").type) == "timestamp[ns, tz=UTC]"
    assert engine.query_server_ns() > 0  # type: ignore[operator]
    engine.run_query("O-S")
    engine._export("SELECT 1")  # type: ignore[attr-defined]  # another export before the reading
    assert engine.query_server_ns() is None  # two exports since the last reading: not ours alone
    engine.run_query("O-S")
    assert engine.query_server_ns() > 0  # type: ignore[operator]

    # Cold protocol: stop, start again on the same data (on fresh ports).
    engine.stop()
    engine.start()
    assert engine.run_query("O-B2").num_rows == 3

    rows = sum(v["rows"] for v in tiny.manifest.csv.values())
    engine.bulk_prepare()  # type: ignore[attr-defined]  # W commits durably again
    assert engine.commit_mode == "sync"  # type: ignore[attr-defined]
    for fmt in ("csv", "parquet"):
        for _ in range(2):  # a repeated W replaces its tables
            mine = engine.bulk_load(fmt, workdir / "w")
            wait_visible(engine)
            base = engine.baseline_load(fmt, workdir / "w")
            wait_visible(engine)
            assert mine.committed_rows() == base.committed_rows() == rows
            assert mine.input_bytes == base.input_bytes > 0

    se = engine.storage_bytes()
    assert next(iter(se)) == "bytes_on_disk"  # the runner's primary figure
    assert se["bytes_on_disk"] == se["partitions"] + se["table_files"] == se["data_bytes"] + se["index_bytes"]
    assert se["index_bytes"] == 0  # schema.sql indexes no symbol
    assert 0 < se["table_files"] < se["partitions"] / 10  # writers released: files trimmed
    assert engine.run_query("O-B2").num_rows == 3  # W left the query tables alone


@needs_server
@pytest.mark.server
@pytest.mark.slow
def test_the_runner_follows_a_server_the_load_restarted(tiny: Dataset, tiny_params: QueryParams,
                                                        workdir: Path) -> None:
    """The load restarts QuestDB into the queries' commit mode: the worker's reply names the new
    server, so the runner's kill (a timeout, a memory stop) reaches it and not the old pid."""
    from tickbench.run.engine_process import EngineProcess

    worker = EngineProcess("questdb", workdir, tiny.root, tiny_params)
    worker.spawn()
    try:
        started = worker.call(120, op="start")["pids"]
        worker.call(600, op="load")
        assert worker.server_pids and worker.server_pids != started
        assert not psutil.pid_exists(started[0]) or psutil.Process(started[0]).status() == psutil.STATUS_ZOMBIE
        running = worker.server_pids[0]
        assert psutil.Process(running).is_running()
        worker.kill()
        assert _ends(running), f"server pid {running} still runs 60 s after the runner's kill"
    finally:
        worker.kill()


def _ends(pid: int, within_s: float = 60.0) -> bool:
    """Whether process ``pid`` ends (gone, or a zombie awaiting its reaper) within ``within_s``:
    a SIGKILL is delivered asynchronously, later on a busy machine."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def market_engine(workdir: Path, market_tiny: Dataset, market_tiny_params: MarketParams) -> Iterator[Engine]:
    e = adapter("questdb", workdir, market_tiny, market_tiny_params)
    e.start()
    try:
        yield e
    finally:
        e.stop()


def _http_status(port: int, headers: dict[str, str]) -> int:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", "/exec?query=select%201", headers=headers)
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def _basic(user: str, password: str) -> dict[str, str]:
    import base64

    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def _pg_answers(port: int, user: str, password: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(host="127.0.0.1", port=port, user=user, password=password, dbname="qdb",
                             connect_timeout=30) as conn:
            return conn.execute("select 1").fetchone() == (1,)
    except psycopg.OperationalError:
        return False


@needs_server
@pytest.mark.server
@pytest.mark.slow
def test_market_load_hostile_baskets_and_m_se(market_engine: Engine, market_tiny: Dataset,
                                              market_tiny_params: MarketParams) -> None:
    from tickbench.engines.base import Storage

    engine = market_engine
    days = market_tiny_params.load_days()
    expected = sum(r["rows"] for r in market_tiny.manifest.partitions
                   if r["day"] in days and r["table"] in ("quotes", "trades"))
    assert isinstance(engine, Storage)
    assert engine.load() == expected + market_tiny.instruments().height
    wait_visible(engine)

    # Rows of one ts are stored in the load's (ts, exchange, seq) order, so LATEST ON (and ASOF
    # JOIN, first/last) take the greatest seq among a venue's quotes of one ts.
    from tickbench.engines.questdb.schema import bind

    quotes = pl.read_parquet(market_tiny.files("quotes", [market_tiny_params.D]))
    tie = (quotes.group_by("ts", "exchange", "sym").agg(pl.col("seq").max(), n=pl.len())
           .filter(pl.col("n") > 1).with_columns(pl.col("ts").cast(pl.Int64)).row(0, named=True))
    at = {"ts": iso_ns(tie["ts"]), "exchange": tie["exchange"], "sym": tie["sym"],
          "d_start": dt.datetime.fromisoformat(market_tiny_params.D)}
    run = engine._exec  # type: ignore[attr-defined]
    stored = [r[0] for r in run(bind("SELECT seq FROM quotes WHERE ts = $ts AND exchange = $exchange "
                                     "AND sym = $sym", at))["dataset"]]
    assert stored == sorted(stored) and len(stored) == tie["n"]
    latest = run(bind("SELECT seq FROM quotes WHERE ts >= $d_start AND ts <= $ts AND sym = $sym "
                      "AND exchange = $exchange LATEST ON ts PARTITION BY sym, exchange", at))
    assert latest["dataset"] == [[tie["seq"]]]

    # Basket names are data: bound as quoted literals, they match only themselves.
    real = market_tiny_params.B[0]
    hostile = [real, "x') OR 1=1 --", "S1'; DROP TABLE quotes; --", "back\\slash'", "é"]
    engine.params = dataclasses.replace(market_tiny_params, B=tuple(hostile))
    answer = engine.run_query("M-HIBID-D")
    assert answer.column("sym").to_pylist() == [real]
    engine.params = market_tiny_params
    assert engine.run_query("M-HIBID-D").num_rows == len(market_tiny_params.B)  # quotes is still there

    se = engine.storage_bytes()
    assert next(iter(se)) == "bytes_on_disk" and se["bytes_on_disk"] == se["partitions"] + se["table_files"]
    assert se["partitions"] > 0
    assert se["index_bytes"] > 0 and se["data_bytes"] + se["index_bytes"] == se["bytes_on_disk"]  # the sym index
    assert engine.run_query("M-TOPN").num_rows == 20  # the restart kept the loaded days


@needs_server
@pytest.mark.server
def test_market_ingest_store_counts_to_the_ns_and_its_readers_verify(
        market_engine: Engine, market_tiny: Dataset, market_tiny_params: MarketParams, workdir: Path) -> None:
    """The market ingest store: mi_<tag>_* tables beside the others, written over ILP, counted
    to the nanosecond once the WAL is applied, M-SNAP verified through a user's reader with
    the file's tables renamed; its tables dropped at close."""
    from tests.market_ingest_checks import check_market_ingest

    def leftovers() -> set[str]:
        rows = market_engine._rows("SELECT table_name FROM tables()")  # type: ignore[attr-defined]
        return {str(r["table_name"]) for r in rows if str(r["table_name"]).startswith("mi_")}

    check_market_ingest(market_engine, market_tiny, market_tiny_params, workdir / "market-ingest", leftovers)
def test_http_and_pg_wire_require_the_runs_secret(engine: Engine) -> None:
    """QuestDB's default admin/quest, no credentials, and a wrong password are refused on both
    ports; the random secret of the run works; the data directory is the server's alone."""
    import os
    import pwd
    import stat

    from tickbench.engines.server import ensure_service_user

    ports: dict[str, int] = engine.ports  # type: ignore[attr-defined]
    user, secret = engine.credentials()  # type: ignore[attr-defined]
    assert user != "admin" and secret != "quest" and len(secret) >= 24
    assert _http_status(ports["http"], {}) == 401
    assert _http_status(ports["http"], _basic("admin", "quest")) == 401
    assert _http_status(ports["http"], _basic(user, secret + "x")) == 401
    assert _http_status(ports["http"], _basic(user, secret)) == 200
    assert not _pg_answers(ports["pg"], "admin", "quest")
    assert not _pg_answers(ports["pg"], user, secret + "x")
    assert _pg_answers(ports["pg"], user, secret)
    # The data directory (its server.conf holds the secret): mode 0700, the servers' user's.
    root: Path = engine.root  # type: ignore[attr-defined]
    st = root.stat()
    assert stat.S_IMODE(st.st_mode) == 0o700
    service = ensure_service_user()
    assert st.st_uid == (os.getuid() if service is None else pwd.getpwnam(service).pw_uid)
    assert stat.S_IMODE(engine.secret_file.stat().st_mode) == 0o600  # type: ignore[attr-defined]
    # A second start over the same working directory keeps the secret (the server's state may hold it).
    engine.stop()
    engine.start()
    assert engine.credentials() == (user, secret)  # type: ignore[attr-defined]
    assert _http_status(engine.ports["http"], _basic(user, secret)) == 200  # type: ignore[attr-defined]


@needs_server
@pytest.mark.server
@pytest.mark.slow
def test_both_datasets_load_w_and_query_under_the_same_commit_modes(
        workdir: Path, tiny: Dataset, tiny_params: QueryParams, market_tiny: Dataset,
        market_tiny_params: MarketParams) -> None:
    """The paper's and the market's datasets through the suites' own operations: each query store
    is queried under one commit mode, and W and M-W each load under one durable mode, as the
    server itself reports its setting (SHOW PARAMETERS, recorded in settings())."""
    from tickbench.suites.cells import bulk_op

    def mode(e: Engine) -> str:
        return str(e.settings()["cairo.commit.mode"])

    seen: dict[str, tuple[str, str, str]] = {}
    runs = (("paper", tiny, tiny_params), ("market", market_tiny, market_tiny_params))
    for kind, ds, params in runs:
        # a working directory of its own per dataset, as the workdir fixture makes it
        own = workdir if kind == "paper" else Path(tempfile.mkdtemp(prefix="tickbench-questdb-"))
        e = adapter("questdb", own, ds, params)
        e.start()
        try:
            assert e.load() > 0
            wait_visible(e)
            queries = mode(e)
            assert e.commit_mode == queries  # type: ignore[attr-defined]  # what server.conf was written with
            w = bulk_op(e, {"fmt": "parquet", "scratch": str(own / "w")})
            assert w["rows"] > 0
            during_w = mode(e)
            assert f"cairo.commit.mode={during_w}" in w["detail"]["durability"]
            seen[kind] = (queries, during_w, w["detail"]["durability"])
        finally:
            e.stop()
            if own != workdir:
                shutil.rmtree(own, ignore_errors=True)
    assert seen["market"] == seen["paper"], seen
