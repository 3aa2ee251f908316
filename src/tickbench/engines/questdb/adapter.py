"""QuestDB, a server (JVM) on 127.0.0.1 with its own data directory in the run's working directory.

Everything goes over QuestDB's HTTP port: ILP over HTTP for loads from Parquet, ``/imp`` for the
CSV bulk load, ``/exec`` for DDL and small answers, ``/exp?fmt=parquet`` for query results.
"""

from __future__ import annotations

import datetime as dt
import http.client
import io
import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from questdb import Sender, TimestampNanos

from tickbench.engines.base import Engine, EngineUnavailable, LoadFigures
from tickbench.engines.server import (
    LOOPBACK,
    ServerProcess,
    chown_tree,
    ensure_service_user,
    free_port,
    tools_dir,
)

VERSION = "9.3.4"  # the newest org.questdb:questdb that resolves from Maven
ARTIFACT = f"org.questdb:questdb:{VERSION}"
HEAP = "-Xmx4g"  # QuestDB keeps column data off-heap (mmap); the heap holds queries' state
TABLES = ("trades", "book")
SYMBOLS = {"trades": ["exchange", "sym", "side"], "book": ["exchange", "sym"]}
PARAM = re.compile(r"\$([a-z_]+)")
CREATE = re.compile(r"CREATE TABLE (\w+)")
COLUMN = re.compile(r"^\s+(\w+) (TIMESTAMP_NS|SYMBOL|DOUBLE|LONG)\b", re.MULTILINE)
# The CSV's `2022-06-01 00:00:06.737770000Z`: /imp cannot detect this format by itself.
TS_PATTERN = "yyyy-MM-dd HH:mm:ss.SSSUUUNNNz"
ILP_FLUSH_BYTES = 64 << 20  # one ILP/HTTP request (one WAL transaction) per 64 MiB of rows
READY_TIMEOUT = 180.0
APPLY_STALL_TIMEOUT = 300.0  # give up when the WAL apply makes no progress for this long


def _schema() -> dict[str, str]:
    """The CREATE TABLE statements of ``schema.sql``, by table name."""
    text = "\n".join(line for line in (Path(__file__).parent / "schema.sql").read_text().splitlines()
                     if not line.lstrip().startswith("--"))
    out: dict[str, str] = {}
    for stmt in filter(None, (s.strip() for s in text.split(";"))):
        match = CREATE.search(stmt)
        if match:
            out[match.group(1)] = stmt
    return out


SCHEMA = _schema()


def imp_schema(table: str) -> list[dict[str, str]]:
    """The /imp ``schema`` of ``table``: every column with its type in schema.sql (so that
    nothing depends on type detection), and the CSV's timestamp format."""
    out = []
    for name, kind in COLUMN.findall(SCHEMA[table]):
        column = {"name": name, "type": kind}
        if kind == "TIMESTAMP_NS":
            column["pattern"] = TS_PATTERN
        out.append(column)
    return out


def jar_path() -> Path:
    return tools_dir() / "questdb" / f"questdb-{VERSION}.jar"


def bind(sql: str, bindings: dict[str, Any]) -> str:
    """Substitute each ``$name`` in a query file with the SQL literal of ``bindings[name]``.

    QuestDB's HTTP endpoints take no bind variables, so the run's parameters are written into
    the text: a datetime as an ISO-8601 UTC timestamp string (QuestDB compares it with a
    timestamp column, and uses it for interval scans), a string quoted with ``'`` doubled.
    """

    def literal(match: re.Match[str]) -> str:
        value = bindings[match.group(1)]
        if isinstance(value, dt.datetime):
            return "'" + value.strftime("%Y-%m-%dT%H:%M:%S.%fZ") + "'"
        if isinstance(value, str):
            return "'" + value.replace("'", "''") + "'"
        raise TypeError(f"${match.group(1)}: no QuestDB literal for {type(value).__name__}")

    return PARAM.sub(literal, sql)


def check_reachable(path: Path, user: str) -> None:
    """Raise if ``user`` (the server's) cannot reach ``path``: every directory above it must be
    searchable by others (``chmod o+x``) or belong to that user."""
    uid = pwd.getpwnam(user).pw_uid
    for parent in path.resolve().parents:
        st = parent.stat()
        if st.st_uid != uid and not st.st_mode & stat.S_IXOTH:
            raise EngineUnavailable(
                f"QuestDB runs as {user!r}, which cannot enter {parent} (mode "
                f"{stat.S_IMODE(st.st_mode):o}) to reach {path}; use a directory it can reach")


class Adapter(Engine):
    server: ServerProcess | None = None
    ports: dict[str, int]

    # ---- install / probe -------------------------------------------------------------------

    @classmethod
    def probe(cls) -> str:
        if not jar_path().is_file():
            raise EngineUnavailable("not installed; run `tickbench install questdb`")
        if shutil.which("java") is None:
            raise EngineUnavailable("java (17 or newer) is not on PATH")
        return VERSION

    @classmethod
    def install(cls, progress: Callable[[str], None] | None = None) -> str:
        jar = jar_path()
        if jar.is_file():
            return cls.probe()
        mvn = shutil.which("mvn")
        if mvn is None:
            raise EngineUnavailable("Maven (`mvn`) is needed to fetch the QuestDB jar")
        if progress:
            progress(f"fetching {ARTIFACT} with Maven")
        jar.parent.mkdir(parents=True, exist_ok=True)
        # Into a staging directory, then renamed: an interrupted download leaves no jar behind.
        with tempfile.TemporaryDirectory(prefix=".questdb-", dir=jar.parent) as stage:
            done = subprocess.run(
                [mvn, "-q", "-B", "dependency:copy", f"-Dartifact={ARTIFACT}",
                 f"-DoutputDirectory={stage}"],
                capture_output=True, text=True, check=False,
            )
            fetched = Path(stage) / jar.name
            if done.returncode != 0 or not fetched.is_file():
                raise EngineUnavailable(f"mvn dependency:copy {ARTIFACT} failed:\n"
                                        f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
            fetched.chmod(0o644)
            os.replace(fetched, jar)
        return cls.probe()

    # ---- lifecycle -------------------------------------------------------------------------

    @property
    def root(self) -> Path:
        """QuestDB's root directory (``-d``): conf/, db/, import/."""
        return self.workdir / "qdb"

    def _write_conf(self) -> None:
        """server.conf: every listener on 127.0.0.1 and a free port, telemetry off."""
        ports: dict[str, int] = {}
        for name in ("http", "pg", "ilp_tcp"):
            port = free_port()
            while port in ports.values():
                port = free_port()
            ports[name] = port
        self.ports = ports
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
        }
        (self.root / "conf").mkdir(parents=True, exist_ok=True)
        (self.root / "import").mkdir(exist_ok=True)
        (self.root / "conf" / "server.conf").write_text("".join(f"{k}={v}\n" for k, v in conf.items()))

    def start(self) -> None:
        jar = jar_path()
        if not jar.is_file():
            raise EngineUnavailable("not installed; run `tickbench install questdb`")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._write_conf()
        user = ensure_service_user()
        if user is not None:
            self.workdir.chmod(self.workdir.stat().st_mode | stat.S_IXOTH)
            check_reachable(self.root, user)
            check_reachable(jar, user)
            chown_tree(self.root, user)
        java = shutil.which("java") or "java"
        self.server = ServerProcess(
            "questdb",
            [java, HEAP, "-p", str(jar), "-m", "io.questdb/io.questdb.ServerMain", "-d", str(self.root)],
            log=self.workdir / "questdb.log", user=user, cwd=self.root,
        )
        self.server.start()
        self.server.wait_ready(lambda: self._get("/exec", {"query": "select 1"})[0] == 200, READY_TIMEOUT)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def memory_pids(self) -> list[int]:
        pid = self.server.pid if self.server else None
        return [pid] if pid is not None else []

    # ---- HTTP ------------------------------------------------------------------------------

    def _conn(self) -> http.client.HTTPConnection:
        if self.server is None:
            raise RuntimeError("QuestDB is not started")
        # One connection per request: nothing to go stale between the runner's repetitions.
        return http.client.HTTPConnection(LOOPBACK, self.ports["http"], timeout=3600)

    def _get(self, path: str, query: dict[str, str]) -> tuple[int, bytes]:
        conn = self._conn()
        try:
            conn.request("GET", path + "?" + urllib.parse.urlencode(query))
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def _exec(self, sql: str) -> dict[str, Any]:
        """Run one statement through ``/exec``; its JSON answer (raise on an error)."""
        status, body = self._get("/exec", {"query": sql})
        answer: dict[str, Any] = json.loads(body)
        if status != 200 or "error" in answer:
            raise RuntimeError(f"QuestDB: {answer.get('error', body[:500])} in: {sql[:200]}")
        return answer

    def _rows(self, sql: str) -> list[dict[str, Any]]:
        """A small result from ``/exec`` as dicts."""
        answer = self._exec(sql)
        names = [c["name"] for c in answer["columns"]]
        return [dict(zip(names, row, strict=True)) for row in answer["dataset"]]

    def _export(self, sql: str) -> pa.Table:
        """A whole result as Parquet from ``/exp``: columnar, nanosecond timestamps, and several
        times faster than rows over the PG wire or JSON for large answers. Uncompressed, since
        it only crosses the loopback."""
        status, body = self._get("/exp", {"query": sql, "fmt": "parquet",
                                          "compression_codec": "uncompressed"})
        if status != 200:
            try:
                reason = json.loads(body).get("error", "")
            except ValueError:
                reason = body[:500].decode(errors="replace")
            raise RuntimeError(f"QuestDB: {reason}")
        return pq.read_table(io.BytesIO(body))

    # ---- loading ---------------------------------------------------------------------------

    def _create(self, table: str, name: str) -> None:
        """Create ``name`` with the schema of ``table``, replacing any earlier one."""
        self._exec(f"DROP TABLE IF EXISTS {name}")
        self._exec(CREATE.sub(f"CREATE TABLE {name}", SCHEMA[table], count=1))

    def _sender(self) -> Sender:
        # ILP over HTTP: each request is acknowledged after its WAL commit and errors come back
        # (ILP over TCP drops a bad batch silently). Protocol 2 sends doubles in binary;
        # retry_timeout=0: a failed flush is an error, never retried.
        return Sender.from_conf(
            f"http::addr={LOOPBACK}:{self.ports['http']};protocol_version=2;retry_timeout=0;"
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

    def _wait_applied(self, tables: Iterable[str]) -> None:
        """Return once the WAL of every table in ``tables`` is applied (its rows visible).

        Why a poll: ILP over HTTP and /imp acknowledge a commit to the WAL, which QuestDB
        applies to the table asynchronously, and it offers no call that blocks until then. So
        ``wal_tables()`` is read every 5 ms until the writer has caught up with the sequencer;
        a suspended table (failed apply) raises at once.
        """
        wanted = set(tables)
        last: dict[str, int] = {}
        stalled_since = time.monotonic()
        while True:
            pending = False
            for row in self._rows("SELECT name, suspended, writerTxn, sequencerTxn, errorMessage "
                                  "FROM wal_tables()"):
                if row["name"] not in wanted:
                    continue
                if row["suspended"]:
                    raise RuntimeError(f"QuestDB suspended WAL table {row['name']}: {row['errorMessage']}")
                if row["writerTxn"] < row["sequencerTxn"]:
                    pending = True
                    if last.get(row["name"]) != row["writerTxn"]:
                        last[row["name"]] = row["writerTxn"]
                        stalled_since = time.monotonic()
            if not pending:
                return
            if time.monotonic() - stalled_since > APPLY_STALL_TIMEOUT:
                raise RuntimeError(f"QuestDB WAL apply made no progress for {APPLY_STALL_TIMEOUT:.0f} s")
            time.sleep(0.005)

    def _count(self, names: Iterable[str]) -> int:
        return sum(int(self._exec(f"SELECT count() FROM {n}")["dataset"][0][0]) for n in names)

    def load(self) -> int:
        for table in (*TABLES, "probes"):
            self._create(table, table)
        days = self.params.days("month") + self.params.days("multi_day")
        with self._sender() as sender:
            for table in TABLES:
                self._send_parquet(sender, table, table, days)
            for qid, times in (("O-T", self.params.ot_times), ("O-NBBO", self.params.nbbo_times)):
                for t in times:
                    sender.row("probes", symbols={"qid": qid}, at=TimestampNanos(t))
            sender.flush()
        self._wait_applied((*TABLES, "probes"))
        return self._count(TABLES)

    def run_query(self, qid: str) -> pa.Table:
        return self._export(bind(self.query_text(qid), self.params.bindings()))

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

    def bulk_load(self, fmt: str, scratch: Path) -> LoadFigures:
        """W into fresh tables ``w_<fmt>_<table>`` of the running server (``scratch`` is not
        used: the server keeps its tables in its own root). CSV goes through /imp, QuestDB's CSV
        path, into tables created from schema.sql; Parquet through ILP over HTTP as in load()."""
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
                self._imp(name, path, imp_schema(table), {"atomicity": "abort"})
            path_name = "REST /imp with schema.sql's column types"
        elif fmt == "parquet":
            for table, name in names.items():
                self._create(table, name)  # ILP would name the designated timestamp `timestamp`
            with self._sender() as sender:
                for table, name in names.items():
                    nbytes += sum(f.stat().st_size for f in self.dataset.files(table, [self.dataset.bulk_day]))
                    self._send_parquet(sender, table, name, [self.dataset.bulk_day])
                sender.flush()
            path_name = "ILP over HTTP (protocol 2) from Parquet"
        else:
            raise ValueError(f"unknown format {fmt!r}")
        self._wait_applied(names.values())
        return LoadFigures(rows=self._count(names.values()), input_bytes=nbytes,
                           detail={"path": path_name, "tables": list(names.values())})

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
                self._imp(name, path, [{"name": "ts", "type": "TIMESTAMP_NS", "pattern": TS_PATTERN}])
            path_name = "REST /imp, table created by QuestDB"
        elif fmt == "parquet":
            stage = self.root / "import" / "baseline"
            shutil.rmtree(stage, ignore_errors=True)
            stage.mkdir(parents=True)
            for table, name in names.items():
                files = self.dataset.files(table, [self.dataset.bulk_day])
                for i, f in enumerate(files):
                    nbytes += f.stat().st_size
                    copy = stage / f"{table}_{i}.parquet"
                    shutil.copyfile(f, copy)
                    copy.chmod(0o644)  # read by the server's user
                    rel = copy.relative_to(self.root / "import")
                    if i == 0:
                        self._exec(f"CREATE TABLE {name} AS (SELECT * FROM read_parquet('{rel}') "
                                   "ORDER BY ts) TIMESTAMP(ts) PARTITION BY DAY")
                    else:
                        self._exec(f"INSERT INTO {name} SELECT * FROM read_parquet('{rel}')")
            path_name = "read_parquet() into CREATE TABLE AS / INSERT"
        else:
            raise ValueError(f"unknown format {fmt!r}")
        self._wait_applied(names.values())
        return LoadFigures(rows=self._count(names.values()), input_bytes=nbytes,
                           detail={"path": path_name, "tables": list(names.values())})

    # ---- SE / settings ---------------------------------------------------------------------

    def storage_bytes(self) -> dict[str, int]:
        """SE, after the store has settled: the server is restarted first, because an open
        table writer keeps its files extended (16 MiB per symbol dictionary, more for the
        last partition) until it is released; closing it trims them to their data.

        Counted: the 30-day period's partitions as QuestDB's ``table_partitions()`` reports
        them (the multi-exchange day is a partition of its own and is left out) and each
        table's table-wide files (symbol dictionaries, metadata). WAL segments are transient
        (purged once applied) and are not counted. The first key is the total."""
        self._wait_applied(TABLES)
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
                "cairo.max.uncommitted.rows"}
        params = {r["property_path"]: r["value"] for r in self._rows("SHOW PARAMETERS")
                  if r["property_path"] in keys}
        return {"version": VERSION, "jvm_heap": HEAP, "wal": True, "load": "ILP over HTTP (protocol 2)",
                "results": "HTTP /exp fmt=parquet", **params}
