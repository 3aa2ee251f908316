"""ClickHouse embedded in the Python process through chDB, over one persistent session path.

A process can open only one chDB session path, and no other process can open a path while it
is in use, so everything this adapter stores lives in one session under ``workdir``: the query
data in database ``tickbench``, each W store in a database of its own (``w_csv``,
``baseline_parquet``, …), whose bytes are told apart through ``system.parts``. The ingest
store (tick-latency, stream, durability) is database ``tickbench_ingest`` in that session too,
or, when no session is open, in a session of its own under the store's directory.
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, ClassVar

import chdb
import pyarrow as pa
from chdb.session import Session
from chdb.state.sqlitelike import Connection

from tickbench.datasets.base import RunParams
from tickbench.datasets.paper.schema import SCHEMAS, TABLES
from tickbench.engines.base import (
    BulkLoad,
    Engine,
    EngineTime,
    EngineUnavailable,
    Ingest,
    IngestByKind,
    IngestClient,
    LoadFigures,
    ProcessClients,
    Storage,
    StoreByKind,
    StreamTarget,
    storage_figures,
    whole_store,
)
from tickbench.engines.chdb.ingest import INGEST_DB, INGEST_INSERT, ArrowStreamTarget, Writer
from tickbench.engines.chdb.market import ChdbMarket
from tickbench.engines.chdb.statements import (
    BASELINE_CREATE,
    COUNT,
    CREATE_DB,
    DB,
    DB_PARTS,
    DROP_DB,
    DROP_DB_SYNC,
    DROP_TABLE,
    FLUSH_LOG,
    FORMATS,
    GLOB_CHARS,
    INSERT,
    INSERT_DAY,
    MERGES,
    OPTIMIZE_DAY,
    PARTS,
    QUERY_MEMORY,
    SET_FSYNC,
    SETTINGS,
    SPLIT_DAYS,
    STARTUP,
    USE_DB,
    W_DURABILITY,
    file_glob,
    param_text,
    query_params,
)

HERE = Path(__file__).parent
SCHEMA = (HERE / "schema.sql").read_text()
# The embedded server's config file, written into the workdir at start (a string here, so the
# engine folder holds no file type the package does not ship). query_log is on so that each
# query's own peak memory can be read back; it is flushed only on demand (SYSTEM FLUSH LOGS,
# after the timed interval), never by a timer during a query.
CONFIG = """<clickhouse>
    <query_log>
        <database>system</database>
        <table>query_log</table>
        <flush_interval_milliseconds>86400000</flush_interval_milliseconds>
    </query_log>
</clickhouse>
"""

# -- ingest ---------------------------------------------------------------------------------
# In the store's directory: which session path holds the store's database, and that database's
# UUID, so a store deleted and made again (tick-latency's fresh store per repetition) gets a
# fresh database, and a store reopened in a new process (durability) finds its own.
INGEST_MARK = "chdb-ingest.json"
# The MergeTree settings each durability choice puts on the ingest tables at ingest_open.
FSYNC = {"default": 0, "fsync": 1, "async": 0}
INGEST_UUID = "SELECT toString(uuid) AS uuid FROM system.databases WHERE name = {db:String}"
INGEST_READ = {
    "trades": "SELECT * FROM {db:Identifier}.trades WHERE sym = {sym:String} ORDER BY ts, trade_id",
    "book": "SELECT * FROM {db:Identifier}.book WHERE sym = {sym:String} ORDER BY ts",
}
# The latest row per sym: LIMIT BY over the table's own order (sym, …, ts) reads in order.
INGEST_LATEST = ("SELECT sym, ts, b1price, a1price FROM {db:Identifier}.book "
                 "ORDER BY sym, ts DESC LIMIT 1 BY sym")


class Adapter(StoreByKind, IngestByKind, Engine, BulkLoad, Storage, Ingest, EngineTime, ProcessClients, ChdbMarket):
    # A session or, for a user's client (open_client), a connection of its own: same query().
    session: Session | Connection | None = None
    # True while the session's last statement was a benchmark query (see query_memory_bytes).
    _query_last: bool = False
    # The last benchmark query's query_log row once read (query_memory_bytes, query_server_ns).
    _query_log: dict[str, Any] | None = None
    # The open session's connection string (path and startup arguments).
    session_conn: str | None = None
    ingest_conn: str | None = None  # the ingest store's session connection string, while open
    _links: Path | None = None  # where file() reads inputs through plain-named links (see file_glob)
    ingest_mode: str = "default"
    _ingest_readers: threading.local | None = None
    _ingest_open: list[Connection]  # every connection ingest_open and the readers opened
    ingest_durability: ClassVar[dict[str, str]] = {
        "default": "async_insert=0 (ClickHouse's default; chDB's is 1), fsync_after_insert=0 and "
                   "fsync_part_directory=0 (ClickHouse's default): acknowledged when the insert's part is "
                   "written and active, in the page cache, not fsynced",
        "fsync": "async_insert=0, fsync_after_insert=1 and fsync_part_directory=1 on the MergeTree tables: "
                 "each insert's part files and directory are fsynced before the acknowledgement",
        "async": "chDB's own default, async_insert=1 with wait_for_async_insert=1: concurrent inserts are "
                 "buffered and flushed together into one part, each acknowledged once flushed; no fsync",
    }
    # Each mode acknowledges an insert once its part's files are written: a killed process
    # loses none of them (only "fsync" also survives losing the page cache, a machine crash).
    ingest_durable: ClassVar[frozenset[str]] = frozenset(ingest_durability)
    # async_insert off: an INSERT returns once its part is committed, and a new query sees it.
    ingest_visible_on_commit: ClassVar[bool] = True
    ingest_one_process: ClassVar[str] = (
        "chDB embeds one ClickHouse engine per process on its data path, and a second process cannot open that "
        "path while it is open (\"Error initializing EmbeddedServer\"): writers and watcher are threads of the "
        "engine's process")
    users_limit: ClassVar[str] = (
        "one process per store: chDB hosts one embedded engine per process, bound to one path, and a second "
        "process cannot open a path in use (ClickHouse locks its status file); within the process any number "
        "of connections run their queries concurrently (chDB's connect() docs), so the users are threads of "
        "one process, each with its own connection")

    @classmethod
    def probe(cls) -> str:
        try:
            return f"{chdb.engine_version} (chDB {chdb.__version__})"
        except AttributeError as exc:  # an old chDB without the embedded ClickHouse's version
            raise EngineUnavailable(f"chDB {getattr(chdb, '__version__', '?')} is too old") from exc

    @property
    def session_path(self) -> Path:
        return self.workdir / "chdb"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "chdb-config.xml"
        config.write_text(CONFIG)
        if set(str(self.workdir)) & set("?&"):  # they would split chDB's connection string
            raise EngineUnavailable(f"chDB cannot open a path containing '?' or '&': {self.workdir}")
        try:
            # Connection-string parameters become the embedded ClickHouse's startup arguments.
            conn = f"{self.session_path}?config-file={config}&{STARTUP}"
            self.session = Session(conn)
            self.session_conn = conn
        except RuntimeError as exc:  # chDB's own message is only "Error initializing EmbeddedServer"
            raise RuntimeError(f"chDB could not open {self.session_path}; another process may hold "
                               f"it (one process per session path): {exc}") from exc
        self._sql(CREATE_DB, {"db": DB})
        self._sql(USE_DB, {"db": DB})

    def open_client(self, params: RunParams) -> Adapter:
        """A user's own connection to the open session path, in this process (USE is per
        connection), bound to ``params``."""
        if self.session_conn is None:
            raise RuntimeError("chDB is not started")
        client = copy.copy(self)
        client.session, client._links = Connection(self.session_conn), None
        client._query_last, client._query_log = False, None
        client._sql(USE_DB, {"db": DB})
        client.set_params(params)
        return client

    def stop(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None
            self.session_conn = None
        if self._links is not None and not self._links.is_relative_to(self.workdir):
            shutil.rmtree(self._links, ignore_errors=True)
        self._links = None

    def _sql(self, sql: str, params: dict[str, Any] | None = None, fmt: str = "CSV") -> Any:
        if self.session is None:
            raise RuntimeError("chDB is not started")
        self._query_last = False
        text = {name: param_text(value) for name, value in (params or {}).items()}
        return self.session.query(sql, fmt, params=text)

    def _scalars(self, sql: str, params: dict[str, Any] | None = None) -> list[int]:
        """The first row of a query of integers (a sum over no rows is 0)."""
        row = self._sql(sql, params, "ArrowTable").to_pylist()[0]
        return [int(v or 0) for v in row.values()]

    def _create(self, db: str) -> None:
        self._sql(DROP_DB, {"db": db})
        self._sql(CREATE_DB, {"db": db})
        self._sql(SCHEMA, {"db": db})

    def _glob(self, files: list[Path]) -> str:
        if self._links is None:
            # the links' own directory must be free of glob characters too (a --out under /x[1])
            self._links = (self.workdir / "links" if not set(str(self.workdir)) & GLOB_CHARS
                           else Path(tempfile.mkdtemp(prefix="tickbench-chdb-links-")))
        return file_glob(files, self._links)

    def _insert(self, db: str, table: str, fmt: str, files: list[Path]) -> int:
        """Insert ``files`` (one day's) with ClickHouse's own reader for ``fmt`` as one squashed
        block, so one part per partition; return their bytes."""
        self._sql(INSERT_DAY, {"db": db, "table": table, "path": self._glob(files), "fmt": FORMATS[fmt]})
        return sum(f.stat().st_size for f in files)

    def _merge_split_days(self, db: str) -> None:
        """Merge each daily partition the inserts left in several parts into one part
        (``OPTIMIZE … PARTITION ID … FINAL``; none at SF 1), returning when it is active."""
        for table in TABLES:
            for row in self._sql(SPLIT_DAYS, {"db": db, "table": table}, "ArrowTable").to_pylist():
                self._sql(OPTIMIZE_DAY, {"db": db, "table": table, "partition": row["partition_id"]})

    def _rows(self, db: str) -> int:
        return sum(self._scalars(COUNT, {"db": db, "table": t})[0] for t in TABLES)

    def _load_paper(self) -> int:
        days = self.params.load_days()
        for table in TABLES:
            self._sql(DROP_TABLE, {"db": DB, "table": table})
        self._sql(SCHEMA, {"db": DB})
        for table in TABLES:
            for day in days:  # a day without a file (a gap in a capture) adds nothing
                if files := self.dataset.files(table, [day]):
                    self._insert(DB, table, "parquet", files)
        self._merge_split_days(DB)
        return self._rows(DB)

    def run_query(self, qid: str) -> pa.Table:
        sql = self.query_text(qid)
        table = self._sql(sql, query_params(sql, self.params.bindings()), "ArrowTable")
        self._query_last = True
        self._query_log = None
        assert isinstance(table, pa.Table)
        return table

    def explain(self, qid: str) -> str:
        """``EXPLAIN indexes = 1``: the plan with the parts and granules the primary key
        (sym, exchange, ts) and the partition key keep for each read; first, what one run of
        the query selected over all its reads (``system.query_log``), since the reads of
        scalar subqueries run before the plan is built and are not in it. Their results are
        folded into the plan as constants: a line longer than ``PLAN_LINE`` is cut."""
        sql = self.query_text(qid)
        table = self._sql("EXPLAIN indexes = 1 " + sql, query_params(sql, self.params.bindings()), "ArrowTable")
        plan = "\n".join(clip(str(v)) for v in table.column(0).to_pylist())
        self.run_query(qid)
        row = self._last_query_log()
        if not row:
            return plan
        read = (f"Read by one run, all its reads summed (system.query_log): parts {row['parts']:,} "
                f"selected of {row['parts_total']:,}, granules {row['marks']:,} of {row['marks_total']:,} "
                "(SelectedParts/SelectedPartsTotal, SelectedMarks/SelectedMarksTotal), "
                f"{row['read_rows']:,} rows, {row['read_bytes']:,} bytes read")
        return read + "\n\n" + plan

    def query_memory_bytes(self) -> int | None:
        """The last query's peak memory as ClickHouse tracked it (``system.query_log``
        ``memory_usage``), or None if it is not there. Called after the timed interval: the
        log is flushed here, on demand. None unless the session's last statement was a
        benchmark query, since the row is found as the latest finished SELECT."""
        row = self._last_query_log()
        return int(row["memory_usage"]) if row else None

    def query_server_ns(self) -> int | None:
        """The last query's duration as ClickHouse logged it (``system.query_log``: finish
        minus start, µs), read after the timed interval as :meth:`query_memory_bytes` is."""
        row = self._last_query_log()
        return int(row["duration_us"]) * 1000 if row else None

    def _last_query_log(self) -> dict[str, Any] | None:
        """The last benchmark query's query_log row, read once (the log flushed on demand);
        ``{}`` when it is not there, ``None`` when the last statement was not a benchmark query."""
        if self._query_log is None:
            if not self._query_last:
                return None
            self._sql(FLUSH_LOG)
            rows = self._sql(QUERY_MEMORY, fmt="ArrowTable").to_pylist()
            self._query_log = rows[0] if rows else {}
        return self._query_log

    def _day_files(self, table: str, fmt: str) -> list[Path]:
        if fmt not in FORMATS:
            raise ValueError(f"unknown bulk-load format {fmt!r}")
        if fmt == "csv":
            return [self.dataset.csv_file(table)]
        return self.dataset.input_files(table, [self.dataset.bulk_day], self.workdir)

    def _figures(self, db: str, nbytes: int) -> LoadFigures:
        disk, parts = self._scalars(DB_PARTS, {"db": db})
        return LoadFigures(rows=self._rows(db), input_bytes=nbytes,
                           detail={"database": db, "bytes_on_disk": disk, "active_parts": parts,
                                   "durability": W_DURABILITY})

    def _durable(self, db: str) -> None:
        """W's rule: the clock stops when the rows are on disk, fsynced: each insert's part
        files and directory are fsynced before the INSERT returns (ClickHouse's default does not)."""
        for table in TABLES:
            self._sql(SET_FSYNC, {"db": db, "table": table, "on": 1})

    def _bulk_load_paper(self, fmt: str, scratch: Path) -> LoadFigures:
        """W: the bulk-load day into a fresh database ``w_<fmt>`` with tickbench's schema,
        through ``INSERT … SELECT FROM file()``, one part per day and table as the query store;
        committed (its parts active) on return. ``scratch`` is not used: a second chDB session
        path cannot be opened in this process."""
        db, files = f"w_{fmt}", {t: self._day_files(t, fmt) for t in TABLES}
        self._create(db)
        self._durable(db)
        nbytes = sum(self._insert(db, t, fmt, files[t]) for t in TABLES)
        self._merge_split_days(db)
        return self._figures(db, nbytes)

    def _baseline_load_paper(self, fmt: str, scratch: Path) -> LoadFigures:
        """ClickHouse's own plain path: a MergeTree table with the schema it infers from the
        file and default settings, then ``INSERT … SELECT * FROM file()``."""
        db, files = f"baseline_{fmt}", {t: self._day_files(t, fmt) for t in TABLES}
        self._sql(DROP_DB, {"db": db})
        self._sql(CREATE_DB, {"db": db})
        nbytes = 0
        for table in TABLES:
            args = {"db": db, "table": table, "path": self._glob(files[table]), "fmt": FORMATS[fmt]}
            create = args
            if fmt == "csv" and not self.dataset.manifest.csv[table]["rows"]:
                # A header-only CSV gives ClickHouse no row to infer types from: the empty
                # Parquet file of the schema shapes the table instead.
                empty = self.dataset.input_files(table, [], self.workdir)
                create = {**args, "path": self._glob(empty), "fmt": FORMATS["parquet"]}
            self._sql(BASELINE_CREATE, create)
            self._sql(SET_FSYNC, {"db": db, "table": table, "on": 1})
            self._sql(INSERT, args)
            nbytes += sum(f.stat().st_size for f in files[table])
        return self._figures(db, nbytes)

    def _storage_bytes_paper(self) -> dict[str, int]:
        """SE: bytes on disk of the active parts of the 30-day period's daily partitions of the
        query store, as the load left them (one merged part per partition and table)."""
        month = {"db": DB, "partitions": [d.replace("-", "") for d in self.params.days("month")]}
        disk, parts, index = self._scalars(PARTS, month)
        merging = self._scalars(MERGES, {"db": DB})[0]
        # MergeTree writes parts straight to disk: no write-ahead log to count.
        return storage_figures("parts_bytes_on_disk", disk - index, index, 0, active_parts=parts,
                               merges_running=merging)

    def settings(self) -> dict[str, Any]:
        rows = self._sql(SETTINGS, fmt="ArrowTable").to_pylist()
        out: dict[str, Any] = {str(r["name"]): str(r["value"]) for r in rows}
        out["sort_key"] = "(sym, exchange, ts)"
        out["partition_by"] = "toYYYYMMDD(ts)"
        out["codecs"] = ("ts, trade_id: Delta+LZ4; trades price, amount, book b1price, a1price, levels 1-5 sizes: "
                         "LZ4; the other book levels: ZSTD(1); exchange, sym, side: LowCardinality")
        out["projections"] = "book: venues (sym, toDate(ts), exchange, count())"
        return out

    # -- ingest -------------------------------------------------------------------------------

    def _ingest_open_paper(self, store: Path, durability: str | None = None) -> None:
        """Open database ``tickbench_ingest`` in the session already open (one session path per
        process), else in the session path the store's marker names, else in a new session
        at ``<store>/chdb``; create it afresh unless the store's marker names that very
        database; then put the durability setting's MergeTree settings on its tables."""
        mode = self.durability_setting(durability)
        if self.ingest_conn is not None:
            raise RuntimeError("an ingest store is already open")
        store.mkdir(parents=True, exist_ok=True)
        mark = store / INGEST_MARK
        recorded = json.loads(mark.read_text()) if mark.exists() else None
        conn_str = self.session_conn or (recorded or {}).get("session") or f"{store / 'chdb'}?{STARTUP}"
        if recorded is not None and recorded["session"].split("?")[0] != conn_str.split("?")[0]:
            raise RuntimeError(f"the ingest store {store} lives in chDB session {recorded['session']}, "
                               f"but this process has {conn_str} open (one session path per process)")
        try:
            conn = Connection(conn_str)
        except Exception as exc:
            raise RuntimeError(f"chDB could not open {conn_str.split('?')[0]}; another process may hold "
                               f"it (one process per session path): {exc}") from exc
        self._ingest_open = [conn]
        self.ingest_conn, self.ingest_mode = conn_str, mode
        self._ingest_readers = threading.local()
        self._ingest_readers.conn = conn
        try:
            uuid = self._ingest_sql(INGEST_UUID, {"db": INGEST_DB}).column("uuid").to_pylist()
            if recorded is None or uuid != [recorded["uuid"]]:
                self._ingest_sql(DROP_DB_SYNC, {"db": INGEST_DB})
                self._ingest_sql(CREATE_DB, {"db": INGEST_DB})
                self._ingest_sql(SCHEMA, {"db": INGEST_DB})
                uuid = self._ingest_sql(INGEST_UUID, {"db": INGEST_DB}).column("uuid").to_pylist()
                tmp = mark.with_suffix(".tmp")
                tmp.write_text(json.dumps({"session": conn_str, "uuid": uuid[0]}))
                tmp.replace(mark)
            for table in TABLES:
                self._ingest_sql(SET_FSYNC, {"db": INGEST_DB, "table": table, "on": FSYNC[mode]})
        except BaseException:
            self._ingest_close_paper()
            raise

    def _ingest_sql(self, sql: str, params: dict[str, Any] | None = None) -> pa.Table:
        """A statement on the ingest store, on this thread's own connection (opened on first
        use): the stream suite's poller and snapshot threads then never queue behind each other."""
        readers = self._ingest_readers
        if readers is None or self.ingest_conn is None:
            raise RuntimeError("the ingest store is not open")
        conn = getattr(readers, "conn", None)
        if conn is None:
            conn = readers.conn = Connection(self.ingest_conn)
            self._ingest_open.append(conn)
        text = {name: param_text(value) for name, value in (params or {}).items()}
        table = conn.query(sql, "ArrowTable", params=text)
        assert isinstance(table, pa.Table)
        return table

    def ingest_client(self) -> IngestClient:
        if self.ingest_conn is None:
            raise RuntimeError("the ingest store is not open")
        return Writer(Connection(self.ingest_conn), self.ingest_mode)

    def _ingest_stream_target_paper(self) -> StreamTarget:
        if self.ingest_conn is None:
            raise RuntimeError("the ingest store is not open")
        inserts = {t: INGEST_INSERT[t, self.ingest_mode] for t in TABLES}
        return ArrowStreamTarget(self.ingest_conn, inserts, SCHEMAS)

    def ingest_read(self, table: str, sym: str) -> pa.Table:
        return self._ingest_sql(INGEST_READ[table], {"db": INGEST_DB, "sym": sym})

    def _ingest_count_paper(self, table: str, upto_ns: int | None = None) -> int:
        whole_store(upto_ns)
        rows = self._ingest_sql(COUNT, {"db": INGEST_DB, "table": table}).to_pylist()
        return int(next(iter(rows[0].values())))

    def ingest_latest(self) -> pa.Table:
        return self._ingest_sql(INGEST_LATEST, {"db": INGEST_DB})

    def _ingest_close_paper(self) -> None:
        """Close the ingest connections; the last one to close ends a session opened for the
        store (its data stays on disk), while the adapter's own session stays open."""
        for conn in reversed(getattr(self, "_ingest_open", [])):
            conn.close()
        self._ingest_open = []
        self._ingest_readers = None
        self.ingest_conn = None


PLAN_LINE = 240


def clip(line: str) -> str:
    """A plan line cut to ``PLAN_LINE`` characters, saying how long it was."""
    return line if len(line) <= PLAN_LINE else f"{line[:PLAN_LINE]} … ({len(line):,} characters)"
