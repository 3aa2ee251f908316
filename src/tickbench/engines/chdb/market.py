"""The market suite on chDB (SPEC §2.3): the market tables (``market.sql``) in the query database
``tickbench``, loaded a day at a time through ClickHouse's own Parquet reader; M-W's stores in
databases of their own (``mw_csv``, ``mw_parquet``, ``mw_baseline_*``) in the same session, as
the paper suite's W stores are (one chDB session path per process)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from tickbench.data.dataset import INSTRUMENTS_PATH, inside
from tickbench.engines.base import LoadFigures, Market, MarketBulkLoad, MarketStorage

if TYPE_CHECKING:
    from tickbench.data.dataset import Dataset
    from tickbench.params import RunParams

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
def _chdb() -> ModuleType:
    """The adapter module, imported on use: it imports this module for the Adapter's class line."""
    from tickbench.engines.chdb import adapter

    return adapter


MARKET_PARTS = (
    "SELECT sum(bytes_on_disk), count(), sum(rows) FROM system.parts "
    "WHERE active AND database = {db:String} AND table IN {tables:Array(String)}"
)


class ChdbMarket(Market, MarketBulkLoad, MarketStorage):
    """The market capabilities for :class:`tickbench.engines.chdb.adapter.Adapter` (which
    inherits this), on its session's ``_sql``."""

    if TYPE_CHECKING:  # the Adapter's, which inherits this
        dataset: Dataset
        params: RunParams
        workdir: Path

        def _sql(self, sql: str, params: dict[str, Any] | None = None, fmt: str = "CSV") -> Any: ...

        def _scalars(self, sql: str, params: dict[str, Any] | None = None) -> list[int]: ...

        def _glob(self, files: list[Path]) -> str: ...

    def _market_create(self, db: str) -> None:
        """``db`` with the market tables, empty (the tables of an earlier load dropped)."""
        ch = _chdb()
        self._sql(ch.CREATE_DB, {"db": db})
        for table in MARKET_TABLES:
            self._sql(ch.DROP_TABLE, {"db": db, "table": table})
        self._sql(MARKET_SCHEMA, {"db": db})

    def _market_insert(self, db: str, table: str, fmt: str, files: list[Path]) -> int:
        """Insert ``files`` (one day's, or the instruments file) as one squashed block; their bytes."""
        ch = _chdb()
        self._sql(INSERT_MARKET, {"db": db, "table": table, "path": self._glob(files), "fmt": ch.FORMATS[fmt]})
        return sum(f.stat().st_size for f in files)

    def _market_merge_split_days(self, db: str) -> None:
        """Each daily partition left in several parts merged into one (none at SF 1)."""
        ch = _chdb()
        for table in DAY_TABLES:
            for row in self._sql(ch.SPLIT_DAYS, {"db": db, "table": table}, "ArrowTable").to_pylist():
                self._sql(ch.OPTIMIZE_DAY, {"db": db, "table": table, "partition": row["partition_id"]})

    def _market_rows(self, db: str, tables: tuple[str, ...]) -> int:
        ch = _chdb()
        return sum(self._scalars(ch.COUNT, {"db": db, "table": t})[0] for t in tables)

    def load_market(self) -> int:
        """The instruments, then each day of ``load_days()`` of quotes and trades, a day per
        INSERT (one part per daily partition); returns when the parts are active."""
        ch = _chdb()
        self._market_create(ch.DB)
        self._market_insert(ch.DB, "instruments", "parquet", [inside(self.dataset.root, INSTRUMENTS_PATH)])
        for table in DAY_TABLES:
            for day in self.params.load_days():
                if files := self.dataset.files(table, [day]):  # a day without data adds nothing
                    self._market_insert(ch.DB, table, "parquet", files)
        self._market_merge_split_days(ch.DB)
        return self._market_rows(ch.DB, MARKET_TABLES)

    def _market_day_files(self, table: str, fmt: str) -> list[Path]:
        ch = _chdb()
        if fmt not in ch.FORMATS:
            raise ValueError(f"unknown bulk-load format {fmt!r}")
        if fmt == "csv":
            return [self.dataset.csv_file(table)]
        return self.dataset.input_files(table, [self.dataset.bulk_day], self.workdir)

    def _market_figures(self, db: str, nbytes: int) -> LoadFigures:
        ch = _chdb()
        disk, parts = self._scalars(ch.DB_PARTS, {"db": db})
        return LoadFigures(rows=self._market_rows(db, DAY_TABLES), input_bytes=nbytes,
                           detail={"database": db, "bytes_on_disk": disk, "active_parts": parts,
                                   "durability": ch.W_DURABILITY})

    def market_bulk_load(self, fmt: str, scratch: Path) -> LoadFigures:
        """M-W: day D's quotes and trades into a fresh database ``mw_<fmt>`` with the market
        schema, through the query store's path (``INSERT … SELECT FROM file()``, one part per
        table), each part fsynced before its INSERT returns. ``scratch`` is not used: a second
        chDB session path cannot be opened in this process."""
        ch = _chdb()
        db, files = f"mw_{fmt}", {t: self._market_day_files(t, fmt) for t in DAY_TABLES}
        self._sql(ch.DROP_DB, {"db": db})
        self._market_create(db)
        for table in MARKET_TABLES:
            self._sql(ch.SET_FSYNC, {"db": db, "table": table, "on": 1})
        nbytes = sum(self._market_insert(db, t, fmt, files[t]) for t in DAY_TABLES)
        self._market_merge_split_days(db)
        return self._market_figures(db, nbytes)

    def market_baseline_load(self, fmt: str, scratch: Path) -> LoadFigures:
        """ClickHouse's own plain path: a MergeTree table of the schema it infers from the file,
        ``ORDER BY tuple()``, default settings, then ``INSERT … SELECT * FROM file()``."""
        ch = _chdb()
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

    def market_storage_bytes(self) -> dict[str, int]:
        """M-SE: bytes on disk of the active parts of the market tables (the 20 days' daily
        partitions of quotes and trades, and the instruments' one part), as the load left them."""
        ch = _chdb()
        disk, parts, _ = self._scalars(MARKET_PARTS, {"db": ch.DB, "tables": list(MARKET_TABLES)})
        days, day_parts, _ = self._scalars(MARKET_PARTS, {"db": ch.DB, "tables": list(DAY_TABLES)})
        merging = self._scalars(ch.MERGES, {"db": ch.DB})[0]
        return {"parts_bytes_on_disk": disk, "quotes_trades_bytes_on_disk": days, "active_parts": parts,
                "quotes_trades_active_parts": day_parts, "merges_running": merging}
