"""PostgreSQL 15 (Debian's ``postgresql-15``), one server per run on 127.0.0.1.

The server runs as tickbench's unprivileged service user over ``<workdir>/pgdata`` (initdb'd
once, reopened as it is by later starts). The client is psycopg 3. Data goes in through binary
``COPY FROM STDIN`` encoded from Arrow (:mod:`.pgcopy`); queries are the ``queries/*.sql``
files with psycopg named parameters (``%(sym)s``). Tables are heap tables partitioned by day,
each day's partition with a covering btree and BRIN indexes (``schema.sql``, ``partitions.sql``,
``indexes.sql``).

Query results come back through ADBC's PostgreSQL driver, which runs each query as
``COPY (query) TO STDOUT (FORMAT binary)`` and decodes the rows straight into Arrow in C (no
Python object per value); its parameters are written into the text as SQL literals by psycopg
(COPY takes no bind parameters), once per query and parameter set, before the clock. The
server's own time of each query is read from ``pg_stat_statements`` after the clock stops
(:meth:`Adapter.query_server_ns`).

An engine built on PostgreSQL's server (TimescaleDB) subclasses :class:`Adapter` and sets its
hooks: :attr:`~Adapter.extra_settings`, :attr:`~Adapter.extension`, the schema files,
:attr:`~Adapter.partition_file` and :attr:`~Adapter.copy_freeze`; its files are looked up in its own
folder first, then in this one.

On an external endpoint (``--endpoint postgres=HOST:PORT``) tickbench's tables go in a schema of
its own (default ``tickbench``) of the endpoint's database, each marked by a table comment
(:data:`MARKER`); the connections' ``search_path`` names that schema, so the query files run as
written. See the README.
"""

from __future__ import annotations

import datetime as dt
import getpass
import os
import re
import secrets
import shutil
import signal
import urllib.parse
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import adbc_driver_postgresql.dbapi as adbc
import psycopg
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from psycopg import sql

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
from tickbench.engines.postgres import pgcopy
from tickbench.engines.postgres.market import PostgresMarket
from tickbench.engines.postgres.pgcopy import result_arrow
from tickbench.engines.postgres.writer import CopyTarget, Writer
from tickbench.engines.server import (
    LOOPBACK,
    InstallStep,
    ServerEngine,
    apt_steps,
    as_user,
    chown_tree,
    remove_stale_pid_file,
    run_tool,
)
from tickbench.params import RunParams

PG_MAJOR = "15"
PACKAGE = f"postgresql-{PG_MAJOR}"
HERE = Path(__file__).parent
SUPERUSER = "postgres"
DB = "tickbench"
PARAM = re.compile(r"%\(([a-z0-9_]+)\)s")  # the names of bindings(), e.g. b50_syms
INGEST_DB = "ingest"
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
    # Server-side time of each query (query_server_ns); its overhead is a hash of each
    # statement's parse tree. Engines on this server add their own libraries to the list.
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track": "top",
    # JIT compilation off: measured on the 14 queries at SF 0.1 (README, "Tuning"), its
    # compile time (tens of ms per query above jit_above_cost) outweighs what it saves here.
    "jit": "off",
    # Parallelism sized for the 2 cores: a parallel scan is the leader and one worker, an
    # index build likewise, and no more than two workers run at once.
    "max_parallel_workers_per_gather": "1",
    "max_parallel_maintenance_workers": "1",
    "max_parallel_workers": "2",
}
COPY_WORKERS = 2  # COPYs at once (of the partitions of both tables): one per core
COPY_CHUNK_BYTES = 8 << 20
# The last statement of a backend, and the totals pg_stat_statements holds for it (in ms).
LAST_QUERY_ID = "SELECT query_id FROM pg_stat_activity WHERE pid = %s"
STATEMENT_TOTALS = ("SELECT coalesce(sum(calls), 0), coalesce(sum(total_exec_time), 0) FROM pg_stat_statements "
                    "WHERE queryid = %s AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())")
# A day's partition of a table (partitions.sql), and the sizes of a list of them (SE).
PARTITION = sql.SQL("CREATE TABLE {} PARTITION OF {} FOR VALUES FROM ({}) TO ({})")
PARTITION_SIZES = ("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0), coalesce(sum(pg_table_size(c.oid)), 0) "
                   "FROM pg_class c WHERE c.oid = ANY(%s::regclass[])")
# The comment tickbench puts on every table (and schema) it creates on an external endpoint:
# what it may drop, and a table of its names without it is the user's, never touched.
MARKER = "created by tickbench; dropped after the run unless --keep"
OWN_TABLES = ("SELECT c.relname, obj_description(c.oid, 'pg_class') FROM pg_class c "
              "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = ANY(%s) "
              "AND c.relkind IN ('r', 'p', 'v', 'm', 'f')")


def bin_dir() -> Path:
    return Path(f"/usr/lib/postgresql/{PG_MAJOR}/bin")


READ = {t: sql.SQL("SELECT * FROM {} WHERE sym = %s ORDER BY {}").format(
    sql.Identifier(t), sql.SQL("ts, trade_id" if t == "trades" else "ts")) for t in TABLES}
COUNT = {t: sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(t)) for t in TABLES}
DROP_TABLES = sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(sql.SQL(", ").join(map(sql.Identifier, TABLES)))
# The durability settings, each applied per connection by ingest_client().
SYNCHRONOUS_COMMIT = {
    "synchronous_commit=on": "SET synchronous_commit = on",
    "synchronous_commit=off": "SET synchronous_commit = off",
}


class Adapter(PostgresMarket, ServerEngine, BulkLoad, Storage, Ingest, EngineTime):
    server_name = "postgres"
    data_dir = "pgdata"
    port_env = "TICKBENCH_POSTGRES_PORT"  # a fixed port instead of a free one (refused if taken)
    start_timeout = 120.0
    # Fast shutdown: it ends any session left and writes the shutdown checkpoint, whereas a
    # smart one (SIGTERM) would wait for every client to disconnect.
    stop_signal = signal.SIGINT
    stop_timeout_s = 120.0
    memory_children = True  # the postmaster and its children: the query's backend, the writers
    external_endpoint = True  # a schema of its own on the user's server (see the README)
    ingest_marker = "postgres-ingest"

    # -- hooks for an engine on PostgreSQL's server (TimescaleDB) ----------------------------
    #: Settings beside SERVER_SETTINGS (e.g. ``shared_preload_libraries``), recorded too.
    extra_settings: ClassVar[dict[str, str]] = {}
    #: The extension created in every database tickbench makes, before the schema.
    extension: ClassVar[str | None] = None
    #: The tables (run before each load), their indexes and statistics (run after it; ``None``:
    #: the schema made them), and the ingest store's indexes; in the engine's folder, else here.
    schema_file: ClassVar[str] = "schema.sql"
    #: Run after the schema: an engine's own layer over the plain tables (e.g. hypertables).
    table_options_file: ClassVar[str | None] = None
    #: Makes the load's tables partitioned by day (``None``: they stay as they are); the load
    #: then creates a partition per day it loads and COPYs each day into its own.
    partition_file: ClassVar[str | None] = "partitions.sql"
    index_file: ClassVar[str | None] = "indexes.sql"
    ingest_index_file: ClassVar[str] = "ingest.sql"
    #: Whether a load's COPY follows a TRUNCATE in its transaction and FREEZEs the rows (heap tables).
    copy_freeze: ClassVar[bool] = True
    #: The Debian packages ``tickbench install`` installs.
    apt_packages: ClassVar[tuple[str, ...]] = (PACKAGE,)
    #: W's durability (each W record's ``detail["durability"]``): how its commit reaches disk.
    w_durability: ClassVar[str] = (
        "fsync=on, synchronous_commit=on: each COPY and index build commits durably before W returns; "
        "with wal_level=minimal the tables made or truncated in the transaction skip the WAL and their files are "
        "fsynced at commit, the rest is in the WAL flushed at commit")

    conn: psycopg.Connection[Any] | None = None
    #: The query connection (ADBC), its backend's pid, and each query's text with its
    #: parameters written in (cleared by set_params).
    qconn: Any = None
    qpid: int | None = None
    literal_queries: dict[str, str]
    #: pg_stat_statements' (calls, total ms) per query id when last read (query_server_ns).
    statement_totals: dict[int, tuple[int, float]]
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

    def engine_file(self, name: str) -> str:
        """The text of ``name`` from the engine's own folder, else from PostgreSQL's."""
        own = self.info.folder / name
        return (own if own.is_file() else HERE / name).read_text()

    # -- installation -------------------------------------------------------------------

    @classmethod
    def probe(cls) -> str:
        cls.require_installed()
        out = run_tool([str(bin_dir() / "postgres"), "--version"])
        # "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
        return out.split()[2]

    @classmethod
    def installed(cls) -> bool:
        return os.access(bin_dir() / "postgres", os.X_OK)

    @classmethod
    def install_steps(cls, stage: Path) -> list[InstallStep]:
        return apt_steps(*cls.apt_packages)

    # -- server -------------------------------------------------------------------------

    @property
    def password_file(self) -> Path:
        return self.workdir / "postgres.password"

    @property
    def port(self) -> int:
        return self.ports["main"]

    def _initdb(self, user: str | None) -> None:
        """Create the cluster: C locale (byte-order text sorting, as the reference sorts),
        UTF-8, a random superuser password, password auth on the loopback address only."""
        password = secrets.token_urlsafe(24)
        self.password_file.write_text(password)
        self.password_file.chmod(0o600)
        self.root.mkdir(parents=True)
        pwfile = self.workdir / f".initdb-{secrets.token_hex(4)}"
        pwfile.touch(mode=0o600)  # for initdb (run as the server's user) alone
        pwfile.write_text(password + "\n")
        try:
            chown_tree(self.root, user)
            chown_tree(pwfile, user)
            run_tool(as_user([str(bin_dir() / "initdb"), "-D", str(self.root), "-U", SUPERUSER,
                              "--pwfile", str(pwfile), "--auth-local", "scram-sha-256",
                              "--auth-host", "scram-sha-256", "--no-locale", "-E", "UTF8"], user), what="initdb")
        finally:
            pwfile.unlink(missing_ok=True)

    def prepare(self, user: str | None) -> list[str]:
        if not (self.root / "PG_VERSION").exists():
            if self.root.exists():
                shutil.rmtree(self.root)  # a half-made cluster from an interrupted initdb
            self._initdb(user)
        # After a crash (the durability suite's kill -9) the lock file outlives the server.
        remove_stale_pid_file(self.root / "postmaster.pid")
        # The Unix socket goes in the workdir (not the system's /var/run/postgresql); where
        # that path is too long for a socket name (107 bytes), there is none: TCP only.
        sockets = self.workdir / "sockets"
        socket_dir = ""
        if len(str(sockets / f".s.PGSQL.{self.port}.lock")) < 100:
            sockets.mkdir(exist_ok=True)
            chown_tree(sockets, user)
            socket_dir = str(sockets)
        argv = [str(bin_dir() / "postgres"), "-D", str(self.root), "-p", str(self.port),
                "-c", f"listen_addresses={LOOPBACK}", "-k", socket_dir]
        for key, value in {**SERVER_SETTINGS, **self.extra_settings}.items():
            argv += ["-c", f"{key}={value}"]
        return argv

    def ready(self) -> bool:
        with self._connect("postgres"):
            return True

    # -- an external endpoint: a schema of tickbench's own in the endpoint's database ------

    namespace_kind = "schema"

    def foreign_tables(self) -> list[str]:
        with self._connect(DB) as c:
            rows = c.execute(OWN_TABLES, [self.namespace, list(TABLES)]).fetchall()
        return [f"{self.namespace}.{name}" for name, comment in rows if comment != MARKER]

    def drop_own(self) -> None:
        with self._connect(DB) as c:
            own = [name for name, comment in c.execute(OWN_TABLES, [self.namespace, list(TABLES)]).fetchall()
                   if comment == MARKER]
            if own:
                c.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(
                    sql.SQL(", ").join(sql.Identifier(self.namespace, t) for t in own)))
            comment = _scalar(c, "SELECT coalesce(max(obj_description(oid, 'pg_namespace')), '') "
                                 "FROM pg_namespace WHERE nspname = %s", [self.namespace])
            empty = not c.execute("SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                                  "WHERE n.nspname = %s LIMIT 1", [self.namespace]).fetchone()
            if comment == MARKER and empty:  # the schema tickbench made, with nothing of anyone's left in it
                c.execute(sql.SQL("DROP SCHEMA {}").format(sql.Identifier(self.namespace)))

    def server_version(self) -> str:
        with self._connect(DB) as c:
            version = str(_scalar(c, "SHOW server_version"))
            if self.extension:
                ext = c.execute("SELECT extversion FROM pg_extension WHERE extname = %s", [self.extension]).fetchone()
                return f"{ext[0] if ext else 'no extension'} (PostgreSQL {version})"
            return version

    def _fresh_schema(self) -> None:
        """Tickbench's schema on the external endpoint (created, with the marker, if absent)
        without tickbench's tables; a table of its names without the marker is refused."""
        self.check_endpoint()
        with self._connect(DB) as c:
            if not c.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [self.namespace]).fetchone():
                c.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.namespace)))
                c.execute(sql.SQL("COMMENT ON SCHEMA {} IS {}").format(sql.Identifier(self.namespace),
                                                                        sql.Literal(MARKER)))
            c.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(
                sql.SQL(", ").join(sql.Identifier(self.namespace, t) for t in TABLES)))

    def connect(self) -> None:
        if not self.attached:
            self._ensure_database(DB)
        self.conn = self._connect(DB)
        lookups = self.engine_file("lookups.sql")  # O-T's session functions, in pg_temp (lookups.sql)
        self.conn.execute(lookups)
        self.literal_queries = {}
        self.statement_totals = {}
        if self.endpoint is not None:
            # The user's server: no extension created, no statistics reset; queries go over
            # psycopg (run_query), with no server-side time.
            return
        if not self.attached:
            self.conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            # Counting from zero: the first query's totals are its own.
            self.conn.execute("SELECT pg_stat_statements_reset()")
        password = urllib.parse.quote(self.password_file.read_text(), safe="")
        self.qconn = adbc.connect(f"postgresql://{SUPERUSER}:{password}@{LOOPBACK}:{self.port}/{DB}"
                                  "?options=-c%20timezone%3DUTC", autocommit=True)
        with self.qconn.cursor() as cur:
            cur.execute(lookups)
            cur.execute("SELECT pg_backend_pid()")
            row = cur.fetchone()
        self.qpid = int(row[0]) if row else None

    def disconnect(self) -> None:
        if self.qconn is not None:
            self.qconn.close()
            self.qconn = None
            self.qpid = None
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    # -- connections ----------------------------------------------------------------------

    def _connect(self, dbname: str) -> psycopg.Connection[Any]:
        endpoint = self.endpoint
        if endpoint is None:
            return psycopg.connect(host=LOOPBACK, port=self.port, user=SUPERUSER, dbname=dbname,
                                   password=self.password_file.read_text(), autocommit=True,
                                   options="-c timezone=UTC")
        # The user's server: its one database (tickbench's tables go in a schema of their own
        # in it), credentials from the environment only (None: libpq's PGPASSWORD, ~/.pgpass).
        path = self.namespace + (",public" if self.extension else "")  # the extension's functions
        return psycopg.connect(host=endpoint.host, port=endpoint.port,
                               user=endpoint.user or os.environ.get("PGUSER") or getpass.getuser(),
                               dbname=endpoint.database or os.environ.get("PGDATABASE") or "postgres",
                               password=endpoint.password(), autocommit=True,
                               options=f"-c timezone=UTC -c search_path={path}")

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
            c.execute(DROP_TABLES)

    # -- schema and loading -------------------------------------------------------------

    def _create_schema(self, c: psycopg.Connection[Any], days: list[str] | None = None) -> None:
        """Create the extension (if any) and the tables in ``c``'s (empty) database: for a load
        of ``days``, partitioned by day (:attr:`partition_file`) with a partition per day; for
        the ingest store (``None``), plain. On an external endpoint, in tickbench's schema, each
        table marked as tickbench's."""
        if self.extension and self.endpoint is None:
            c.execute(sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(self.extension)))
        elif self.extension and not c.execute("SELECT 1 FROM pg_extension WHERE extname = %s",
                                              [self.extension]).fetchone():
            # Installing an extension on the user's server is theirs to decide, not tickbench's.
            raise EngineUnavailable(f"{self.endpoint.describe()}: the {self.extension} extension is not "  # type: ignore[union-attr]
                                    f"created in its database; run CREATE EXTENSION {self.extension} there first")
        c.execute(self.engine_file(self.schema_file))
        if self.table_options_file:
            c.execute(self.engine_file(self.table_options_file))
        if self.partition_file and days is not None:
            c.execute(self.engine_file(self.partition_file))
            for t in TABLES:
                for day in days:
                    start = dt.datetime.combine(dt.date.fromisoformat(day), dt.time(), dt.UTC)
                    c.execute(PARTITION.format(sql.Identifier(partition_name(t, day)), sql.Identifier(t),
                                               sql.Literal(start), sql.Literal(start + dt.timedelta(days=1))))
        c.execute(self.engine_file("level_statistics.sql"))
        if self.endpoint is not None:
            for t in TABLES:
                c.execute(sql.SQL("COMMENT ON TABLE {} IS {}").format(sql.Identifier(self.namespace, t),
                                                                     sql.Literal(MARKER)))

    def _copy_tables(self, dbname: str, sources: dict[str, Callable[[], Iterator[bytes]]], fmt: str) -> None:
        """COPY each relation's data (``sources[name]()`` yields COPY data in ``fmt``; a table
        or a partition) on its own connection, :data:`COPY_WORKERS` at a time in the order
        given. With :attr:`copy_freeze` the COPY follows a TRUNCATE in the same transaction, so
        it may FREEZE the rows and, with ``wal_level=minimal``, write no WAL."""
        def one(table: str) -> None:
            options = sql.SQL(fmt + (", FREEZE" if self.copy_freeze else ""))
            with self._connect(dbname) as c, c.transaction():
                if self.copy_freeze:
                    c.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(table)))
                stmt = sql.SQL("COPY {} FROM STDIN ({})").format(sql.Identifier(table), options)
                with c.cursor() as cur, cur.copy(stmt) as copy:
                    for chunk in sources[table]():
                        copy.write(chunk)

        with ThreadPoolExecutor(min(COPY_WORKERS, len(sources))) as pool:
            for f in [pool.submit(one, t) for t in sources]:
                f.result()

    def _targets(self, days: list[str]) -> dict[str, tuple[str, list[str]]]:
        """Where a load of ``days`` COPYs: each relation's (table, days), the book's first
        (the larger, so the COPYs end together); a day's partition, or the whole table."""
        tables = sorted(TABLES, key=lambda t: t != "book")
        if not self.partition_file:
            return {t: (t, days) for t in tables}
        return {partition_name(t, d): (t, [d]) for t in tables for d in days}

    def _finish(self, c: psycopg.Connection[Any]) -> int:
        """Indexes (:attr:`index_file`), statistics, and the row count."""
        if self.index_file:
            c.execute(self.engine_file(self.index_file))
        c.execute("ANALYZE trades, book")  # not the whole database: its catalogs need none
        return sum(int(_scalar(c, COUNT[t])) for t in TABLES)

    def _parquet_source(self, table: str, days: list[str]) -> Callable[[], Iterator[bytes]]:
        """Binary COPY data of ``table``'s Parquet files for ``days``, in (sym, exchange, ts)
        order: the files are (day, exchange, sym) partitions in time order."""
        entries = sorted(self.dataset.entries(table, days), key=lambda e: (e["sym"], e["exchange"], e["day"]))
        files = [self.dataset.root / e["path"] for e in entries]

        def chunks() -> Iterator[bytes]:
            yield pgcopy.HEADER
            for f in files:
                data = pq.read_table(f)
                if not pgcopy.encodable(data):
                    raise RuntimeError(f"{f}: nulls or unexpected types; binary COPY needs the SPEC schema")
                yield from pgcopy.encode(data)
            yield pgcopy.TRAILER
        return chunks

    def _load_files(self, dbname: str, days: list[str], sources: dict[str, Callable[[], Iterator[bytes]]],
                    fmt: str) -> int:
        """A fresh schema for ``days`` in ``dbname``, COPYed from ``sources``, indexed and analysed."""
        with self._connect(dbname) as c:
            self._create_schema(c, days)
            self._copy_tables(dbname, sources, fmt)
            return self._finish(c)

    def _load_parquet(self, dbname: str, days: list[str]) -> int:
        sources = {name: self._parquet_source(t, ds) for name, (t, ds) in self._targets(days).items()}
        return self._load_files(dbname, days, sources, "FORMAT binary")

    def load(self) -> int:
        days = self.params.load_days()
        if self.endpoint is None:
            self._fresh_database(DB)
        else:
            self._fresh_schema()
        rows = self._load_parquet(DB, days)
        # VACUUM resets the tables' insert counters, so autovacuum does not vacuum them in the
        # background during the queries (COPY FREEZE already set the visibility map); the
        # checkpoint leaves nothing for a timed checkpoint to write during them. On the user's
        # server there is no CHECKPOINT: it is server-wide (and needs a privileged role).
        self._conn().execute("VACUUM trades, book")
        if self.endpoint is None:
            self._conn().execute("CHECKPOINT")
        return rows

    # -- queries --------------------------------------------------------------------------

    def literal_query(self, qid: str) -> str:
        """``qid``'s text with the run's parameters written in as SQL literals by psycopg
        (ADBC runs it as ``COPY (…) TO STDOUT``, which takes no bind parameters), without its
        final semicolon; made once per parameter set."""
        text = self.literal_queries.get(qid)
        if text is None:
            raw = self.query_text(qid)
            with psycopg.ClientCursor(self._conn()) as cur:
                text = cur.mogrify(raw, pg_bindings(self.params.bindings(), raw)).rstrip().rstrip(";") + "\n"
            self.literal_queries[qid] = text
        return text

    def run_query(self, qid: str) -> pa.Table:
        if self.qconn is None:
            if self.endpoint is None:
                raise RuntimeError("PostgreSQL is not started")
            # An external endpoint: psycopg rows, bound parameters (ADBC is not set up there).
            raw = self.query_text(qid)
            with self._conn().cursor() as cur:
                cur.execute(raw, pg_bindings(self.params.bindings(), raw))
                return result_arrow(None, cur)
        text = self.literal_query(qid)
        with self.qconn.cursor() as cur:
            cur.execute(text)
            table: pa.Table = cur.fetch_arrow_table()
        return table

    def explain(self, qid: str) -> str:
        """``EXPLAIN (ANALYZE, BUFFERS)`` of the query as it runs (its literal form): the
        plan with each node's rows, time and pages (the partitions or TimescaleDB's chunks it
        kept). For a query that calls a lookup function of ``lookups.sql``, followed by the
        plans of the statements the function ran (the first three lookups'), which the outer
        plan shows only as a Function Scan: PostgreSQL's own ``auto_explain`` logs them and the
        log lines reach this session as notices. Only on a server tickbench runs (loading a
        module is for the server's superuser)."""
        with self._conn().cursor() as cur:
            cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + self.literal_query(qid))
            plan = "\n".join(str(r[0]) for r in cur.fetchall())
        if "pg_temp." not in self.query_text(qid) or self.endpoint is not None:
            return plan
        notices: list[str] = []
        conn = self._conn()

        def keep(diag: psycopg.errors.Diagnostic) -> None:
            if diag.message_primary and "plan:" in diag.message_primary:
                notices.append(diag.message_primary)

        conn.add_notice_handler(keep)
        try:
            conn.execute("LOAD 'auto_explain'")
            conn.execute("SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on; "
                          "SET auto_explain.log_nested_statements = on; SET client_min_messages = log")
            conn.execute(self.literal_query(qid)).fetchall()
        finally:
            conn.execute("RESET client_min_messages; SET auto_explain.log_min_duration = -1")
            conn.remove_notice_handler(keep)
        # The first lookups (the outer statement's own entry, which names the function, left out).
        nested = [n for n in notices if "pg_temp." not in n][:3]
        return plan + "".join(f"\n\n(a statement the lookup function ran)\n{n}" for n in nested)

    def set_params(self, params: RunParams) -> None:
        super().set_params(params)
        self.literal_queries = {}

    def query_server_ns(self) -> int | None:
        """The last query's time in the server, from ``pg_stat_statements``: the growth of
        its statement's total execution time (the ``COPY`` ADBC ran: planning, execution and
        sending the rows) since it was last read, when exactly one call of it ran in between
        (another client running the same statement makes it ``None``). Read after the
        clock stops, on the adapter's other connection."""
        if self.conn is None or self.qpid is None:
            return None
        row = self.conn.execute(LAST_QUERY_ID, [self.qpid]).fetchone()
        if row is None or row[0] is None:
            return None
        qid = int(row[0])
        totals = self.conn.execute(STATEMENT_TOTALS, [qid]).fetchone()
        if totals is None:
            return None
        calls, ms = int(totals[0]), float(totals[1])
        # Unread before: zero since connect() reset the statistics (an attached client did not).
        before = self.statement_totals.get(qid, None if self.attached else (0, 0.0))
        self.statement_totals[qid] = (calls, ms)
        if before is None or calls - before[0] != 1:
            return None
        return round((ms - before[1]) * 1e6)

    # -- W and SE -------------------------------------------------------------------------

    def bulk_load(self, fmt: str, scratch: Path) -> LoadFigures:
        """W through tickbench's path into a fresh database ``w_<fmt>``: the CSV streamed
        as it is (``COPY … (FORMAT csv, HEADER)``), or the Parquet files as binary COPY;
        both tables in parallel, then the indexes and ANALYZE; committed on return."""
        db = f"w_{fmt}"
        self._fresh_database(db)
        if fmt == "parquet":
            day = [self.dataset.bulk_day]
            files = [f for t in TABLES for f in self.dataset.files(t, day)]
            return LoadFigures(rows=self._load_parquet(db, day), input_bytes=sum(f.stat().st_size for f in files),
                               detail={"database": db, "copy": "binary", "durability": self.w_durability})
        if fmt != "csv":
            raise ValueError(f"unknown format {fmt!r}")
        # The CSV is the one bulk-load day: a row of another day fails its partition's constraint.
        day = [self.dataset.bulk_day]
        paths = {t: self.dataset.csv_file(t) for t in TABLES}
        rows = self._load_files(db, day, {name: _file_chunks(paths[t]) for name, (t, _) in self._targets(day).items()},
                                "FORMAT csv, HEADER")
        return LoadFigures(rows=rows, input_bytes=sum(p.stat().st_size for p in paths.values()),
                           detail={"database": db, "copy": "csv", "durability": self.w_durability})

    def baseline_load(self, fmt: str, scratch: Path) -> LoadFigures:
        """PostgreSQL's own simplest path into a fresh database ``baseline_<fmt>``: the schema,
        then ``psql -c "\\copy table FROM 'file' WITH (FORMAT csv, HEADER)"`` per table (psql
        reads the file, so the server user need not), then the same indexes and ANALYZE.
        PostgreSQL reads no Parquet: for ``parquet`` the files are first written as CSV with
        pyarrow into ``scratch``, and that counts in the time. The tables are partitioned as
        for W; ``\\copy`` into a partitioned table routes each row to its day's partition."""
        db = f"baseline_{fmt}"
        self._fresh_database(db)
        if fmt == "csv":
            paths = {t: self.dataset.csv_file(t) for t in TABLES}
            nbytes = sum(p.stat().st_size for p in paths.values())
        elif fmt == "parquet":
            scratch.mkdir(parents=True, exist_ok=True)
            paths, nbytes = {}, 0
            for t in TABLES:
                files = self.dataset.input_files(t, [self.dataset.bulk_day], scratch)
                nbytes += sum(f.stat().st_size for f in files)
                paths[t] = scratch / f"{t}.csv"
                pacsv.write_csv(pq.read_table(files, schema=SCHEMAS[t]), paths[t])
        else:
            raise ValueError(f"unknown format {fmt!r}")
        with self._connect(db) as c:
            self._create_schema(c, [self.dataset.bulk_day])
            for t, p in paths.items():
                self._psql(db, f"\\copy {t} FROM '{p}' WITH (FORMAT csv, HEADER)")
            rows = self._finish(c)
        return LoadFigures(rows=rows, input_bytes=nbytes, detail={"database": db, "tool": "psql \\copy",
                                                                  "durability": self.w_durability})

    def _psql(self, dbname: str, command: str) -> None:
        env = {"PGPASSWORD": self.password_file.read_text(), "PGTZ": "UTC"}
        run_tool([str(bin_dir() / "psql"), "-X", "-v", "ON_ERROR_STOP=1", "-h", LOOPBACK, "-p", str(self.port),
                  "-U", SUPERUSER, "-d", dbname, "-c", command], env, what=f"psql {command!r}")

    def storage_bytes(self) -> dict[str, int]:
        """SE: the 30-day period's partitions of the store :meth:`load` built (VACUUMed and
        CHECKPOINTed there; the queries since wrote nothing): heap, TOAST, free-space and
        visibility maps and indexes of each of its days' partitions of both tables, and the heap
        and index split. The other days loaded (the multi-exchange day) have their own partitions."""
        c = self._conn()
        sizes: dict[str, int] = {}
        heap = 0
        for t in TABLES:
            names = [partition_name(t, d) for d in self.params.days("month")]
            total, table = c.execute(PARTITION_SIZES, [names]).fetchone() or (0, 0)
            sizes[t], heap = int(total), heap + int(table)
        return {"total_relation_size": sum(sizes.values()), **{f"{t}_total": n for t, n in sizes.items()},
                "heap_and_toast": heap, "indexes": sum(sizes.values()) - heap}

    # -- ingest (tick-latency, stream and durability suites) ------------------------------

    def ingest_open(self, store: Path, durability: str | None = None) -> None:
        """The ingest store is database ``ingest`` of this server; ``store`` (a directory)
        records whose its tables are: a store without this server's marker is new, and gets
        empty tables (any earlier ones dropped); a store with it reopens the tables as they are."""
        setting = self.durability_setting(durability)
        self.ingest_close()
        self.ingest_setting = setting
        self._ensure_database(INGEST_DB)
        identity = {"database": INGEST_DB}
        with self._connect(INGEST_DB) as c:
            exists = _scalar(c, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' "
                                "AND tablename = ANY(%s)", [list(TABLES)])
            if not self.marker_names(store, identity) or exists != len(TABLES):
                with c.transaction():
                    c.execute(DROP_TABLES)
                    self._create_schema(c)
                    c.execute(self.engine_file(self.ingest_index_file))
        self.write_marker(store, identity)
        self.open_readers(lambda: self._connect(INGEST_DB))

    def ingest_client(self) -> IngestClient:
        if self.readers is None:
            raise RuntimeError("the ingest store is not open")
        conn = self._connect(INGEST_DB)
        conn.execute(SYNCHRONOUS_COMMIT[self.ingest_setting])
        return Writer(conn)

    def ingest_stream_target(self) -> StreamTarget:
        if self.readers is None:
            raise RuntimeError("the ingest store is not open")
        conninfo = {"host": LOOPBACK, "port": self.port, "user": SUPERUSER, "dbname": INGEST_DB,
                    "password": self.password_file.read_text(), "options": "-c timezone=UTC"}
        return CopyTarget(conninfo, SYNCHRONOUS_COMMIT[self.ingest_setting])

    def ingest_read(self, table: str, sym: str) -> pa.Table:
        with self.reader().cursor() as cur:
            cur.execute(READ[table], [sym])
            return result_arrow(table, cur)

    def ingest_count(self, table: str) -> int:
        return int(_scalar(self.reader(), COUNT[table]))

    def ingest_latest(self) -> pa.Table:
        with self.reader().cursor() as cur:
            cur.execute(self.engine_file("ingest_latest.sql"))
            out = result_arrow(None, cur)
        return out.set_column(1, "ts", out.column("ts").cast(SCHEMAS["book"].field("ts").type))

    def settings(self) -> dict[str, Any]:
        c = self._conn()
        names = [*SERVER_SETTINGS, *self.extra_settings, "server_version"]
        rows = c.execute("SELECT name, setting, unit FROM pg_settings WHERE name = ANY(%s)", [names]).fetchall()
        out: dict[str, Any] = {n: s + (f" {u}" if u else "") for n, s, u in rows}
        if self.extension:
            out[f"{self.extension}_version"] = _scalar(
                c, "SELECT extversion FROM pg_extension WHERE extname = %s", [self.extension])
        out["load_copy"] = "binary COPY FROM STDIN encoded from Arrow"
        out["results"] = "ADBC PostgreSQL driver: COPY (query) TO STDOUT (FORMAT binary) into Arrow"
        out["server_time"] = "pg_stat_statements total_exec_time of the query's COPY (plan, execute, send)"
        return out


def partition_name(table: str, day: str) -> str:
    """The name of ``table``'s partition of the ISO ``day`` (checked as a date), e.g. ``book_20220618``."""
    return f"{table}_{dt.date.fromisoformat(day):%Y%m%d}"


def _file_chunks(path: Path) -> Callable[[], Iterator[bytes]]:
    """The file at ``path`` as COPY data, read in chunks."""
    def chunks() -> Iterator[bytes]:
        with open(path, "rb") as f:
            while chunk := f.read(COPY_CHUNK_BYTES):
                yield chunk
    return chunks


def pg_bindings(binds: dict[str, Any], text: str) -> dict[str, Any]:
    """psycopg parameters for the ``%(name)s`` placeholders of ``text`` from
    ``QueryParams.bindings()``: naive UTC datetimes become aware ones, so psycopg sends them
    as ``timestamptz`` (lists as ``timestamptz[]``) and no session time zone is involved."""
    def utc(v: Any) -> Any:
        if isinstance(v, list):
            return [utc(x) for x in v]
        return v.replace(tzinfo=dt.UTC) if isinstance(v, dt.datetime) else v
    return {name: utc(binds[name]) for name in set(PARAM.findall(text))}


def _scalar(c: psycopg.Connection[Any], query: Any, params: list[Any] | None = None) -> Any:
    row = c.execute(query, params).fetchone()
    if row is None:
        raise RuntimeError("no row")
    return row[0]
