"""DuckDB's market suite (SPEC §2.3): the market schema (``market.sql``), its load, M-W, M-SE
and queries during ingest.

The store is the query store's own database file: ``instruments``, ``quotes`` and ``trades``
as native tables, each day inserted in one ``INSERT … SELECT FROM read_parquet(…) ORDER BY``
(sym, ts, then the tie-breakers), so the row groups are day-major and sym-ordered within a day:
their zone maps let a scan read only the days and instruments a query asks for. The market
ingest store is a database file of its own (``<store>/market-ingest.duckdb``) with the same
schema, written by the stream path's Arrow inserts (``ingest.py``) while each user queries it
on a cursor of its own.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from tickbench.data.dataset import Dataset
from tickbench.datasets.base import RunParams
from tickbench.datasets.market.params import MarketParams
from tickbench.datasets.market.schema import MARKET_SCHEMAS, MARKET_TABLES
from tickbench.engines.base import EngineInfo, IngestReader, LoadFigures, StreamTarget, storage_figures, upto_all
from tickbench.engines.duckdb.ingest import ArrowTarget

MARKET_SCHEMA = (Path(__file__).parent / "market.sql").read_text()
# The order of each day's rows: the instrument, then time, then the ties' order (SPEC §2.3).
ORDER = {"quotes": "sym, ts, exchange, seq", "trades": "sym, ts, exchange, trade_id"}
# The Parquet files' ts is TIMESTAMPTZ_NS; its cast to the tables' naive TIMESTAMP_NS goes
# through the session's time zone, so every market connection reads and writes in UTC.
UTC = "SET TimeZone = 'UTC'"
# W's durability, on either dataset (the paper's part in adapter.py records the same).
DURABILITY = ("CHECKPOINT before the clock stops: the table data written into the database file "
              "and fsynced, the WAL emptied")
# A query's named parameters ($b50_syms: digits allowed).
PARAM = re.compile(r"\$([a-z][a-z0-9_]*)")
INGEST_FILE = "market-ingest"
# The stream's batches cast to the tables' types before the clock: ts without its zone, so the
# insert stores the UTC wall time as it is (a zoned batch would go through the time zone).
INGEST_SCHEMAS = {t: pa.schema([pa.field("ts", pa.timestamp("ns")) if f.name == "ts" else f
                                for f in MARKET_SCHEMAS[t]]) for t in MARKET_TABLES}
COUNT_UPTO = {t: f"SELECT count(*) FROM {t} WHERE ts <= make_timestamp_ns($upto)" for t in MARKET_TABLES}


def duckdb_storage(files: list[Path]) -> dict[str, int]:
    """SE's split of a DuckDB store's ``files``: the database file is data (its one index, the
    instruments' primary key, lives inside it and is not told apart), a ``.wal`` file the log."""
    wal = sum(f.stat().st_size for f in files if f.suffix == ".wal")
    data = sum(f.stat().st_size for f in files) - wal
    return storage_figures("database_file", data, 0, wal)


def run_bound(con: duckdb.DuckDBPyConnection, sql: str, bindings: dict[str, Any]) -> pa.Table:
    """``sql`` on ``con`` with the named parameters it names, taken from ``bindings``."""
    used = {name: bindings[name] for name in PARAM.findall(sql)}
    return con.sql(sql, params=used).to_arrow_table()


def _insert_day(con: duckdb.DuckDBPyConnection, table: str, files: list[Path]) -> None:
    con.execute(f"INSERT INTO {table} SELECT * FROM read_parquet($files) ORDER BY {ORDER[table]}",
                {"files": [str(f) for f in files]})


def _count(con: duckdb.DuckDBPyConnection, tables: tuple[str, ...]) -> int:
    return sum(int(con.sql(f"SELECT count(*) FROM {t}").fetchall()[0][0]) for t in tables)


class _Reader(IngestReader):
    """One user's own cursor of the market ingest store: DuckDB runs the cursors' queries side
    by side, each over the rows committed when it began (MVCC), while the writers append."""

    def __init__(self, info: EngineInfo, cursor: duckdb.DuckDBPyConnection) -> None:
        self.info, self.cur = info, cursor
        self.cur.execute(UTC)

    def run_query(self, qid: str, params: RunParams) -> pa.Table:
        return run_bound(self.cur, self.info.query_text(qid), params.bindings())

    def close(self) -> None:
        self.cur.close()


class DuckDBMarket(ABC):
    """The DuckDB adapter's part for the market dataset (mixed into ``Adapter``, which provides
    the connection, the dataset and the parameters, and picks these methods for a market dataset
    with ``by_kind``)."""

    dataset: Dataset
    workdir: Path
    info: EngineInfo
    market_ingest_con: duckdb.DuckDBPyConnection | None = None

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

    def _market_schema(self, con: duckdb.DuckDBPyConnection) -> None:
        """The market tables in ``con``'s database, the instruments loaded, quotes and trades empty."""
        con.execute(UTC)
        con.execute(MARKET_SCHEMA)
        con.execute("INSERT INTO instruments SELECT * FROM read_parquet($path) ORDER BY sym",
                    {"path": str(self.dataset.root / "instruments.parquet")})

    def _load_market(self) -> int:
        con = self._conn()
        self._market_schema(con)
        for day in self._market.load_days():  # one day's sort at a time, appended in day order
            for table in MARKET_TABLES:
                _insert_day(con, table, self.dataset.input_files(table, [day], self.workdir))
        con.execute("CHECKPOINT")
        return _count(con, MARKET_TABLES)

    def _bulk_load_market(self, fmt: str, scratch: Path) -> LoadFigures:
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

    def _baseline_load_market(self, fmt: str, scratch: Path) -> LoadFigures:
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

    def _storage_bytes_market(self) -> dict[str, int]:
        # The query store holds exactly the 20 days (and the instruments), checkpointed at load.
        self._conn().execute("CHECKPOINT")
        return duckdb_storage([p for p in (self.db_path, self.db_path.with_suffix(".duckdb.wal")) if p.is_file()])

    # -- queries during ingest (Ingest) -----------------------------------------------------

    def _ingest_open_market(self, store: Path, setting: str) -> None:
        """A database file of its own in ``store`` (DuckDB opens one file per connection; the
        loaded query store stays open beside it), with the market schema: rows stream in arrival
        (time) order, so the zone maps prune by time, not by instrument as the load's sort does.
        ``setting`` is DuckDB's one, autocommit (as the paper's ingest store)."""
        if self.market_ingest_con is not None:
            raise RuntimeError("a market ingest store is already open")
        con = self._fresh(store, INGEST_FILE)
        try:
            self._market_schema(con)
        except BaseException:
            con.close()
            raise
        self.market_ingest_con = con

    def _market_ingest(self) -> duckdb.DuckDBPyConnection:
        if self.market_ingest_con is None:
            raise RuntimeError("the market ingest store is not open")
        return self.market_ingest_con

    def _ingest_stream_target_market(self) -> StreamTarget:
        return ArrowTarget(self._market_ingest(), INGEST_SCHEMAS)

    def _ingest_count_market(self, table: str, upto_ns: int | None = None) -> int:
        cur = self._market_ingest().cursor()
        try:
            row = cur.execute(COUNT_UPTO[table], {"upto": upto_all(upto_ns)}).fetchone()
        finally:
            cur.close()
        return int(row[0]) if row else 0

    def _ingest_reader_market(self) -> IngestReader:
        return _Reader(self.info, self._market_ingest().cursor())

    def _ingest_close_market(self) -> None:
        if self.market_ingest_con is not None:
            self.market_ingest_con.close()
            self.market_ingest_con = None


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> str:
    """``table``'s columns as read_csv's ``columns`` struct literal ({'name': 'TYPE', …})."""
    rows = con.sql(f"SELECT column_name, column_type FROM (DESCRIBE {table})").fetchall()
    return "{" + ", ".join(f"'{name}': '{kind}'" for name, kind in rows) + "}"
