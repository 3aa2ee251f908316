"""PostgreSQL 15 (Debian's ``postgresql-15``), one server per run on 127.0.0.1.

The server runs as tickbench's unprivileged service user over ``<workdir>/pgdata`` (initdb'd
once, reopened as it is by later starts). The client is psycopg 3. Data goes in through binary
``COPY FROM STDIN`` encoded from Arrow (:mod:`.pgcopy`); queries are the ``queries/*.sql``
files with psycopg named parameters (``%(sym)s``). When the TimescaleDB extension is installed
for this server the tables are hypertables (``schema_timescale.sql``), otherwise plain tables
with BRIN and btree indexes (``schema.sql`` + ``indexes.sql``); :meth:`Adapter.settings`
says which ran.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import pwd
import re
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import psutil
import psycopg
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from psycopg import sql

from tickbench.data.schema import SCHEMAS, rows_to_table
from tickbench.engines.base import Engine, EngineUnavailable, IngestClient, LoadFigures
from tickbench.engines.postgres import pgcopy
from tickbench.engines.server import (
    LOOPBACK,
    ServerProcess,
    chown_tree,
    ensure_service_user,
    free_port,
    port_in_use,
    remove_stale_pid_file,
)

PG_MAJOR = "15"
PACKAGE = f"postgresql-{PG_MAJOR}"
HERE = Path(__file__).parent
SCHEMA = (HERE / "schema.sql").read_text()
INDEXES = (HERE / "indexes.sql").read_text()
SCHEMA_TIMESCALE = (HERE / "schema_timescale.sql").read_text()
INGEST_INDEXES = (HERE / "ingest.sql").read_text()
SUPERUSER = "postgres"
DB = "tickbench"
TABLES = ("trades", "book")
PARAM = re.compile(r"%\(([a-z_]+)\)s")
SHUTDOWN_TIMEOUT_S = 120.0
READY_TIMEOUT_S = 120.0
PORT_ENV = "TICKBENCH_POSTGRES_PORT"  # a fixed port instead of a free one (refused if taken)
INGEST_DB = "ingest"
INGEST_MARKER = "postgres-ingest"  # in the store directory: the ingest tables are this store's
# Server settings, passed as -c options (and recorded by settings()).
SERVER_SETTINGS = {
    "timezone": "UTC",
    # COPY into a table created or truncated in the same transaction, and index builds,
    # then write no WAL: the files are fsynced at commit instead (durable all the same).
    "wal_level": "minimal",
    "max_wal_senders": "0",
    "max_wal_size": "4GB",  # no checkpoint forced in the middle of a bulk load
    "shared_buffers": "1GB",
    "work_mem": "64MB",  # a month's hash aggregates and sorts stay in memory
    "maintenance_work_mem": "1GB",  # index builds sort in memory
    "fsync": "on",
    "synchronous_commit": "on",
}
COPY_CHUNK_BYTES = 8 << 20


def bin_dir() -> Path:
    return Path(f"/usr/lib/postgresql/{PG_MAJOR}/bin")


def _insert_sql(table: str) -> sql.Composed:
    """One row's INSERT; ``ts`` is sent as integer microseconds since the epoch, which
    ``timestamptz 'epoch' + n * 1 µs`` turns into the timestamp exactly."""
    ts = sql.SQL("TIMESTAMPTZ 'epoch' + {} * INTERVAL '1 microsecond'").format(sql.Placeholder())
    values = [ts] + [sql.Placeholder()] * (len(SCHEMAS[table].names) - 1)
    return sql.SQL("INSERT INTO {} VALUES ({})").format(sql.Identifier(table), sql.SQL(", ").join(values))


INSERT = {t: _insert_sql(t) for t in TABLES}
COPY_BINARY = {t: sql.SQL("COPY {} FROM STDIN (FORMAT binary)").format(sql.Identifier(t)) for t in TABLES}
READ = {t: sql.SQL("SELECT * FROM {} WHERE sym = %s ORDER BY {}").format(
    sql.Identifier(t), sql.SQL("ts, trade_id" if t == "trades" else "ts")) for t in TABLES}
COUNT = {t: sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(t)) for t in TABLES}
LATEST = (HERE / "ingest_latest.sql").read_text()
# The durability settings, each applied per connection by ingest_client().
SYNCHRONOUS_COMMIT = {
    "synchronous_commit=on": "SET synchronous_commit = on",
    "synchronous_commit=off": "SET synchronous_commit = off",
}


class _Writer(IngestClient):
    """One ingest connection (autocommit): a single row is one prepared INSERT, its own
    transaction; several rows are one binary COPY, one transaction."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def write(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        if len(rows) == 1:
            row = rows[0]
            # µs: the data are whole microseconds, PostgreSQL's resolution.
            self.conn.execute(INSERT[table], (row[0] // 1_000, *row[1:]), prepare=True)
            return
        batch = rows_to_table(table, rows)
        with self.conn.cursor() as cur:
            if pgcopy.encodable(batch):
                with cur.copy(COPY_BINARY[table]) as copy:
                    copy.write(pgcopy.HEADER)
                    for chunk in pgcopy.encode(batch):
                        copy.write(chunk)
                    copy.write(pgcopy.TRAILER)
            else:  # nulls: binary COPY's fixed layout has no room for them
                with self.conn.transaction():
                    cur.executemany(INSERT[table], [(r[0] // 1_000, *r[1:]) for r in rows])

    def close(self) -> None:
        self.conn.close()


def _choose_port() -> int:
    """``$TICKBENCH_POSTGRES_PORT`` when set (refused, naming it, when something listens on it),
    else a free port."""
    raw = os.environ.get(PORT_ENV, "").strip()
    if not raw:
        return free_port()
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise EngineUnavailable(f"{PORT_ENV}={raw!r} is not a TCP port number (1-65535)")
    port = int(raw)
    if port_in_use(port):
        raise EngineUnavailable(f"port {port} on {LOOPBACK} ({PORT_ENV}) is already in use by another "
                                f"program; stop it, choose another port, or unset {PORT_ENV} for a free one")
    return port


class Adapter(Engine):
    has_server = True
    concurrency_model = "processes"  # clients are processes connected to the server
    server: ServerProcess | None = None
    port: int = 0
    conn: psycopg.Connection[Any] | None = None
    #: Seconds start() waits for the server to answer (tests shorten it).
    start_timeout: ClassVar[float] = READY_TIMEOUT_S
    ingest_durability: ClassVar[dict[str, str]] = {
        "synchronous_commit=on": (
            "durable: a commit returns once its WAL is flushed to disk (fsync=on); no acknowledged "
            "row is lost in a crash"),
        "synchronous_commit=off": (
            "not durable: a commit returns before its WAL is flushed (the WAL writer flushes it "
            "within 3 x wal_writer_delay = 600 ms); a crash loses the last acknowledged commits, "
            "never leaving the database inconsistent"),
    }
    #: The settings of ingest_durability under which no acknowledged row may be lost.
    ingest_durable: ClassVar[frozenset[str]] = frozenset({"synchronous_commit=on"})
    ingest_setting: str = "synchronous_commit=on"
    ingest_store: Path | None = None

    # -- installation -------------------------------------------------------------------

    @classmethod
    def probe(cls) -> str:
        postgres = bin_dir() / "postgres"
        if not os.access(postgres, os.X_OK):
            raise EngineUnavailable("not installed; run `tickbench install postgres`")
        out = subprocess.run([str(postgres), "--version"], capture_output=True, text=True, check=True)
        # "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
        return out.stdout.split()[2]

    @classmethod
    def install(cls, progress: Callable[[str], None] | None = None) -> str:
        """``apt-get install -y postgresql-15`` (after one ``apt-get update`` if the package
        lists do not know it yet); a no-op when the server binaries are there."""
        if os.access(bin_dir() / "postgres", os.X_OK):
            return cls.probe()
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            raise EngineUnavailable(f"installing needs root and apt-get: apt-get install -y {PACKAGE}")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        known = subprocess.run(["apt-cache", "show", PACKAGE], capture_output=True, env=env)
        steps = [] if known.returncode == 0 else [["apt-get", "update"]]
        steps.append(["apt-get", "install", "-y", "--no-install-recommends", PACKAGE])
        for cmd in steps:
            if progress:
                progress(" ".join(cmd))
            done = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if done.returncode != 0:
                raise EngineUnavailable(f"`{' '.join(cmd)}` failed:\n{done.stderr[-2000:]}")
        return cls.probe()

    # -- server lifecycle ---------------------------------------------------------------

    @property
    def pgdata(self) -> Path:
        return self.workdir / "pgdata"

    @property
    def password_file(self) -> Path:
        return self.workdir / "postgres.password"

    def _initdb(self, user: str | None) -> None:
        """Create the cluster: C locale (byte-order text sorting, as the reference sorts),
        UTF-8, a random superuser password, password auth on the loopback address only."""
        password = secrets.token_urlsafe(24)
        self.password_file.write_text(password)
        self.password_file.chmod(0o600)
        self.pgdata.mkdir(parents=True)
        with tempfile.NamedTemporaryFile("w", dir=self.workdir, delete=False) as pw:
            pw.write(password + "\n")
        pwfile = Path(pw.name)
        try:
            chown_tree(self.pgdata, user)
            _chown(pwfile, user)
            argv = [str(bin_dir() / "initdb"), "-D", str(self.pgdata), "-U", SUPERUSER,
                    "--pwfile", str(pwfile), "--auth-local", "scram-sha-256",
                    "--auth-host", "scram-sha-256", "--no-locale", "-E", "UTF8"]
            done = subprocess.run(_as_user(argv, user), capture_output=True, text=True)
            if done.returncode != 0:
                raise EngineUnavailable(f"initdb failed:\n{done.stdout[-1000:]}{done.stderr[-2000:]}")
        finally:
            pwfile.unlink(missing_ok=True)

    def start(self) -> None:
        self.probe()
        self.workdir.mkdir(parents=True, exist_ok=True)
        user = ensure_service_user()
        if user is not None:  # the server user enters the workdir (to pgdata), lists nothing in it
            self.workdir.chmod(self.workdir.stat().st_mode | stat.S_IXOTH)
        _check_reachable(self.workdir, user)
        if not (self.pgdata / "PG_VERSION").exists():
            if self.pgdata.exists():
                shutil.rmtree(self.pgdata)  # a half-made cluster from an interrupted initdb
            self._initdb(user)
        # After a crash (the durability suite's kill -9) the lock file outlives the server.
        remove_stale_pid_file(self.pgdata / "postmaster.pid")
        self.port = _choose_port()
        sockets = self.workdir / "sockets"
        # The Unix socket goes in the workdir (not the system's /var/run/postgresql); where
        # that path is too long for a socket name (107 bytes), there is none: tickbench
        # connects over TCP.
        socket_dir = ""
        if len(str(sockets / f".s.PGSQL.{self.port}.lock")) < 100:
            sockets.mkdir(exist_ok=True)
            chown_tree(sockets, user)
            socket_dir = str(sockets)
        argv = [str(bin_dir() / "postgres"), "-D", str(self.pgdata), "-p", str(self.port),
                "-c", f"listen_addresses={LOOPBACK}", "-k", socket_dir]
        for key, value in {**SERVER_SETTINGS, **_timescale_settings()}.items():
            argv += ["-c", f"{key}={value}"]
        self.server = ServerProcess("postgres", argv, log=self.workdir / "postgres.log", user=user)
        self.server.start()
        try:
            self.server.wait_ready(self._ready, timeout=self.start_timeout)
        except EngineUnavailable as exc:
            if "already in use" in str(exc):  # the port was taken between the choice and the bind
                raise EngineUnavailable(f"port {self.port} on {LOOPBACK} is already in use: {exc}") from exc
            raise
        self._ensure_database(DB)
        self.conn = self._connect(DB)

    def _ready(self) -> bool:
        with self._connect("postgres"):
            return True

    def start_shared(self) -> None:
        """Connect to the server another adapter started over the same working directory (a
        concurrency client in a process of its own); its port is line 4 of the server's
        ``postmaster.pid``. No process is started, and stop() ends none."""
        try:
            self.port = int((self.pgdata / "postmaster.pid").read_text().splitlines()[3])
        except (OSError, ValueError, IndexError) as exc:
            raise EngineUnavailable(f"no PostgreSQL server to connect to over {self.pgdata}: {exc}") from exc
        self.conn = self._connect(DB)

    def stop(self) -> None:
        """Close the connection, then a fast shutdown (SIGINT): it ends any session left and
        writes the shutdown checkpoint, whereas a smart one (SIGTERM) would wait for every
        client to disconnect; SIGTERM then SIGKILL follow only if it does not end in time."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.server is not None:
            proc = self.server.proc
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(SHUTDOWN_TIMEOUT_S)
            self.server.stop()
            self.server = None

    def memory_pids(self) -> list[int]:
        """The postmaster and its children: the backend that runs a query (and any parallel
        workers alive when this is called), the checkpointer, the background writer, …"""
        pid = self.server.pid if self.server else None
        if pid is None:
            return []
        try:
            return [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]
        except psutil.NoSuchProcess:
            return []

    # -- connections ----------------------------------------------------------------------

    def _connect(self, dbname: str) -> psycopg.Connection[Any]:
        return psycopg.connect(host=LOOPBACK, port=self.port, user=SUPERUSER, dbname=dbname,
                               password=self.password_file.read_text(), autocommit=True,
                               options="-c timezone=UTC")

    def _conn(self) -> psycopg.Connection[Any]:
        if self.conn is None:
            raise RuntimeError("PostgreSQL is not started")
        return self.conn

    def _ensure_database(self, name: str) -> None:
        with self._connect("postgres") as c:
            if c.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is None:
                c.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))

    def _fresh_database(self, name: str) -> None:
        """Database ``name`` with no tables of tickbench's: created if absent, else its tables
        dropped. A DROP DATABASE would force a checkpoint of the whole server (every dirty
        page of earlier loads) into the time of the load that follows."""
        self._ensure_database(name)
        with self._connect(name) as c:
            c.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(
                sql.SQL(", ").join(sql.Identifier(t) for t in TABLES)))

    # -- schema and loading -------------------------------------------------------------

    def _create_schema(self, c: psycopg.Connection[Any]) -> str:
        """Create the tables in ``c``'s (empty) database: hypertables if the TimescaleDB
        extension can be created, plain tables otherwise; return which ("timescaledb" or
        "plain")."""
        if _timescale_settings():
            try:
                c.execute("CREATE EXTENSION IF NOT EXISTS timescaledb")
                c.execute(SCHEMA_TIMESCALE)
                return "timescaledb"
            except psycopg.Error:
                pass
        c.execute(SCHEMA)
        return "plain"

    def _copy_tables(self, dbname: str, variant: str,
                     sources: dict[str, Callable[[], Iterator[bytes]]], fmt: str) -> None:
        """COPY each table's data (``sources[table]()`` yields COPY data in ``fmt``) on its
        own connection, the tables in parallel. On plain tables the COPY follows a TRUNCATE
        in the same transaction, so it may FREEZE the rows and, with ``wal_level=minimal``,
        write no WAL."""
        def one(table: str) -> None:
            plain = variant == "plain"
            options = sql.SQL(fmt + (", FREEZE" if plain else ""))
            with self._connect(dbname) as c, c.transaction():
                if plain:
                    c.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(table)))
                stmt = sql.SQL("COPY {} FROM STDIN ({})").format(sql.Identifier(table), options)
                with c.cursor() as cur, cur.copy(stmt) as copy:
                    for chunk in sources[table]():
                        copy.write(chunk)

        with ThreadPoolExecutor(len(sources)) as pool:
            for f in [pool.submit(one, t) for t in sources]:
                f.result()

    def _finish(self, c: psycopg.Connection[Any], variant: str) -> int:
        """Indexes (plain tables: indexes.sql; hypertables have theirs already), statistics,
        and the row count."""
        if variant == "plain":
            c.execute(INDEXES)
        c.execute("ANALYZE trades, book")  # not the whole database: its catalogs need none
        return _count_rows(c)

    def _parquet_source(self, table: str, days: list[str]) -> Callable[[], Iterator[bytes]]:
        """Binary COPY data of ``table``'s Parquet files for ``days``, in (sym, exchange, ts)
        order: the files are (day, exchange, sym) partitions in time order."""
        files = sorted(self.dataset.files(table, days),
                       key=lambda f: (*reversed(f.stem.split("__")), f.parent.name))

        def chunks() -> Iterator[bytes]:
            yield pgcopy.HEADER
            for f in files:
                data = pq.read_table(f)
                if not pgcopy.encodable(data):
                    raise RuntimeError(f"{f}: nulls or unexpected types; binary COPY needs the SPEC schema")
                yield from pgcopy.encode(data)
            yield pgcopy.TRAILER
        return chunks

    def _load_parquet(self, dbname: str, days: list[str]) -> tuple[str, int]:
        """A fresh schema in ``dbname`` holding ``days`` from the Parquet files."""
        with self._connect(dbname) as c:
            variant = self._create_schema(c)
            self._copy_tables(dbname, variant, {t: self._parquet_source(t, days) for t in TABLES},
                              "FORMAT binary")
            return variant, self._finish(c, variant)

    def load(self) -> int:
        days = self.params.load_days()
        self._fresh_database(DB)
        _, rows = self._load_parquet(DB, days)
        # VACUUM resets the tables' insert counters, so autovacuum does not vacuum them in the
        # background during the queries (COPY FREEZE already set the visibility map); the
        # checkpoint leaves nothing for a timed checkpoint to write during them.
        self._conn().execute("VACUUM trades, book")
        self._conn().execute("CHECKPOINT")
        return rows

    # -- queries --------------------------------------------------------------------------

    def run_query(self, qid: str) -> pa.Table:
        text = self.query_text(qid)
        with self._conn().cursor() as cur:
            cur.execute(text, pg_bindings(self.params.bindings(), text))
            if cur.description is None:
                raise RuntimeError(f"{qid}: the query returned no result set")
            names = [d.name for d in cur.description]
            oids = [d.type_code for d in cur.description]
            return pgcopy.to_arrow(names, oids, cur.fetchall())

    # -- W and SE -------------------------------------------------------------------------

    def _csv_source(self, path: Path) -> Callable[[], Iterator[bytes]]:
        def chunks() -> Iterator[bytes]:
            with open(path, "rb") as f:
                while chunk := f.read(COPY_CHUNK_BYTES):
                    yield chunk
        return chunks

    def bulk_load(self, fmt: str, scratch: Path) -> LoadFigures:
        """W through tickbench's path into a fresh database ``w_<fmt>``: the CSV streamed
        as it is (``COPY … (FORMAT csv, HEADER)``), or the Parquet files as binary COPY;
        both tables in parallel, then the indexes and ANALYZE; committed on return."""
        db = f"w_{fmt}"
        self._fresh_database(db)
        if fmt == "parquet":
            day = [self.dataset.bulk_day]
            files = [f for t in TABLES for f in self.dataset.files(t, day)]
            _, rows = self._load_parquet(db, day)
            return LoadFigures(rows=rows, input_bytes=sum(f.stat().st_size for f in files),
                               detail={"database": db, "copy": "binary"})
        if fmt != "csv":
            raise ValueError(f"unknown format {fmt!r}")
        paths = {t: self.dataset.csv_file(t) for t in TABLES}
        with self._connect(db) as c:
            variant = self._create_schema(c)
            self._copy_tables(db, variant, {t: self._csv_source(p) for t, p in paths.items()},
                              "FORMAT csv, HEADER")
            rows = self._finish(c, variant)
        return LoadFigures(rows=rows, input_bytes=sum(p.stat().st_size for p in paths.values()),
                           detail={"database": db, "copy": "csv"})

    def baseline_load(self, fmt: str, scratch: Path) -> LoadFigures:
        """PostgreSQL's own simplest path into a fresh database ``baseline_<fmt>``: the schema,
        then ``psql -c "\\copy table FROM 'file' WITH (FORMAT csv, HEADER)"`` per table (psql
        reads the file, so the server user need not), then the same indexes and ANALYZE.
        PostgreSQL reads no Parquet: for ``parquet`` the files are first written as CSV with
        pyarrow into ``scratch``, and that counts in the time."""
        db = f"baseline_{fmt}"
        self._fresh_database(db)
        if fmt == "csv":
            paths = {t: self.dataset.csv_file(t) for t in TABLES}
            nbytes = sum(p.stat().st_size for p in paths.values())
        elif fmt == "parquet":
            scratch.mkdir(parents=True, exist_ok=True)
            paths, nbytes = {}, 0
            for t in TABLES:
                files = self.dataset.files(t, [self.dataset.bulk_day])
                nbytes += sum(f.stat().st_size for f in files)
                paths[t] = scratch / f"{t}.csv"
                pacsv.write_csv(pq.read_table(files, schema=SCHEMAS[t]), paths[t])
        else:
            raise ValueError(f"unknown format {fmt!r}")
        with self._connect(db) as c:
            variant = self._create_schema(c)
            for t, p in paths.items():
                self._psql(db, f"\\copy {t} FROM '{p}' WITH (FORMAT csv, HEADER)")
            rows = self._finish(c, variant)
        return LoadFigures(rows=rows, input_bytes=nbytes, detail={"database": db, "tool": "psql \\copy"})

    def _psql(self, dbname: str, command: str) -> None:
        env = {**os.environ, "PGPASSWORD": self.password_file.read_text(), "PGTZ": "UTC"}
        argv = [str(bin_dir() / "psql"), "-X", "-v", "ON_ERROR_STOP=1", "-h", LOOPBACK,
                "-p", str(self.port), "-U", SUPERUSER, "-d", dbname, "-c", command]
        done = subprocess.run(argv, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"psql {command!r} failed:\n{done.stderr[-2000:]}")

    def storage_bytes(self) -> dict[str, int]:
        """SE: the 30-day period alone in a fresh database ``se``, loaded as :meth:`load`
        loads, after VACUUM and CHECKPOINT: heap, TOAST and indexes of both tables
        (``pg_total_relation_size``; ``hypertable_size``, chunks included, for hypertables)."""
        db = "se"
        self._fresh_database(db)
        variant, _ = self._load_parquet(db, self.params.days("month"))
        size = ("SELECT hypertable_size(%s)" if variant == "timescaledb"
                else "SELECT pg_total_relation_size(%s)")
        with self._connect(db) as c:
            c.execute("VACUUM trades, book")
            c.execute("CHECKPOINT")
            sizes = {t: int(_scalar(c, size, [t])) for t in TABLES}
            heap = sum(int(_scalar(c, "SELECT pg_table_size(%s)", [t])) for t in TABLES)
        out = {"total_relation_size": sum(sizes.values()), **{f"{t}_total": n for t, n in sizes.items()}}
        if variant == "plain":  # pg_table_size of a hypertable counts no chunk
            out.update(heap_and_toast=heap, indexes=out["total_relation_size"] - heap)
        return out

    # -- ingest (tick-latency, stream and durability suites) ------------------------------

    def ingest_open(self, store: Path, durability: str | None = None) -> None:
        """The ingest store is database ``ingest`` of this server; ``store`` (a directory)
        records whose its tables are: a store without the marker file is new, and gets empty
        tables (any earlier ones dropped); a store with it reopens the tables as they are."""
        setting = self.durability_setting(durability)
        self.ingest_close()
        self.ingest_setting = setting
        self._ensure_database(INGEST_DB)
        marker = store / INGEST_MARKER
        with self._connect(INGEST_DB) as c:
            exists = c.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public' "
                               "AND tablename = ANY(%s)", [list(TABLES)]).fetchone()
            if not marker.exists() or not exists or exists[0] != len(TABLES):
                with c.transaction():
                    c.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(
                        sql.SQL(", ").join(sql.Identifier(t) for t in TABLES)))
                    c.execute(SCHEMA)
                    c.execute(INGEST_INDEXES)
        store.mkdir(parents=True, exist_ok=True)
        marker.write_text(f"PostgreSQL database {INGEST_DB!r} on the server over {self.pgdata}\n")
        self.ingest_store = store
        self._readers = threading.local()
        self._reader_conns: list[psycopg.Connection[Any]] = []

    def _reader(self) -> psycopg.Connection[Any]:
        """This thread's read connection to the ingest store (the stream suite polls counts
        and snapshots from two threads at once; one shared connection would serialise them)."""
        if self.ingest_store is None:
            raise RuntimeError("the ingest store is not open")
        conn: psycopg.Connection[Any] | None = getattr(self._readers, "conn", None)
        if conn is None:
            conn = self._connect(INGEST_DB)
            self._readers.conn = conn
            self._reader_conns.append(conn)
        return conn

    def ingest_client(self) -> IngestClient:
        if self.ingest_store is None:
            raise RuntimeError("the ingest store is not open")
        conn = self._connect(INGEST_DB)
        conn.execute(SYNCHRONOUS_COMMIT[self.ingest_setting])
        return _Writer(conn)

    def ingest_read(self, table: str, sym: str) -> pa.Table:
        with self._reader().cursor() as cur:
            cur.execute(READ[table], [sym])
            return _ingest_arrow(table, cur)

    def ingest_count(self, table: str) -> int:
        return int(_scalar(self._reader(), COUNT[table]))

    def ingest_latest(self) -> pa.Table:
        with self._reader().cursor() as cur:
            cur.execute(LATEST)
            out = _ingest_arrow(None, cur)
        return out.set_column(1, "ts", out.column("ts").cast(SCHEMAS["book"].field("ts").type))

    def ingest_close(self) -> None:
        """Close the read connections (writers close their own); after a crash they are
        broken, and closing them is all there is to do."""
        for conn in getattr(self, "_reader_conns", []):
            with contextlib.suppress(psycopg.Error):
                conn.close()
        self._reader_conns = []
        self._readers = threading.local()
        self.ingest_store = None

    def settings(self) -> dict[str, Any]:
        c = self._conn()
        names = [*SERVER_SETTINGS, "max_parallel_workers_per_gather", "jit", "server_version"]
        rows = c.execute("SELECT name, setting, unit FROM pg_settings WHERE name = ANY(%s)",
                         [names]).fetchall()
        out: dict[str, Any] = {n: s + (f" {u}" if u else "") for n, s, u in rows}
        ts = c.execute("SELECT extversion FROM pg_extension WHERE extname = 'timescaledb'").fetchone()
        out["variant"] = "timescaledb" if ts else "plain"
        if ts:
            out["timescaledb_version"] = ts[0]
        out["load_copy"] = "binary COPY FROM STDIN encoded from Arrow"
        return out


def _ingest_arrow(table: str | None, cur: psycopg.Cursor[Any]) -> pa.Table:
    """A result set as Arrow: ``table``'s SPEC schema (``ts`` in ns) when given."""
    if cur.description is None:
        raise RuntimeError("the query returned no result set")
    names = [d.name for d in cur.description]
    out = pgcopy.to_arrow(names, [d.type_code for d in cur.description], cur.fetchall())
    return out.cast(SCHEMAS[table]) if table is not None else out


def pg_bindings(binds: dict[str, Any], text: str) -> dict[str, Any]:
    """psycopg parameters for the ``%(name)s`` placeholders of ``text`` from
    ``QueryParams.bindings()``: naive UTC datetimes become aware ones, so psycopg sends them
    as ``timestamptz`` (lists as ``timestamptz[]``) and no session time zone is involved."""
    def utc(v: Any) -> Any:
        if isinstance(v, list):
            return [utc(x) for x in v]
        return v.replace(tzinfo=dt.UTC) if isinstance(v, dt.datetime) else v
    return {name: utc(binds[name]) for name in set(PARAM.findall(text))}


def _as_user(argv: list[str], user: str | None) -> list[str]:
    """``argv`` run as ``user`` through setpriv (initdb, like the server, refuses root)."""
    if user is None:
        return argv
    entry = pwd.getpwnam(user)
    return ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--init-groups", "--", *argv]


def _chown(path: Path, user: str | None) -> None:
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)


def _check_reachable(path: Path, user: str | None) -> None:
    """Raise if ``user`` (the server's) cannot reach ``path``: every directory above it must
    be searchable by others (``chmod o+x``) or belong to that user."""
    if user is None:
        return
    uid = pwd.getpwnam(user).pw_uid
    for parent in path.resolve().parents:
        st = parent.stat()
        if st.st_uid != uid and not st.st_mode & stat.S_IXOTH:
            raise EngineUnavailable(
                f"the server runs as {user!r}, which cannot enter {parent} (mode "
                f"{stat.S_IMODE(st.st_mode):o}); use a working directory it can reach")


def _timescale_settings() -> dict[str, str]:
    """Server settings that load TimescaleDB, if its library is installed for this server."""
    libdir = Path(f"/usr/lib/postgresql/{PG_MAJOR}/lib")
    if not any(libdir.glob("timescaledb*.so")):
        return {}
    return {"shared_preload_libraries": "timescaledb", "timescaledb.telemetry_level": "off"}


def _scalar(c: psycopg.Connection[Any], query: Any, params: list[Any] | None = None) -> Any:
    row = c.execute(query, params).fetchone()
    if row is None:
        raise RuntimeError("no row")
    return row[0]


def _count_rows(c: psycopg.Connection[Any]) -> int:
    return sum(int(_scalar(c, sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(t))))
               for t in TABLES)
