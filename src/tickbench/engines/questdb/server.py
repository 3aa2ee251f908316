"""QuestDB's server (:class:`QuestDBServer`): a JVM on 127.0.0.1 with its own data directory in
the run's working directory; its install, ``server.conf``, readiness, the HTTP transport every
part uses, an external endpoint's prefixed tables, the WAL apply and the settings recorded.

Everything goes over QuestDB's HTTP port: ILP over HTTP for loads from Parquet and for the ingest
capability's writes, ``/imp`` for the CSV bulk load, ``/exec`` for DDL and the benchmark queries
whose answers are a row per bucket or group (with ``timings=true``: QuestDB's own execute
time, the server-side time), ``/exp?fmt=parquet`` for the answers with a row per stored
row (:data:`PARQUET_ANSWERS`; the server-side time from QuestDB's export log) and for the ingest
suites' reads; the benchmark queries over one kept-alive connection per client thread.

The server runs with ``cairo.commit.mode=sync`` (each commit flushes what it wrote to disk before
it is acknowledged), so that loads and W are durable as the SPEC asks; the ingest suites restart it
under the commit mode they compare.

QuestDB acknowledges a write once it is committed to the table's WAL and applies it to the table
(where queries see it) a little later, asynchronously. So after its own writes the adapter notes
each table's sequencer transaction (one query) and :meth:`QuestDBServer.pending_visibility` answers
whether a table's applied transaction is still below it; the runner waits on that.

On an external endpoint (``--endpoint questdb=HOST:HTTP_PORT``) QuestDB has one namespace (no
databases or schemas), so tickbench's tables take a prefix (``tickbench_trades`` …) and are
listed, as they are created, in a marker table ``<prefix>_marker``; the query files' table
names after ``FROM`` are prefixed as they are sent (``FROM_TABLE`` in ``adapter.py``). See the README.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import urllib.parse
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from questdb import Sender

from tickbench.datasets.paper.schema import TABLES
from tickbench.engines.base import EngineUnavailable
from tickbench.engines.questdb.schema import CREATE, SCHEMA
from tickbench.engines.server import (
    ENDPOINT_TIMEOUT_S,
    LOOPBACK,
    InstallStep,
    ReaderPool,
    ServerEngine,
    tools_dir,
)

VERSION = "9.3.4"  # the newest org.questdb:questdb that resolves from Maven
ARTIFACT = f"org.questdb:questdb:{VERSION}"
HEAP = "-Xmx4g"  # QuestDB keeps column data off-heap (mmap); the heap holds queries' state
ILP_FLUSH_BYTES = 64 << 20  # one ILP/HTTP request (one WAL transaction) per 64 MiB of rows
WAL_STATE = "SELECT name, suspended, writerTxn, sequencerTxn, errorMessage FROM wal_tables()"
# Not QuestDB's own default (nosync): W and the load must be committed durably (SPEC), and sync
# is the mode that flushes each commit to disk before acknowledging it.
DEFAULT_COMMIT_MODE = "sync"
# The query cells' mode, QuestDB's default, into which the query store's load restarts the server
# once its rows are applied: a query writes nothing of the user's, only /exp's export log (three
# commits per Parquet answer, each a flush to disk under sync: +2.4 ms of QuestDB's time on
# T-V1 at SF 1, and one more flush after the export's last logged phase).
QUERY_COMMIT_MODE = "nosync"
# A reader's keep-alive connection idle this long is replaced before its next request: QuestDB
# closes idle HTTP connections after http.net.connection.timeout (5 min by default).
READER_IDLE_S = 60.0
# The benchmark answers of thousands of rows come as Parquet from /exp. O-S (every snapshot of S on
# D, 520,874 rows at SF 1): as /exec JSON it cost QuestDB 4x the time to write and Python more than
# that again to parse (1,088 ms against 235 ms of server time at SF 1). T-V1 (8,549 rows) and O-V1
# (10,080): JSON's parsing into Arrow left 6-12 ms between the client's time and QuestDB's, Parquet
# 2.2-2.4 ms (both paths interleaved on one SF 1 store under nosync, 2026-11-26; the README's
# Results). The other answers have at most 1,440 rows and come as fast or faster as JSON, without
# the export log's commits.
PARQUET_ANSWERS = frozenset({"O-S", "T-V1", "O-V1"})

# /exec column types as Arrow types (TIMESTAMP* and DATE come as ISO-8601 text in UTC).
JSON_TYPES: dict[str, pa.DataType] = {
    "DOUBLE": pa.float64(), "FLOAT": pa.float32(), "LONG": pa.int64(), "INT": pa.int32(), "SHORT": pa.int16(),
    "BYTE": pa.int8(), "BOOLEAN": pa.bool_(), "SYMBOL": pa.string(), "STRING": pa.string(), "VARCHAR": pa.string(),
    "CHAR": pa.string(), "TIMESTAMP": pa.timestamp("us", "UTC"), "TIMESTAMP_NS": pa.timestamp("ns", "UTC"),
    "DATE": pa.timestamp("ms", "UTC"),
}


def jar_path() -> Path:
    return tools_dir() / "questdb" / f"questdb-{VERSION}.jar"


class QuestDBServer(ServerEngine):
    """QuestDB's server and its transport; :class:`~tickbench.engines.questdb.load.QuestDBLoad`
    (the query store, W, SE), :class:`~tickbench.engines.questdb.ingest.QuestDBIngest` (the ingest
    store) and the query path (``adapter.py``) work through it."""

    server_name = "questdb"
    data_dir = "qdb"  # QuestDB's root directory (-d): conf/, db/, import/
    port_names = ("http", "pg")
    #: HTTP basic authentication and the PG wire both require this user and its random password
    #: (http.user and pg.user in server.conf): QuestDB's default admin/quest is refused.
    secret_user = "tickbench"
    start_timeout = 180.0
    #: The server's cairo.commit.mode, written into server.conf at every start: it outlives a
    #: stop, so a restart (the durability suite's recovery) comes back under the same setting.
    commit_mode: str = DEFAULT_COMMIT_MODE
    external_endpoint = True  # prefixed tables, listed in a marker table (see the module docstring)
    namespace_kind = "table prefix"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The sequencer transaction, per table, that this adapter's own writes reached.
        self.awaited: dict[str, int] = {}
        #: The benchmark queries' kept-alive connections (one per thread), while connected.
        self.query_conns: ReaderPool[http.client.HTTPConnection] | None = None

    # ---- install / probe -------------------------------------------------------------------

    @classmethod
    def probe(cls) -> str:
        cls.require_installed()
        if shutil.which("java") is None:
            raise EngineUnavailable("java (17 or newer) is not on PATH")
        return VERSION

    @classmethod
    def installed(cls) -> bool:
        return jar_path().is_file()

    @classmethod
    def install_steps(cls, stage: Path) -> list[InstallStep]:
        mvn = shutil.which("mvn")
        if mvn is None:
            raise EngineUnavailable("Maven (`mvn`) is needed to fetch the QuestDB jar")
        return [InstallStep([mvn, "-q", "-B", "dependency:copy", f"-Dartifact={ARTIFACT}",
                             f"-DoutputDirectory={stage}"], f"fetching {ARTIFACT} with Maven")]

    @classmethod
    def install_staged(cls, stage: Path) -> None:
        fetched = stage / jar_path().name
        fetched.chmod(0o644)
        jar_path().parent.mkdir(parents=True, exist_ok=True)
        os.replace(fetched, jar_path())

    # ---- server ----------------------------------------------------------------------------

    def reachable(self) -> list[Path]:
        return [jar_path()]

    def prepare(self, user: str | None) -> list[str]:
        """server.conf: every listener on 127.0.0.1 and its port, each requiring the run's
        secret (:meth:`secret`), telemetry off."""
        ports = self.ports
        secret = self.secret()
        conf = {
            "http.net.bind.to": f"{LOOPBACK}:{ports['http']}",
            "http.user": str(self.secret_user),  # basic authentication on /exec, /exp, /imp and ILP/HTTP
            "http.password": secret,
            "http.min.enabled": "false",  # health/metrics port: not used, so not opened
            "pg.net.bind.to": f"{LOOPBACK}:{ports['pg']}",
            "pg.user": str(self.secret_user),  # replaces admin/quest
            "pg.password": secret,
            # ILP over TCP authenticates only with keys of its own and nothing here uses it
            # (ILP goes over HTTP): closed, rather than a port that writes without the secret.
            "line.tcp.enabled": "false",
            "line.udp.enabled": "false",
            "telemetry.enabled": "false",
            "cairo.sql.copy.root": str(self.root / "import"),
            # The runner owns query timeouts; QuestDB's own default (60 s) would cut long ones.
            "query.timeout": "600000",
            "cairo.commit.mode": self.commit_mode,  # the ingest durability setting (ingest_open)
            # /exp (every result) allows 2 connections at once by default: the concurrency
            # suite's clients and the stream suite's readers need more; -1 is no limit, as for /exec.
            "http.export.connection.limit": "-1",
        }
        (self.root / "conf").mkdir(parents=True, exist_ok=True)
        (self.root / "import").mkdir(exist_ok=True)
        (self.root / "tmp").mkdir(exist_ok=True)
        server_conf = self.root / "conf" / "server.conf"
        server_conf.touch(mode=0o600)  # it holds the secret
        server_conf.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        java = shutil.which("java") or "java"
        # QuestDB copies its native library into java.io.tmpdir at every start and leaves it there
        # when the JVM is killed: keep that copy inside the data directory, removed with it.
        tmp = f"-Djava.io.tmpdir={self.root / 'tmp'}"
        return [java, HEAP, tmp, "-p", str(jar_path()), "-m", "io.questdb/io.questdb.ServerMain", "-d", str(self.root)]

    def ready(self) -> bool:
        # A connection of its own with a short timeout: an endpoint that accepts and never
        # answers fails the check instead of hanging it.
        conn = http.client.HTTPConnection(self.host, self.ports["http"], timeout=ENDPOINT_TIMEOUT_S)
        try:
            conn.request("GET", "/exec?" + urllib.parse.urlencode({"query": "select 1"}), headers=self.http_auth())
            resp = conn.getresponse()
            resp.read()
            return resp.status == 200
        finally:
            conn.close()

    def connect(self) -> None:
        self.query_conns = ReaderPool(self._conn, READER_IDLE_S)

    def disconnect(self) -> None:
        if self.query_conns is not None:
            self.query_conns.close()
            self.query_conns = None

    # ---- an external endpoint: prefixed tables and their marker table ----------------------

    def table(self, name: str) -> str:
        """The server's name of tickbench's table ``name`` (prefixed on an external endpoint)."""
        return f"{self.namespace}_{name}" if self.endpoint else name

    @property
    def marker_table(self) -> str:
        return self.table("marker")

    def _own_names(self) -> tuple[set[str], set[str] | None]:
        """The server's tables, and those the marker table lists as tickbench's (``None``: a
        table of the marker's name that is not tickbench's marker)."""
        existing = {r["table_name"] for r in self._rows("SELECT table_name FROM tables()")}
        if self.marker_table not in existing:
            return existing, set()
        try:
            return existing, {r["tbl"] for r in self._rows(f"SELECT DISTINCT tbl FROM {self.marker_table}")}
        except RuntimeError:  # no column tbl: the user's table, not tickbench's marker
            return existing, None

    def foreign_tables(self) -> list[str]:
        existing, own = self._own_names()
        names = [self.table(t) for t in TABLES]
        if own is None:
            return [self.marker_table, *(n for n in names if n in existing)]
        return [n for n in names if n in existing and n not in own]

    def _mark(self, name: str) -> None:
        """List ``name`` in the marker table before creating it (a non-WAL table: the row is
        visible at once), so that an interrupted run leaves nothing unmarked behind."""
        self._exec(f"CREATE TABLE IF NOT EXISTS {self.marker_table} (tbl SYMBOL, created TIMESTAMP)")
        self._exec(f"INSERT INTO {self.marker_table} VALUES ('{name}', now())")

    def drop_own(self) -> None:
        existing, own = self._own_names()
        if own is None:  # the marker's name is the user's table: nothing here is known to be ours
            return
        for name in sorted(own & existing):
            self._exec(f"DROP TABLE IF EXISTS {name}")
        if self.marker_table in existing:
            self._exec(f"DROP TABLE {self.marker_table}")

    def server_version(self) -> str:
        return str(self._exec("SELECT build()")["dataset"][0][0])

    # ---- HTTP ------------------------------------------------------------------------------

    def _conn(self) -> http.client.HTTPConnection:
        self.require_running()
        # One connection per request: nothing to go stale between the runner's repetitions.
        return http.client.HTTPConnection(self.host, self.ports["http"], timeout=3600)

    def _get(self, path: str, query: dict[str, str] | str, keep: bool = False,
             pool: ReaderPool[http.client.HTTPConnection] | None = None) -> tuple[int, bytes]:
        """GET ``path?query`` (``query`` a dict, or already URL-encoded): the status and the
        whole body. ``keep``: on this thread's connection of ``pool`` (the ingest readers' by
        default): a new connection per request would add its setup to every measured request; it
        is left open for the next one unless the server closes it or answers with an error.
        Otherwise on a connection of its own."""
        if keep and pool is None:
            pool = self.readers
            if pool is None:
                raise RuntimeError("the ingest store is not open")
        conn = pool.get() if pool is not None else self._conn()
        reuse = False
        try:
            encoded = query if isinstance(query, str) else urllib.parse.urlencode(query)
            conn.request("GET", path + "?" + encoded, headers=self.http_auth())
            resp = conn.getresponse()
            body = resp.read()
            reuse = pool is not None and resp.status == 200 and not resp.will_close
            return resp.status, body
        finally:
            if not reuse:
                if pool is not None:
                    pool.discard()
                else:
                    conn.close()

    def _exec(self, sql: str, keep: bool = False,
              pool: ReaderPool[http.client.HTTPConnection] | None = None) -> dict[str, Any]:
        """Run one statement through ``/exec``; its JSON answer (raise on an error)."""
        status, body = self._get("/exec", {"query": sql}, keep, pool)
        answer: dict[str, Any] = json.loads(body)
        if status != 200 or "error" in answer:
            raise RuntimeError(f"QuestDB: {answer.get('error', body[:500])} in: {sql[:200]}")
        return answer

    def _answer(self, sql: str, pool: ReaderPool[http.client.HTTPConnection], timings: bool = False,
                form: str | None = None) -> dict[str, Any]:
        """A query's answer from ``/exec`` on this thread's connection of ``pool`` (``timings``:
        with QuestDB's own timings; ``form``: ``sql`` already URL-encoded, see
        :func:`~tickbench.engines.questdb.schema.bind_form`), parsed by orjson: the standard
        library's parser took most of the client's time on answers of thousands of rows. Raise
        on an error."""
        query: dict[str, str] | str
        if form is not None:
            query = "query=" + form + ("&timings=true" if timings else "")
        else:
            query = {"query": sql, "timings": "true"} if timings else {"query": sql}
        status, body = self._get("/exec", query, pool=pool)
        answer: dict[str, Any] = orjson.loads(body)
        if status != 200 or "error" in answer:
            raise RuntimeError(f"QuestDB: {answer.get('error', body[:500])} in: {sql[:200]}")
        return answer

    def _rows(self, sql: str) -> list[dict[str, Any]]:
        """A small result from ``/exec`` as dicts."""
        answer = self._exec(sql)
        names = [c["name"] for c in answer["columns"]]
        return [dict(zip(names, row, strict=True)) for row in answer["dataset"]]

    def _export(self, sql: str, keep: bool = False,
                pool: ReaderPool[http.client.HTTPConnection] | None = None) -> pa.Table:
        """A whole result as Parquet from ``/exp``: columnar, nanosecond timestamps, and several
        times faster than rows over the PG wire or JSON for large answers. Uncompressed, since
        it only crosses the loopback."""
        status, body = self._get("/exp", {"query": sql, "fmt": "parquet",
                                          "compression_codec": "uncompressed"}, keep, pool)
        if status != 200:
            try:
                reason = json.loads(body).get("error", "")
            except ValueError:
                reason = body[:500].decode(errors="replace")
            raise RuntimeError(f"QuestDB: {reason}")
        return pq.read_table(pa.BufferReader(body))

    # ---- visibility: the WAL apply ----------------------------------------------------------

    def wal_txns(self, tables: Iterable[str]) -> dict[str, int]:
        """Each of ``tables``' sequencer transaction now: what its committed writes reached."""
        wanted = set(tables)
        return {r["name"]: int(r["sequencerTxn"]) for r in self._rows(WAL_STATE) if r["name"] in wanted}

    def wal_pending(self, target: dict[str, int]) -> bool:
        """Whether a table's applied transaction (``writerTxn``, what queries see) is still below
        ``target``; a suspended table (its apply failed) raises."""
        pending = False
        for row in self._rows(WAL_STATE):
            if row["name"] in target:
                if row["suspended"]:
                    raise RuntimeError(f"QuestDB suspended WAL table {row['name']}: {row['errorMessage']}")
                pending = pending or int(row["writerTxn"]) < target[row["name"]]
        return pending

    def _await(self, tables: Iterable[str]) -> None:
        """Note that ``tables`` must be applied up to what is committed now."""
        self.awaited.update(self.wal_txns(tables))

    def pending_visibility(self) -> bool:
        if self.awaited and not self.wal_pending(self.awaited):
            self.awaited = {}
        return bool(self.awaited)

    # ---- tables and ILP: the query store's, W's and the ingest store's ---------------------

    def _create(self, table: str, name: str) -> None:
        """Create ``name`` with the schema of ``table``, replacing any earlier one."""
        self._exec(f"DROP TABLE IF EXISTS {name}")
        self._exec(CREATE.sub(f"CREATE TABLE {name}", SCHEMA[table], count=1))

    def _sender(self) -> Sender:
        # ILP over HTTP: each request is acknowledged after its WAL commit and errors come back
        # (ILP over TCP drops a bad batch silently). Protocol 2 sends doubles in binary;
        # retry_timeout=0: a failed flush is an error, never retried.
        return Sender.from_conf(
            f"http::addr={self.host}:{self.ports['http']};protocol_version=2;retry_timeout=0;{self.ilp_auth()}"
            f"auto_flush_rows=off;auto_flush_interval=off;auto_flush_bytes={ILP_FLUSH_BYTES};")

    def ilp_auth(self) -> str:
        """ILP/HTTP's basic authentication as ``Sender`` configuration (empty without credentials)."""
        creds = self.credentials()
        return "" if creds is None else f"username={creds[0]};password={creds[1]};"

    # ---- settings --------------------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        keys = {"cairo.commit.mode", "cairo.wal.enabled.default", "shared.worker.count",
                "cairo.sql.jit.mode", "cairo.sql.parallel.groupby.enabled", "query.timeout",
                "cairo.max.uncommitted.rows", "http.export.connection.limit"}
        params = {r["property_path"]: r["value"] for r in self._rows("SHOW PARAMETERS")
                  if r["property_path"] in keys}
        results = {"results": (f"HTTP /exp Parquet for {', '.join(sorted(PARQUET_ANSWERS))}, /exec JSON (timings=true) "
                               "for the rest, one kept-alive connection per client"),
                   "server_time": ("/exec: timings.execute (compilation included); /exp Parquet: the export's span in "
                                   "sys.copy_export_log (stream_sending_data started to success)")}
        if self.endpoint is not None:  # the user's server: its own version and heap
            return {"wal": True, "load": "ILP over HTTP (protocol 2)", **results, **params}
        modes = (f"the load and W: {DEFAULT_COMMIT_MODE}; the query cells: {QUERY_COMMIT_MODE} (the server restarted "
                 "once the load's rows are applied)")
        return {"version": VERSION, "jvm_heap": HEAP, "wal": True, "load": "ILP over HTTP (protocol 2)",
                "commit_modes": modes, **results, **params}


def json_answer(table: pa.Table) -> bytes:
    """``table`` as ``/exec`` sends it (``columns`` with QuestDB types, ``dataset`` rows,
    timestamps as ISO-8601 text in UTC): the body :func:`json_table` parses, for the harness's
    ceiling (:meth:`~tickbench.engines.base.Engine.client_decoder`)."""
    columns, data = [], []
    for field, column in zip(table.schema, table.columns, strict=True):
        kind = field.type
        if pa.types.is_date(kind):
            kind, column = pa.timestamp("ms", "UTC"), column.cast(pa.timestamp("ms", "UTC"))
        if pa.types.is_timestamp(kind):
            name = "TIMESTAMP_NS" if kind.unit == "ns" else "DATE" if kind.unit == "ms" else "TIMESTAMP"
            text = pc.strftime(column.cast(pa.timestamp(kind.unit, "UTC")), format="%Y-%m-%dT%H:%M:%S", locale="C")
            column = pc.binary_join_element_wise(text, "Z", "")
        elif pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_dictionary(kind):
            name = "STRING"
        else:
            found = next((n for n, t in JSON_TYPES.items() if t == kind and n != "DATE"), None)
            if found is None:
                raise ValueError(f"column {field.name}: no QuestDB type for {kind}")
            name = found
        columns.append({"name": field.name, "type": name})
        data.append(column.to_pylist())
    return orjson.dumps({"columns": columns, "dataset": [list(r) for r in zip(*data, strict=True)]})


def json_table(answer: dict[str, Any]) -> pa.Table:
    """An ``/exec`` answer (``columns`` with QuestDB types, ``dataset`` rows) as Arrow."""
    rows = answer["dataset"]
    arrays = []
    for i, column in enumerate(answer["columns"]):
        target = JSON_TYPES.get(column["type"])
        if target is None:
            raise RuntimeError(f"QuestDB column {column['name']}: type {column['type']} has no Arrow type here")
        data = [row[i] for row in rows]  # a column at a time: zip(*rows) is several times slower
        if pa.types.is_timestamp(target):  # ISO-8601 text ending in Z
            arrays.append(pa.array(data, pa.string()).cast(target))
        else:
            arrays.append(pa.array(data, target))
    return pa.table(arrays, names=[c["name"] for c in answer["columns"]])
