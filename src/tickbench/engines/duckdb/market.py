"""DuckDB's market suite (SPEC §2.3): the market schema (``market.sql``), its load, M-W and M-SE.

The store is the query store's own database file: ``instruments``, ``quotes`` and ``trades``
as native tables, each day inserted in one ``INSERT … SELECT FROM read_parquet(…) ORDER BY``
(sym, ts, then the tie-breakers), so the row groups are day-major and sym-ordered within a day:
their zone maps let a scan read only the days and instruments a query asks for.
"""

from __future__ import annotations

from abc import abstractmethod
from pathlib import Path

import duckdb

from tickbench.data.dataset import Dataset
from tickbench.data.schema import MARKET_TABLES
from tickbench.engines.base import LoadFigures, Market, MarketBulkLoad, MarketStorage
from tickbench.market_params import MarketParams

MARKET_SCHEMA = (Path(__file__).parent / "market.sql").read_text()
# The order of each day's rows: the instrument, then time, then the ties' order (SPEC §2.3).
ORDER = {"quotes": "sym, ts, exchange, seq", "trades": "sym, ts, exchange, trade_id"}
# The Parquet files' ts is TIMESTAMPTZ_NS; its cast to the tables' naive TIMESTAMP_NS goes
# through the session's time zone, so every market connection reads and writes in UTC.
UTC = "SET TimeZone = 'UTC'"
DURABILITY = ("CHECKPOINT before the clock stops: the table data written into the database file "
              "and fsynced, the WAL emptied")


def _insert_day(con: duckdb.DuckDBPyConnection, table: str, files: list[Path]) -> None:
    con.execute(f"INSERT INTO {table} SELECT * FROM read_parquet($files) ORDER BY {ORDER[table]}",
                {"files": [str(f) for f in files]})


def _count(con: duckdb.DuckDBPyConnection, tables: tuple[str, ...]) -> int:
    return sum(int(con.sql(f"SELECT count(*) FROM {t}").fetchall()[0][0]) for t in tables)


class DuckDBMarket(Market, MarketBulkLoad, MarketStorage):
    """The market capabilities of the DuckDB adapter (mixed into ``Adapter``, which provides
    the connection, the dataset and the parameters)."""

    dataset: Dataset
    workdir: Path

    @abstractmethod
    def _conn(self) -> duckdb.DuckDBPyConnection:
        """The open query store (the Adapter's)."""

    @abstractmethod
    def _fresh(self, scratch: Path, name: str) -> duckdb.DuckDBPyConnection:
        """A new, empty database file ``name`` in ``scratch`` (the Adapter's)."""

    @property
    @abstractmethod
    def db_path(self) -> Path:
        """The query store's database file (the Adapter's)."""

    @property
    def _market(self) -> MarketParams:
        params = getattr(self, "params", None)
        if not isinstance(params, MarketParams):
            raise TypeError("the market capabilities run with the market dataset's parameters")
        return params

    def load_market(self) -> int:
        con = self._conn()
        con.execute(UTC)
        con.execute(MARKET_SCHEMA)
        con.execute("INSERT INTO instruments SELECT * FROM read_parquet($path) ORDER BY sym",
                    {"path": str(self.dataset.root / "instruments.parquet")})
        for day in self._market.load_days():  # one day's sort at a time, appended in day order
            for table in MARKET_TABLES:
                _insert_day(con, table, self.dataset.input_files(table, [day], self.workdir))
        con.execute("CHECKPOINT")
        return _count(con, MARKET_TABLES)

    def market_bulk_load(self, fmt: str, scratch: Path) -> LoadFigures:
        con = self._fresh(scratch, f"mw_{fmt}")
        try:
            con.execute(UTC)
            con.execute(MARKET_SCHEMA)
            nbytes = 0
            for table in MARKET_TABLES:
                if fmt == "csv":
                    path = self.dataset.csv_file(table)
                    nbytes += path.stat().st_size
                    # Read with the table's own column types (as COPY would), then sorted into
                    # the query store's layout.
                    con.execute(f"INSERT INTO {table} SELECT * FROM read_csv($path, header = true, "
                                f"columns = {_columns(con, table)}) ORDER BY {ORDER[table]}",
                                {"path": str(path)})
                else:
                    files = self.dataset.input_files(table, [self._market.D], scratch)
                    nbytes += sum(f.stat().st_size for f in files)
                    _insert_day(con, table, files)
            con.execute("CHECKPOINT")
            rows = _count(con, MARKET_TABLES)
        finally:
            con.close()
        return LoadFigures(rows=rows, input_bytes=nbytes,
                           detail={"durability": DURABILITY, "layout": "each day sorted by (sym, ts)"})

    def market_baseline_load(self, fmt: str, scratch: Path) -> LoadFigures:
        con = self._fresh(scratch, f"mw_baseline_{fmt}")
        try:
            nbytes = 0
            for table in MARKET_TABLES:
                if fmt == "csv":
                    path = self.dataset.csv_file(table)
                    nbytes += path.stat().st_size
                    con.execute(f"CREATE TABLE {table} AS FROM read_csv($path)", {"path": str(path)})
                else:
                    files = self.dataset.input_files(table, [self._market.D], scratch)
                    nbytes += sum(f.stat().st_size for f in files)
                    con.execute(f"CREATE TABLE {table} AS FROM read_parquet($files)",
                                {"files": [str(f) for f in files]})
            con.execute("CHECKPOINT")
            rows = _count(con, MARKET_TABLES)
        finally:
            con.close()
        return LoadFigures(rows=rows, input_bytes=nbytes, detail={"durability": DURABILITY})

    def market_storage_bytes(self) -> dict[str, int]:
        # The query store holds exactly the 20 days (and the instruments), checkpointed at load.
        self._conn().execute("CHECKPOINT")
        files = [p for p in (self.db_path, self.db_path.with_suffix(".duckdb.wal")) if p.is_file()]
        return {"database_file": sum(p.stat().st_size for p in files)}


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> str:
    """``table``'s columns as read_csv's ``columns`` struct literal ({'name': 'TYPE', …})."""
    rows = con.sql(f"SELECT column_name, column_type FROM (DESCRIBE {table})").fetchall()
    return "{" + ", ".join(f"'{name}': '{kind}'" for name, kind in rows) + "}"
