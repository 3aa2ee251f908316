"""The market suite on chDB (SPEC §2.3): the market tables (``market.sql``) in the query database
``tickbench``, loaded a day at a time through ClickHouse's own Parquet reader; M-W's stores in
databases of their own (``mw_csv``, ``mw_parquet``, ``mw_baseline_*``) in the same session, as
the paper suite's W stores are (one chDB session path per process); the market ingest store
(queries during ingest) in database ``tickbench_market_ingest`` of that session, written by
the stream path's Arrow INSERTs (``ingest.py``) while each user queries it on a connection of
its own."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from chdb.state.sqlitelike import Connection

from tickbench.data.dataset import inside
from tickbench.datasets.market.schema import INSTRUMENTS_PATH, MARKET_SCHEMAS
from tickbench.engines.base import (
    EngineInfo,
    IngestReader,
    LoadFigures,
    StreamTarget,
    storage_figures,
    upto_all,
)
from tickbench.engines.chdb import statements as ch
from tickbench.engines.chdb.ingest import ArrowStreamTarget

if TYPE_CHECKING:
    from tickbench.data.dataset import Dataset
    from tickbench.datasets.base import RunParams

HERE = Path(__file__).parent
MARKET_SCHEMA = (HERE / "market.sql").read_text()
MARKET_TABLES = ("instruments", "quotes", "trades")
DAY_TABLES = ("quotes", "trades")  # partitioned by day; M-W loads these
# As the paper path's INSERT_DAY (one squashed block, so one part per daily partition), and a
# null in a file is an error, not ClickHouse's default of the column's zero: the market columns
# are not Nullable, and a null bid silently read as 0 would change answers.
INSERT_MARKET = (
    "INSERT INTO {db:Identifier}.{table:Identifier} SELECT * FROM file({path:String}, {fmt:Identifier}) "
    "SETTINGS min_insert_block_size_rows = 1000000000, min_insert_block_size_bytes = 2147483648, "
    "input_format_null_as_default = 0"
)
INGEST_DB = "tickbench_market_ingest"
# The ingest suites' default: async_insert off (chDB turns it on), so each INSERT is one part,
# acknowledged once active and visible to the next query.
INGEST_INSERT = {t: f"INSERT INTO {INGEST_DB}.{t} SETTINGS async_insert = 0, wait_for_async_insert = 1"
                 for t in DAY_TABLES}
INGEST_COUNT = ("SELECT count() FROM {db:Identifier}.{table:Identifier} "
                "WHERE ts <= fromUnixTimestamp64Nano({upto:Int64}, 'UTC')")
MARKET_PARTS = (
    f"SELECT sum(bytes_on_disk), count(), sum(rows), {ch.PART_INDEX_BYTES} FROM system.parts "
    "WHERE active AND database = {db:String} AND table IN {tables:Array(String)}"
)


class _Reader(IngestReader):
    """One user's own chDB connection to the session path, using the market ingest database
    (``USE`` is per connection): chDB runs different connections' queries concurrently, so
    the users are not serialised as the adapter's one session serialises its copies."""

    def __init__(self, info: EngineInfo, conn_str: str) -> None:
        self.info, self.conn = info, Connection(conn_str)
        self.conn.query(ch.USE_DB, params={"db": INGEST_DB})

    def run_query(self, qid: str, params: RunParams) -> pa.Table:
        sql = self.info.query_text(qid)
        text = {n: ch.param_text(v) for n, v in ch.query_params(sql, params.bindings()).items()}
        table = self.conn.query(sql, "ArrowTable", params=text)
        assert isinstance(table, pa.Table)
        return table

    def close(self) -> None:
        self.conn.close()


class ChdbMarket:
    """The market capabilities for :class:`tickbench.engines.chdb.adapter.Adapter` (which
    inherits this), on its session's ``_sql``."""

    market_ingest_conn: str | None = None  # the session's connection string while the store is open

    if TYPE_CHECKING:  # the Adapter's, which inherits this
        dataset: Dataset
        params: RunParams
        workdir: Path
        info: EngineInfo
        session_conn: str | None

        def _sql(self, sql: str, params: dict[str, Any] | None = None, fmt: str = "CSV") -> Any: ...

        def _scalars(self, sql: str, params: dict[str, Any] | None = None) -> list[int]: ...

        def _glob(self, files: list[Path]) -> str: ...

        def default_setting_only(self, setting: str) -> None: ...

    def _market_create(self, db: str) -> None:
        """``db`` with the market tables, empty (the tables of an earlier load dropped)."""
        self._sql(ch.CREATE_DB, {"db": db})
        for table in MARKET_TABLES:
            self._sql(ch.DROP_TABLE, {"db": db, "table": table})
        self._sql(MARKET_SCHEMA, {"db": db})

    def _market_insert(self, db: str, table: str, fmt: str, files: list[Path]) -> int:
        """Insert ``files`` (one day's, or the instruments file) as one squashed block; their bytes."""
        self._sql(INSERT_MARKET, {"db": db, "table": table, "path": self._glob(files), "fmt": ch.FORMATS[fmt]})
        return sum(f.stat().st_size for f in files)

    def _market_merge_split_days(self, db: str) -> None:
        """Each daily partition left in several parts merged into one (none at SF 1)."""
        for table in DAY_TABLES:
            for row in self._sql(ch.SPLIT_DAYS, {"db": db, "table": table}, "ArrowTable").to_pylist():
                self._sql(ch.OPTIMIZE_DAY, {"db": db, "table": table, "partition": row["partition_id"]})

    def _market_rows(self, db: str, tables: tuple[str, ...]) -> int:
        return sum(self._scalars(ch.COUNT, {"db": db, "table": t})[0] for t in tables)

    def _load_market(self) -> int:
        """The instruments, then each day of ``load_days()`` of quotes and trades, a day per
        INSERT (one part per daily partition); returns when the parts are active."""
        self._market_create(ch.DB)
        self._market_insert(ch.DB, "instruments", "parquet", [inside(self.dataset.root, INSTRUMENTS_PATH)])
        for table in DAY_TABLES:
            for day in self.params.load_days():
                if files := self.dataset.files(table, [day]):  # a day without data adds nothing
                    self._market_insert(ch.DB, table, "parquet", files)
        self._market_merge_split_days(ch.DB)
        return self._market_rows(ch.DB, MARKET_TABLES)

    def _market_day_files(self, table: str, fmt: str) -> list[Path]:
        if fmt not in ch.FORMATS:
            raise ValueError(f"unknown bulk-load format {fmt!r}")
        if fmt == "csv":
            return [self.dataset.csv_file(table)]
        return self.dataset.input_files(table, [self.dataset.bulk_day], self.workdir)

    def _market_figures(self, db: str, nbytes: int) -> LoadFigures:
        disk, parts = self._scalars(ch.DB_PARTS, {"db": db})
        return LoadFigures(rows=self._market_rows(db, DAY_TABLES), input_bytes=nbytes,
                           detail={"database": db, "bytes_on_disk": disk, "active_parts": parts,
                                   "durability": ch.W_DURABILITY})

    def _bulk_load_market(self, fmt: str, scratch: Path) -> LoadFigures:
        """M-W: day D's quotes and trades into a fresh database ``mw_<fmt>`` with the market
        schema, through the query store's path (``INSERT … SELECT FROM file()``, one part per
        table), each part fsynced before its INSERT returns. ``scratch`` is not used: a second
        chDB session path cannot be opened in this process."""
        db, files = f"mw_{fmt}", {t: self._market_day_files(t, fmt) for t in DAY_TABLES}
        self._sql(ch.DROP_DB, {"db": db})
        self._market_create(db)
        for table in MARKET_TABLES:
            self._sql(ch.SET_FSYNC, {"db": db, "table": table, "on": 1})
        nbytes = sum(self._market_insert(db, t, fmt, files[t]) for t in DAY_TABLES)
        self._market_merge_split_days(db)
        return self._market_figures(db, nbytes)

    def _baseline_load_market(self, fmt: str, scratch: Path) -> LoadFigures:
        """ClickHouse's own plain path: a MergeTree table of the schema it infers from the file,
        ``ORDER BY tuple()``, default settings, then ``INSERT … SELECT * FROM file()``."""
        db, files = f"mw_baseline_{fmt}", {t: self._market_day_files(t, fmt) for t in DAY_TABLES}
        self._sql(ch.DROP_DB, {"db": db})
        self._sql(ch.CREATE_DB, {"db": db})
        nbytes = 0
        for table in DAY_TABLES:
            path, kind = self._glob(files[table]), ch.FORMATS[fmt]
            args: dict[str, Any] = {"db": db, "table": table, "path": path, "fmt": kind}
            create = args
            if fmt == "csv" and not self.dataset.manifest.csv[table]["rows"]:
                # A header-only CSV gives ClickHouse no row to infer types from: the empty
                # Parquet file of the schema shapes the table instead.
                empty = self.dataset.input_files(table, [], self.workdir)
                create = {**args, "path": self._glob(empty), "fmt": ch.FORMATS["parquet"]}
            self._sql(ch.BASELINE_CREATE, create)
            self._sql(ch.SET_FSYNC, {"db": db, "table": table, "on": 1})
            self._sql(ch.INSERT, args)
            nbytes += sum(f.stat().st_size for f in files[table])
        return self._market_figures(db, nbytes)

    def _storage_bytes_market(self) -> dict[str, int]:
        """M-SE: bytes on disk of the active parts of the market tables (the 20 days' daily
        partitions of quotes and trades, and the instruments' one part), as the load left them."""
        disk, parts, _, index = self._scalars(MARKET_PARTS, {"db": ch.DB, "tables": list(MARKET_TABLES)})
        days, day_parts, _, _ = self._scalars(MARKET_PARTS, {"db": ch.DB, "tables": list(DAY_TABLES)})
        merging = self._scalars(ch.MERGES, {"db": ch.DB})[0]
        # MergeTree writes parts straight to disk: no write-ahead log to count.
        return storage_figures("parts_bytes_on_disk", disk - index, index, 0, quotes_trades_bytes_on_disk=days,
                               active_parts=parts, quotes_trades_active_parts=day_parts, merges_running=merging)

    # -- queries during ingest (Ingest) -----------------------------------------------------

    def _ingest_open_market(self, store: Path, setting: str) -> None:
        """Database ``tickbench_market_ingest`` in the process's session, beside the loaded
        ``tickbench`` (one chDB session path per process), made afresh with the market schema
        and the instruments; its parts live under the session path, ``store`` stays empty. It is
        written under the default setting alone (as the paper's store's ``default``)."""
        self.default_setting_only(setting)
        if self.market_ingest_conn is not None:
            raise RuntimeError("a market ingest store is already open")
        if self.session_conn is None:
            raise RuntimeError("chDB is not started")
        store.mkdir(parents=True, exist_ok=True)
        self._sql(ch.DROP_DB_SYNC, {"db": INGEST_DB})
        self._market_create(INGEST_DB)
        self._market_insert(INGEST_DB, "instruments", "parquet", [inside(self.dataset.root, INSTRUMENTS_PATH)])
        self.market_ingest_conn = self.session_conn

    def _market_ingest(self) -> str:
        if self.market_ingest_conn is None:
            raise RuntimeError("the market ingest store is not open")
        return self.market_ingest_conn

    def _ingest_stream_target_market(self) -> StreamTarget:
        return ArrowStreamTarget(self._market_ingest(), INGEST_INSERT, {t: MARKET_SCHEMAS[t] for t in DAY_TABLES})

    def _ingest_count_market(self, table: str, upto_ns: int | None = None) -> int:
        self._market_ingest()
        return self._scalars(INGEST_COUNT, {"db": INGEST_DB, "table": table, "upto": upto_all(upto_ns)})[0]

    def _ingest_reader_market(self) -> IngestReader:
        return _Reader(self.info, self._market_ingest())

    def _ingest_close_market(self) -> None:
        """Drop the store's database (the suite deletes the store after it; its parts live in
        the session, not in ``store``)."""
        if self.market_ingest_conn is not None:
            self.market_ingest_conn = None
            self._sql(ch.DROP_DB_SYNC, {"db": INGEST_DB})
