"""QuestDB, a server (JVM) on 127.0.0.1 with its own data directory in the run's working directory.

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
each table's sequencer transaction (one query) and :meth:`Adapter.pending_visibility` answers
whether a table's applied transaction is still below it; the runner waits on that.

On an external endpoint (``--endpoint questdb=HOST:HTTP_PORT``) QuestDB has one namespace (no
databases or schemas), so tickbench's tables take a prefix (``tickbench_trades`` …) and are
listed, as they are created, in a marker table ``<prefix>_marker``; the query files' table
names after ``FROM`` are prefixed as they are sent (:data:`FROM_TABLE`). See the README.
"""

from __future__ import annotations

import html
import http.client
import json
import os
import re
import shutil
import urllib.parse
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from questdb import Sender

from tickbench.data.schema import SCHEMAS, TABLES
from tickbench.engines.base import (
    BulkLoad,
    EngineTime,
    EngineUnavailable,
    Ingest,
    IngestClient,
    LoadFigures,
    Storage,
    StreamTarget,
)
from tickbench.engines.questdb.market import QuestDBMarket
from tickbench.engines.questdb.schema import CREATE, INGEST, SCHEMA, SYMBOLS, TS_PATTERN, bind, imp_schema
from tickbench.engines.questdb.writer import IlpTarget, Writer
from tickbench.engines.server import LOOPBACK, InstallStep, ReaderPool, ServerEngine, tools_dir

VERSION = "9.3.4"  # the newest org.questdb:questdb that resolves from Maven
ARTIFACT = f"org.questdb:questdb:{VERSION}"
HEAP = "-Xmx4g"  # QuestDB keeps column data off-heap (mmap); the heap holds queries' state
ILP_FLUSH_BYTES = 64 << 20  # one ILP/HTTP request (one WAL transaction) per 64 MiB of rows
WAL_STATE = "SELECT name, suspended, writerTxn, sequencerTxn, errorMessage FROM wal_tables()"

# -- ingest (tick-latency, stream and durability suites) -------------------------------------
INGEST_READ = {
    "trades": "SELECT * FROM ingest_trades WHERE sym = $sym ORDER BY ts, trade_id",
    "book": "SELECT * FROM ingest_book WHERE sym = $sym ORDER BY ts",
}
INGEST_COUNT = {t: f"SELECT count() FROM {name}" for t, name in INGEST.items()}
INGEST_LATEST = " ".join(line for line in (Path(__file__).parent / "ingest_latest.sql").read_text().splitlines()
                         if not line.lstrip().startswith("--")).strip()
# Not QuestDB's own default (nosync): W and the load must be committed durably (SPEC), and sync
# is the mode that flushes each commit to disk before acknowledging it.
DEFAULT_COMMIT_MODE = "sync"
# The durability settings: QuestDB's cairo.commit.mode, server-wide and read at startup.
COMMIT_MODES = {"commit_mode=nosync": "nosync", "commit_mode=async": "async", "commit_mode=sync": "sync"}
# A writer's ILP/HTTP request may take this long (ms): the runner owns timeouts, and a stalled
# commit must show as latency, not be cut by the client's own 10 s default into an error.
ILP_REQUEST_TIMEOUT_MS = 600_000
# External endpoints: a table name the query files read (after FROM), to be prefixed.
FROM_TABLE = re.compile(r"\b(FROM\s+\(?\s*)(trades|book)\b")
# A reader's keep-alive connection idle this long is replaced before its next request: QuestDB
# closes idle HTTP connections after http.net.connection.timeout (5 min by default).
READER_IDLE_S = 60.0
# The benchmark answers with a row per stored row (O-S: every snapshot of S on D, 520,874 rows at
# SF 1) come as Parquet from /exp: as /exec JSON they cost QuestDB 4x the time to write and Python
# more than that again to parse (1,088 ms against 235 ms of server time at SF 1). Every other answer
# is a row per bucket or group, at most 10,080 rows at any scale, and comes faster as JSON: each
# /exp Parquet export also commits three rows to QuestDB's export log (below), tens of ms under
# cairo.commit.mode=sync.
PARQUET_ANSWERS = frozenset({"O-S"})
# QuestDB 9.3 logs each /exp Parquet export in this table (phases with their µs timestamps),
# committed before the answer's last byte: the server-side time of a Parquet answer. {after}: the
# µs timestamp of the last row already read.
EXPORT_LOG = ('SELECT id, phase, status, cast(ts AS LONG) AS us FROM "sys.copy_export_log" '
              "WHERE ts > cast({after} AS TIMESTAMP)")
EXPORT_PHASES = [("stream_sending_data", "started"), ("stream_sending_data", "finished"), ("success", "finished")]
# /exec column types as Arrow types (TIMESTAMP* and DATE come as ISO-8601 text in UTC).
JSON_TYPES: dict[str, pa.DataType] = {
    "DOUBLE": pa.float64(), "FLOAT": pa.float32(), "LONG": pa.int64(), "INT": pa.int32(), "SHORT": pa.int16(),
    "BYTE": pa.int8(), "BOOLEAN": pa.bool_(), "SYMBOL": pa.string(), "STRING": pa.string(), "VARCHAR": pa.string(),
    "CHAR": pa.string(), "TIMESTAMP": pa.timestamp("us", "UTC"), "TIMESTAMP_NS": pa.timestamp("ns", "UTC"),
    "DATE": pa.timestamp("ms", "UTC"),
}


def jar_path() -> Path:
    return tools_dir() / "questdb" / f"questdb-{VERSION}.jar"


class Adapter(ServerEngine, BulkLoad, Storage, Ingest, EngineTime, QuestDBMarket):
    server_name = "questdb"
    data_dir = "qdb"  # QuestDB's root directory (-d): conf/, db/, import/
    port_names = ("http", "pg", "ilp_tcp")
    start_timeout = 180.0
    ingest_marker = "questdb-ingest.json"
    #: The server's cairo.commit.mode, written into server.conf at every start: it outlives a
    #: stop, so a restart (the durability suite's recovery) comes back under the same setting.
    commit_mode: str = DEFAULT_COMMIT_MODE
    ingest_durability: ClassVar[dict[str, str]] = {
        "commit_mode=nosync": (
            "QuestDB's default cairo.commit.mode=nosync: acknowledged once the write's WAL transaction "
            "is committed (written to the table's WAL segment and its sequencer's transaction log "
            "through mmap), nothing flushed to disk: survives a crash of the server process, not an "
            "OS crash or a power loss"),
        "commit_mode=async": (
            "cairo.commit.mode=async: as nosync, and each commit also schedules a flush of the WAL files "
            "it wrote (msync MS_ASYNC) without waiting for it: survives a crash of the server process; "
            "an OS crash can lose the last acknowledged commits"),
        "commit_mode=sync": (
            "cairo.commit.mode=sync: each commit waits for the flush (msync MS_SYNC) of the WAL files it "
            "appended and of the sequencer's transaction log before it is acknowledged: survives a crash "
            "of the server process, and an OS crash as far as the disk honours the flush"),
    }
    # Every mode writes through mmap into the page cache, which outlives a killed process, so
    # none loses an acknowledged row when the server's processes are killed (QuestDB's docs:
    # every commit mode survives a crash of the QuestDB process); they differ only on an OS
    # crash or a power loss, which the durability suite does not cause.
    ingest_durable: ClassVar[frozenset[str]] = frozenset(ingest_durability)
    ingest_setting: str | None = None  # the open ingest store's durability setting
    external_endpoint = True  # prefixed tables, listed in a marker table (see the module docstring)
    namespace_kind = "table prefix"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The sequencer transaction, per table, that this adapter's own writes reached.
        self.awaited: dict[str, int] = {}
        #: The benchmark queries' kept-alive connections (one per thread), while connected.
        self.query_conns: ReaderPool[http.client.HTTPConnection] | None = None
        #: QuestDB's own time of the last /exec query (timings.execute), in ns.
        self.last_server_ns: int | None = None
        #: Whether the last query's answer came from /exp Parquet (its time is in the export log).
        self.last_exported = False
        #: The µs timestamp of the last export log row :meth:`query_server_ns` read.
        self.export_log_mark = 0

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
        """server.conf: every listener on 127.0.0.1 and its port, telemetry off."""
        ports = self.ports
        conf = {
            "http.net.bind.to": f"{LOOPBACK}:{ports['http']}",
            "http.min.enabled": "false",  # health/metrics port: not used, so not opened
            "pg.net.bind.to": f"{LOOPBACK}:{ports['pg']}",
            "line.tcp.net.bind.to": f"{LOOPBACK}:{ports['ilp_tcp']}",
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
        (self.root / "conf" / "server.conf").write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        java = shutil.which("java") or "java"
        # QuestDB copies its native library into java.io.tmpdir at every start and leaves it there
        # when the JVM is killed: keep that copy inside the data directory, removed with it.
        tmp = f"-Djava.io.tmpdir={self.root / 'tmp'}"
        return [java, HEAP, tmp, "-p", str(jar_path()), "-m", "io.questdb/io.questdb.ServerMain", "-d", str(self.root)]

    def ready(self) -> bool:
        return self._get("/exec", {"query": "select 1"})[0] == 200

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

    def _get(self, path: str, query: dict[str, str], keep: bool = False,
             pool: ReaderPool[http.client.HTTPConnection] | None = None) -> tuple[int, bytes]:
        """GET ``path?query``: the status and the whole body. ``keep``: on this thread's
        connection of ``pool`` (the ingest readers' by default): a new connection per request
        would add its setup to every measured request; it is left open for the next one unless
        the server closes it or answers with an error. Otherwise on a connection of its own."""
        if keep and pool is None:
            pool = self.readers
            if pool is None:
                raise RuntimeError("the ingest store is not open")
        conn = pool.get() if pool is not None else self._conn()
        reuse = False
        try:
            conn.request("GET", path + "?" + urllib.parse.urlencode(query), headers=self.http_auth())
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

    # ---- loading ---------------------------------------------------------------------------

    def _create(self, table: str, name: str) -> None:
        """Create ``name`` with the schema of ``table``, replacing any earlier one."""
        self._exec(f"DROP TABLE IF EXISTS {name}")
        self._exec(CREATE.sub(f"CREATE TABLE {name}", SCHEMA[table], count=1))

    def _sender(self) -> Sender:
        # ILP over HTTP: each request is acknowledged after its WAL commit and errors come back
        # (ILP over TCP drops a bad batch silently). Protocol 2 sends doubles in binary;
        # retry_timeout=0: a failed flush is an error, never retried.
        endpoint = self.endpoint
        auth = (f"username={endpoint.user};password={endpoint.password() or ''};"
                if endpoint is not None and endpoint.user else "")
        return Sender.from_conf(
            f"http::addr={self.host}:{self.ports['http']};protocol_version=2;retry_timeout=0;{auth}"
            f"auto_flush_rows=off;auto_flush_interval=off;auto_flush_bytes={ILP_FLUSH_BYTES};")

    def _send_parquet(self, sender: Sender, table: str, target: str, days: Iterable[str]) -> int:
        """Send ``table``'s Parquet files of ``days`` to ``target`` over ILP, one day at a time
        in ts order (in-order appends, no out-of-order merges); the number of rows sent."""
        rows = 0
        for day in days:
            files = self.dataset.files(table, [day])
            if not files:
                continue
            frame = pa.concat_tables(
                [pq.read_table(f, read_dictionary=SYMBOLS[table]) for f in files]).sort_by("ts")
            sender.dataframe(frame.to_pandas(), table_name=target, symbols=SYMBOLS[table], at="ts")
            rows += frame.num_rows
        return rows

    def _count(self, names: Iterable[str]) -> int:
        return sum(int(self._exec(f"SELECT count() FROM {n}")["dataset"][0][0]) for n in names)

    def load(self) -> int:
        """The query data over ILP; returns the rows acknowledged (visible once
        :meth:`pending_visibility` is False)."""
        if self.endpoint is not None:
            self.check_endpoint()
        for table in TABLES:
            if self.endpoint is not None:
                self._mark(self.table(table))
            self._create(table, self.table(table))
        days = self.params.load_days()
        with self._sender() as sender:
            rows = sum(self._send_parquet(sender, table, self.table(table), days) for table in TABLES)
            sender.flush()
        self._await(self.table(t) for t in TABLES)
        return rows

    def _query_sql(self, qid: str) -> str:
        """Query ``qid`` as sent: the file's text, tables prefixed on an endpoint, parameters written in."""
        text = self.query_text(qid)
        if self.endpoint is not None:  # tickbench's prefixed tables on the user's server
            text = FROM_TABLE.sub(lambda m: m.group(1) + self.table(m.group(2)), text)
        return bind(text, self.query_bindings())

    def run_query(self, qid: str) -> pa.Table:
        """The answer of ``qid`` on this thread's kept-alive connection: Parquet from ``/exp``
        for :data:`PARQUET_ANSWERS`, else JSON from ``/exec`` with ``timings=true`` (parsed by
        orjson: the standard library's parser took most of the client's time on answers of
        thousands of rows)."""
        if self.query_conns is None:
            raise RuntimeError("QuestDB is not started")
        sql = self._query_sql(qid)
        self.last_server_ns = None
        self.last_exported = qid in PARQUET_ANSWERS
        if self.last_exported:
            return self._export(sql, pool=self.query_conns)
        status, body = self._get("/exec", {"query": sql, "timings": "true"}, pool=self.query_conns)
        answer: dict[str, Any] = orjson.loads(body)
        if status != 200 or "error" in answer:
            raise RuntimeError(f"QuestDB: {answer.get('error', body[:500])} in: {sql[:200]}")
        timings = answer.get("timings") or {}
        if "execute" in timings:  # its clock starts before compilation: timings.compiler is inside it
            self.last_server_ns = int(timings["execute"])
        return json_table(answer)

    def explain(self, qid: str) -> str:
        """``EXPLAIN``: QuestDB's plan (it has no ``EXPLAIN ANALYZE``), e.g. whether a
        lookup is a backward ``Interval`` scan of one partition or a full scan."""
        if self.query_conns is None:
            raise RuntimeError("QuestDB is not started")
        sql = self._query_sql(qid)
        status, body = self._get("/exec", {"query": "EXPLAIN " + sql}, pool=self.query_conns)
        answer: dict[str, Any] = json.loads(body)
        if status != 200 or "error" in answer:
            raise RuntimeError(f"QuestDB: {answer.get('error', body[:500])} in: EXPLAIN {sql[:200]}")
        # /exec escapes the plan's text as HTML (&nbsp; indents, &gt; in filters)
        return "\n".join(html.unescape(str(row[0])).replace("\xa0", " ") for row in answer["dataset"])

    def query_server_ns(self) -> int | None:
        """QuestDB's own time of the last query, in ns, read after the clock stops.

        * ``/exec`` (JSON): ``timings.execute`` of the answer: QuestDB's clock from the start of
          the request's processing (compilation, ``timings.compiler``, included) until the last
          row is written to the response: execution, JSON writing and sending all but the last
          chunk; not the request's arrival or the client's parsing.
        * ``/exp`` (Parquet): the export's span in QuestDB's export log ``sys.copy_export_log``,
          from its ``stream_sending_data``/``started`` row to its ``success`` row (µs): the
          cursor's execution, Parquet encoding and sending, and two of the log's own three
          commits; not compilation (a cached plan), the last log commit or the client's decoding.
          The log's rows since the last reading must be exactly one export's three phases (the
          runner's repetitions run one at a time); otherwise, e.g. another client's export in
          between, the first reading (earlier exports), or a server whose log table is named
          otherwise, ``None``.
        """
        if not self.last_exported:
            return self.last_server_ns
        self.last_exported = False
        try:
            rows = self._exec(EXPORT_LOG.format(after=self.export_log_mark), pool=self.query_conns)["dataset"]
        except RuntimeError:
            return None
        if rows:
            self.export_log_mark = max(int(r[3]) for r in rows)
        if len({r[0] for r in rows}) != 1 or [(r[1], r[2]) for r in rows] != EXPORT_PHASES:
            return None
        return (int(rows[2][3]) - int(rows[0][3])) * 1000

    # ---- W ---------------------------------------------------------------------------------

    def _imp(self, name: str, path: Path, schema: list[dict[str, str]],
             extra: dict[str, str] | None = None) -> dict[str, Any]:
        """POST the CSV file ``path`` to ``/imp`` into table ``name``, streamed from disk."""
        boundary = uuid.uuid4().hex
        head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"schema\"\r\n\r\n"
                f"{json.dumps(schema)}\r\n"
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"data\"; "
                f"filename=\"{path.name}\"\r\n\r\n").encode()
        tail = f"\r\n--{boundary}--\r\n".encode()
        query = {"name": name, "timestamp": "ts", "partitionBy": "DAY", "fmt": "json", **(extra or {})}
        conn = self._conn()
        try:
            conn.putrequest("POST", "/imp?" + urllib.parse.urlencode(query))
            conn.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
            conn.putheader("Content-Length", str(len(head) + path.stat().st_size + len(tail)))
            conn.endheaders()
            conn.send(head)
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    conn.send(chunk)
            conn.send(tail)
            resp = conn.getresponse()
            body = resp.read()
        finally:
            conn.close()
        answer: dict[str, Any] = json.loads(body)
        if resp.status != 200 or answer.get("status") != "OK" or answer.get("rowsRejected", 0):
            detail = {k: v for k, v in answer.items() if k != "columns"}
            raise RuntimeError(f"QuestDB /imp of {path.name} into {name} failed: {detail}")
        return answer

    def _figures(self, names: dict[str, str], nbytes: int, path_name: str) -> LoadFigures:
        """W's figures for tables ``names``: counted by the runner once they are applied."""
        self._await(names.values())
        return LoadFigures(rows=0, input_bytes=nbytes, count=lambda: self._count(names.values()),
                           detail={"path": path_name, "tables": list(names.values()),
                                   "durability": self._w_durability()})

    def bulk_load(self, fmt: str, scratch: Path) -> LoadFigures:
        """W into fresh tables ``w_<fmt>_<table>`` of the running server (``scratch`` is not
        used: the server keeps its tables in its own root). CSV goes through /imp, QuestDB's CSV
        path, into tables created from schema.sql; Parquet through QuestDB's own reader."""
        names = {t: f"w_{fmt}_{t}" for t in TABLES}
        nbytes = 0
        if fmt == "csv":
            for table, name in names.items():
                self._exec(f"DROP TABLE IF EXISTS {name}")
                path = self.dataset.csv_file(table)
                nbytes += path.stat().st_size
                # /imp creates the table (WAL, by day) with schema.sql's column types; cheaper
                # than a CREATE TABLE beforehand. atomicity=abort: a row that does not parse
                # fails the load instead of being skipped.
                if self.dataset.manifest.csv[table]["rows"]:
                    self._imp(name, path, imp_schema(table), {"atomicity": "abort"})
                else:  # /imp refuses a header alone ("not enough lines"): the empty table
                    self._create(table, name)
            return self._figures(names, nbytes, "REST /imp with schema.sql's column types")
        if fmt != "parquet":
            raise ValueError(f"unknown format {fmt!r}")
        # QuestDB's own Parquet reader into tables made from schema.sql, all of a table's
        # files in one time-ordered INSERT (one commit, no out-of-order merges); the reader
        # reads only under the server's import root, so the files are copied there first.
        for table, name in names.items():
            self._create(table, name)
            rels, size = self._stage_parquet(table, "w")
            nbytes += size
            union = " UNION ALL ".join(f"SELECT * FROM read_parquet('{r}')" for r in rels)
            self._exec(f"INSERT INTO {name} SELECT * FROM ({union}) ORDER BY ts")
        return self._figures(names, nbytes, "read_parquet() into tables created from schema.sql")

    def _w_durability(self) -> str:
        if self.commit_mode == "sync":
            return ("cairo.commit.mode=sync: each commit (WAL segment and sequencer log, then the table "
                    "files as the WAL is applied) is flushed to disk before it is acknowledged; W's clock "
                    "stops once the rows are applied (queryable)")
        return f"cairo.commit.mode={self.commit_mode}: commits are not flushed to disk before they are acknowledged"

    def _stage_parquet(self, table: str, stage_name: str) -> tuple[list[str], int]:
        """Copy ``table``'s bulk-day Parquet files under the server's import root, the only
        place ``read_parquet()`` reads; their paths relative to it, and their bytes."""
        stage = self.root / "import" / stage_name / table
        shutil.rmtree(stage, ignore_errors=True)
        stage.mkdir(parents=True)
        rels, size = [], 0
        for i, f in enumerate(self.dataset.input_files(table, [self.dataset.bulk_day], self.workdir)):
            size += f.stat().st_size
            copy = stage / f"{i}.parquet"
            shutil.copyfile(f, copy)
            copy.chmod(0o644)  # read by the server's user
            rels.append(str(copy.relative_to(self.root / "import")))
        return rels, size

    def baseline_load(self, fmt: str, scratch: Path) -> LoadFigures:
        """QuestDB's own simplest path on the same files, into tables it creates itself:
        CSV through /imp with only the timestamp's format given (it detects the other types);
        Parquet through ``CREATE TABLE AS`` / ``INSERT`` from ``read_parquet()``, which reads only
        under the server's import root, so the files are copied there first (and counted)."""
        names = {t: f"b_{fmt}_{t}" for t in TABLES}
        for name in names.values():
            self._exec(f"DROP TABLE IF EXISTS {name}")
        nbytes = 0
        if fmt == "csv":
            for table, name in names.items():
                path = self.dataset.csv_file(table)
                nbytes += path.stat().st_size
                if self.dataset.manifest.csv[table]["rows"]:
                    self._imp(name, path, [{"name": "ts", "type": "TIMESTAMP_NS", "pattern": TS_PATTERN}])
                else:  # /imp refuses a header alone ("not enough lines"), and infers no types from it
                    self._create(table, name)
            return self._figures(names, nbytes, "REST /imp, table created by QuestDB")
        if fmt != "parquet":
            raise ValueError(f"unknown format {fmt!r}")
        for table, name in names.items():
            rels, size = self._stage_parquet(table, "baseline")
            nbytes += size
            for i, rel in enumerate(rels):
                if i == 0:
                    self._exec(f"CREATE TABLE {name} AS (SELECT * FROM read_parquet('{rel}') "
                               "ORDER BY ts) TIMESTAMP(ts) PARTITION BY DAY")
                else:
                    self._exec(f"INSERT INTO {name} SELECT * FROM read_parquet('{rel}')")
        return self._figures(names, nbytes, "read_parquet() into CREATE TABLE AS / INSERT")

    # ---- ingest (tick-latency, stream and durability suites) -------------------------------

    def ingest_open(self, store: Path, durability: str | None = None) -> None:
        """The ingest store is the tables ``ingest_trades`` and ``ingest_book`` of this server;
        ``store`` (a directory) holds a marker naming the server root and the tables' directories
        (QuestDB gives each created table a new one). A store whose marker names the tables as
        they are reopens them (visible once their WAL is applied: after a crash QuestDB applies
        the committed transactions again when restarted); any other store gets empty tables,
        earlier ones dropped.

        ``durability`` is a cairo.commit.mode setting of :attr:`ingest_durability`. The mode is
        server-wide and read only at startup, so the server is restarted (its process changes)
        when the mode asked for is not the one it runs with."""
        setting = self.durability_setting(durability)
        self.ingest_close()
        self.restart_with(commit_mode=COMMIT_MODES[setting])
        if self.marker_names(store, self._ingest_identity()):
            self._await(INGEST.values())
        else:
            for table, name in INGEST.items():
                self._create(table, name)
        self.write_marker(store, self._ingest_identity())
        self.open_readers(self._conn, READER_IDLE_S)
        self.ingest_setting = setting

    def _ingest_identity(self) -> dict[str, Any]:
        """Each ingest table's directory (None for a table that does not exist)."""
        dirs = {r["table_name"]: r["directoryName"]
                for r in self._rows("SELECT table_name, directoryName FROM tables()")}
        return {"tables": {n: dirs.get(n) for n in INGEST.values()}}

    def ingest_client(self) -> IngestClient:
        if self.ingest_setting is None:
            raise RuntimeError("the ingest store is not open")
        # ILP over HTTP, as load(): answered after the commit, with errors; protocol 2 sends
        # doubles in binary; retry_timeout=0: a failed write is an error, never sent twice;
        # no auto-flush: each write() flushes itself.
        sender = Sender.from_conf(
            f"http::addr={LOOPBACK}:{self.ports['http']};protocol_version=2;retry_timeout=0;"
            f"auto_flush=off;request_timeout={ILP_REQUEST_TIMEOUT_MS};")
        sender.establish()
        return Writer(self, sender)

    def ingest_stream_target(self) -> StreamTarget:
        if self.ingest_setting is None:
            raise RuntimeError("the ingest store is not open")
        return IlpTarget(LOOPBACK, self.ports["http"], ILP_REQUEST_TIMEOUT_MS)

    def ingest_bulk(self, table: str, batch: pa.Table) -> None:
        """W's path: ``Sender.dataframe`` of the whole batch, one request per 64 MiB."""
        with self._sender() as sender:
            sender.dataframe(batch.to_pandas(), table_name=INGEST[table], symbols=SYMBOLS[table], at="ts")
            sender.flush()
        self._await([INGEST[table]])  # visible once the WAL apply reaches this commit

    def ingest_read(self, table: str, sym: str) -> pa.Table:
        return self._export(bind(INGEST_READ[table], {"sym": sym}), keep=True).cast(SCHEMAS[table])

    def ingest_count(self, table: str) -> int:
        """The rows of ``table`` visible now: those of the WAL transactions applied so far."""
        return int(self._exec(INGEST_COUNT[table], keep=True)["dataset"][0][0])

    def ingest_latest(self) -> pa.Table:
        return self._export(INGEST_LATEST, keep=True)

    def ingest_close(self) -> None:
        super().ingest_close()
        self.ingest_setting = None

    # ---- SE / settings ---------------------------------------------------------------------

    def storage_bytes(self) -> dict[str, int]:
        """SE, after the store has settled: the server is restarted first, because an open
        table writer keeps its files extended (16 MiB per symbol dictionary, more for the
        last partition) until it is released; closing it trims them to their data.

        Counted: the 30-day period's partitions as QuestDB's ``table_partitions()`` reports
        them (the multi-exchange day, when outside the period, is a partition of its own and is
        left out) and each table's table-wide files (symbol dictionaries, metadata). WAL
        segments are transient (purged once applied) and are not counted. The first key is
        the total."""
        self.stop()
        self.start()
        month = set(self.params.days("month"))
        dirs = {r["table_name"]: r["directoryName"]
                for r in self._rows("SELECT table_name, directoryName FROM tables()")}
        partitions = table_files = 0
        for table in TABLES:
            for row in self._rows(f"SELECT name, diskSize FROM table_partitions('{table}')"):
                if row["name"] in month:
                    partitions += int(row["diskSize"])
            table_dir = self.root / "db" / dirs[table]
            table_files += sum(p.stat().st_size for p in table_dir.iterdir() if p.is_file())
        return {"bytes_on_disk": partitions + table_files, "partitions": partitions,
                "table_files": table_files}

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
        return {"version": VERSION, "jvm_heap": HEAP, "wal": True, "load": "ILP over HTTP (protocol 2)",
                **results, **params}


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
