"""PostgreSQL's server (:class:`PostgresServer`): Debian's ``postgresql-15`` run as tickbench's
unprivileged service user over ``<workdir>/pgdata`` (initdb'd once with a random superuser
password, reopened as it is by later starts), on 127.0.0.1; its install, argv and settings, its
connections (psycopg 3; ADBC for the query results), an external endpoint's schema, the tables
both stores share (``schema.sql``, ``partitions.sql``) and the hooks an engine on this server
(TimescaleDB) sets.

On an external endpoint (``--endpoint postgres=HOST:PORT``) tickbench's tables go in a schema of
its own (default ``tickbench``) of the endpoint's database, each marked by a table comment
(:data:`MARKER`); the connections' ``search_path`` names that schema, so the query files run as
written. See the README.
"""

from __future__ import annotations

import datetime as dt
import getpass
import os
import secrets
import shutil
import signal
import urllib.parse
from pathlib import Path
from typing import Any, ClassVar

import adbc_driver_postgresql.dbapi as adbc
import psycopg
from psycopg import sql

from tickbench.datasets.paper.schema import TABLES
from tickbench.engines.base import EngineUnavailable
from tickbench.engines.server import (
    ENDPOINT_TIMEOUT_S,
    LOOPBACK,
    InstallStep,
    ServerEngine,
    apt_steps,
    as_user,
    chown_tree,
    remove_stale_pid_file,
    run_tool,
)

PG_MAJOR = "15"
PACKAGE = f"postgresql-{PG_MAJOR}"
HERE = Path(__file__).parent
SUPERUSER = "postgres"
DB = "tickbench"
# Server settings, passed as -c options (and recorded by settings()).
SERVER_SETTINGS = {
    "timezone": "UTC",
    # COPY into a table created or truncated in the same transaction, and index builds,
    # then write no WAL: the files are fsynced at commit instead (durable all the same).
    "wal_level": "minimal",
    "max_wal_senders": "0",
    "max_wal_size": "4GB",  # no checkpoint forced in the middle of a bulk load
    # the market suite's 100 users, each a client of its own with two connections (ADBC for the
    # results, psycopg for the rest), beside the run's own clients and the writers
    "max_connections": "300",
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
# A day's partition of a table (partitions.sql).
PARTITION = sql.SQL("CREATE TABLE {} PARTITION OF {} FOR VALUES FROM ({}) TO ({})")
# The comment tickbench puts on every table (and schema) it creates on an external endpoint:
# what it may drop, and a table of its names without it is the user's, never touched.
MARKER = "created by tickbench; dropped after the run unless --keep"
OWN_TABLES = ("SELECT c.relname, obj_description(c.oid, 'pg_class') FROM pg_class c "
              "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = ANY(%s) "
              "AND c.relkind IN ('r', 'p', 'v', 'm', 'f')")


def bin_dir() -> Path:
    return Path(f"/usr/lib/postgresql/{PG_MAJOR}/bin")


COUNT = {t: sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(t)) for t in TABLES}
DROP_TABLES = sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(sql.SQL(", ").join(map(sql.Identifier, TABLES)))


class PostgresServer(ServerEngine):
    """PostgreSQL's server, its connections and the tables both stores share;
    :class:`~tickbench.engines.postgres.load.PostgresLoad` (the query store, W, SE),
    :class:`~tickbench.engines.postgres.ingest.PostgresIngest` (the ingest store) and the query
    path (``adapter.py``) work through it."""

    server_name = "postgres"
    data_dir = "pgdata"
    port_env = "TICKBENCH_POSTGRES_PORT"  # a fixed port instead of a free one (refused if taken)
    start_timeout = 120.0
    # Fast shutdown: it ends any session left and writes the shutdown checkpoint, whereas a
    # smart one (SIGTERM) would wait for every client to disconnect.
    stop_signal = signal.SIGINT
    stop_timeout_s = 120.0
    memory_children = True  # the postmaster and its children: the query's backend, the writers
    # dynamic_shared_memory_type posix (the default) keeps DSM segments as /dev/shm/PostgreSQL.N,
    # which a SIGKILL leaves behind; mmap (files in the data directory) would move parallel
    # queries' shared memory onto the disk, so the segments a killed server mapped are removed
    shm_files = "PostgreSQL.*"
    # When the engine process dies, an immediate shutdown (SIGQUIT): the postmaster ends every
    # backend, then removes its shared memory; a SIGKILL would end the postmaster alone, and a
    # busy backend (each leads a session of its own) ran on, re-parented to init (5.5 minutes, until
    # killed by hand)
    death_signal = signal.SIGQUIT
    external_endpoint = True  # a schema of its own on the user's server (see the README)
    client_password_vars = ("PGPASSWORD",)  # libpq reads it (and ~/.pgpass) when no password is given

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
            comment = scalar(c, "SELECT coalesce(max(obj_description(oid, 'pg_namespace')), '') "
                                 "FROM pg_namespace WHERE nspname = %s", [self.namespace])
            empty = not c.execute("SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                                  "WHERE n.nspname = %s LIMIT 1", [self.namespace]).fetchone()
            if comment == MARKER and empty:  # the schema tickbench made, with nothing of anyone's left in it
                c.execute(sql.SQL("DROP SCHEMA {}").format(sql.Identifier(self.namespace)))

    def server_version(self) -> str:
        with self._connect(DB) as c:
            version = str(scalar(c, "SHOW server_version"))
            if self.extension:
                ext = c.execute("SELECT extversion FROM pg_extension WHERE extname = %s", [self.extension]).fetchone()
                return f"{ext[0] if ext else 'no extension'} (PostgreSQL {version})"
            return version

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
        self.qconn = adbc.connect(self.adbc_uri(DB), autocommit=True)
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

    def conninfo(self, dbname: str, search_path: str | None = None) -> dict[str, Any]:
        """libpq's parameters of a connection to ``dbname`` of the server tickbench runs: the
        superuser over the loopback, the session in UTC, and ``search_path`` when given (the
        schemas unqualified names resolve in, the first one where tables are created)."""
        options = "-c timezone=UTC" + (f" -c search_path={search_path}" if search_path else "")
        return {"host": LOOPBACK, "port": self.port, "user": SUPERUSER, "dbname": dbname,
                "password": self.password_file.read_text(), "options": options}

    def adbc_uri(self, dbname: str, search_path: str | None = None) -> str:
        """:meth:`conninfo` as the URI ADBC's PostgreSQL driver connects with."""
        info = self.conninfo(dbname, search_path)
        password = urllib.parse.quote(info["password"], safe="")
        options = urllib.parse.quote(info["options"], safe="")
        return f"postgresql://{SUPERUSER}:{password}@{LOOPBACK}:{self.port}/{dbname}?options={options}"

    def _connect(self, dbname: str) -> psycopg.Connection[Any]:
        endpoint = self.endpoint
        if endpoint is None:
            return psycopg.connect(**self.conninfo(dbname), autocommit=True)
        # The user's server: its one database (tickbench's tables go in a schema of their own
        # in it), credentials from the environment only (None: libpq's PGPASSWORD, ~/.pgpass).
        path = self.namespace + (",public" if self.extension else "")  # the extension's functions
        return psycopg.connect(host=endpoint.host, port=endpoint.port,
                               user=endpoint.user or os.environ.get("PGUSER") or getpass.getuser(),
                               dbname=endpoint.database or os.environ.get("PGDATABASE") or "postgres",
                               password=endpoint.password(), autocommit=True,
                               # a port that accepts and never answers fails, instead of hanging the run
                               connect_timeout=int(ENDPOINT_TIMEOUT_S),
                               options=f"-c timezone=UTC -c search_path={path}")

    def _conn(self) -> psycopg.Connection[Any]:
        if self.conn is None:
            raise RuntimeError("PostgreSQL is not started")
        return self.conn

    def _ensure_database(self, name: str) -> None:
        with self._connect("postgres") as c:
            if c.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is None:
                c.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))

    # -- tables: the query store's, W's and the ingest store's --------------------------------

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

    # -- settings ---------------------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        c = self._conn()
        names = [*SERVER_SETTINGS, *self.extra_settings, "server_version"]
        rows = c.execute("SELECT name, setting, unit FROM pg_settings WHERE name = ANY(%s)", [names]).fetchall()
        out: dict[str, Any] = {n: s + (f" {u}" if u else "") for n, s, u in rows}
        if self.extension:
            out[f"{self.extension}_version"] = scalar(
                c, "SELECT extversion FROM pg_extension WHERE extname = %s", [self.extension])
        out["load_copy"] = "binary COPY FROM STDIN encoded from Arrow"
        out["results"] = "ADBC PostgreSQL driver: COPY (query) TO STDOUT (FORMAT binary) into Arrow"
        out["server_time"] = "pg_stat_statements total_exec_time of the query's COPY (plan, execute, send)"
        return out


def partition_name(table: str, day: str) -> str:
    """The name of ``table``'s partition of the ISO ``day`` (checked as a date), e.g. ``book_20220618``."""
    return f"{table}_{dt.date.fromisoformat(day):%Y%m%d}"


def scalar(c: psycopg.Connection[Any], query: Any, params: list[Any] | None = None) -> Any:
    """The one value of ``query``'s first row (raise if it has none)."""
    row = c.execute(query, params).fetchone()
    if row is None:
        raise RuntimeError("no row")
    return row[0]
