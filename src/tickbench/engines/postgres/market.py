"""The market suite (SPEC §2.3) on PostgreSQL: the market dataset's tables (``market_schema.sql``:
``instruments``, and ``quotes`` and ``trades`` partitioned by day), loaded by the adapter's binary
COPY from Arrow into each day's partition, then ``market_indexes.sql``; M-W into a fresh database
built the same way; M-SE from the partitions' sizes.

:class:`PostgresMarket` is a mixin of the PostgreSQL :class:`~tickbench.engines.postgres.adapter.Adapter`
(and so of TimescaleDB's, which sets the hooks below in its own ``market.py``); it uses the
adapter's connections and COPY (``_connect``, ``_copy_tables``, ``_psql``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import psycopg
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from psycopg import sql

from tickbench.data.dataset import Dataset
from tickbench.datasets.base import RunParams
from tickbench.datasets.market.params import MarketParams
from tickbench.datasets.market.schema import MARKET_SCHEMAS, MARKET_TABLES
from tickbench.engines.base import (
    Endpoint,
    LoadFigures,
    by_kind,
    storage_figures,
)
from tickbench.engines.postgres import pgcopy
from tickbench.engines.postgres.load import psql_quoted, wal_bytes

DB = "tickbench"  # the query store's database, the paper's tables' too (a run loads one dataset)
TABLES = ("instruments", *MARKET_TABLES)
# Every table a fresh market store must not have: its own, and the paper's (trades shares its name).
DROP = sql.SQL("DROP TABLE IF EXISTS instruments, quotes, trades, book CASCADE")
PARTITION = sql.SQL("CREATE TABLE {} PARTITION OF {} FOR VALUES FROM ({}) TO ({})")
COUNT = {t: sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(t)) for t in TABLES}
INSTRUMENT_COLUMNS = [f.name for f in MARKET_SCHEMAS["instruments"]]
COPY_INSTRUMENTS = sql.SQL("COPY instruments ({}) FROM STDIN").format(
    sql.SQL(", ").join(map(sql.Identifier, INSTRUMENT_COLUMNS)))
# Sizes of a list of relations: everything (heap, TOAST, maps, indexes), and the heap and TOAST.
SIZES = ("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0), coalesce(sum(pg_table_size(c.oid)), 0) "
         "FROM pg_class c WHERE c.oid = ANY(%s::regclass[])")
CHUNK_BYTES = 8 << 20


def day_partition(table: str, day: str) -> str:
    """The name of ``table``'s partition of the ISO ``day`` (checked as a date): ``quotes_20240116``."""
    return f"{table}_{dt.date.fromisoformat(day):%Y%m%d}"


def csv_chunks(path: Path) -> Callable[[], Iterator[bytes]]:
    """The file at ``path`` as COPY data, in chunks."""
    def chunks() -> Iterator[bytes]:
        with open(path, "rb") as f:
            while chunk := f.read(CHUNK_BYTES):
                yield chunk
    return chunks


class PostgresMarket:
    """The market capabilities of the PostgreSQL adapter and of the engines built on it."""

    #: The market tables (in the engine's folder, else PostgreSQL's) and their indexes, built
    #: after the load (``None``: none).
    market_schema_file: ClassVar[str] = "market_schema.sql"
    market_index_file: ClassVar[str | None] = "market_indexes.sql"
    #: Whether quotes and trades are partitioned by day (a partition per loaded day, each
    #: COPYed on its own); else each table is one COPY target (TimescaleDB's hypertables).
    market_partitioned: ClassVar[bool] = True
    #: Run by every market session of tickbench's (the query connections, the ingest store's
    #: readers) before its queries; ``None``: nothing.
    market_session_sql: ClassVar[str | None] = None

    if TYPE_CHECKING:  # the adapter's, which this mixin is part of
        dataset: Dataset
        extension: ClassVar[str | None]
        copy_freeze: ClassVar[bool]
        w_durability: ClassVar[str]
        params: RunParams

        endpoint: Endpoint | None
        conn: psycopg.Connection[Any] | None
        qconn: Any

        def engine_file(self, name: str) -> str: ...
        def _connect(self, dbname: str) -> psycopg.Connection[Any]: ...
        def _conn(self) -> psycopg.Connection[Any]: ...
        def _ensure_database(self, name: str) -> None: ...
        def _copy_tables(self, dbname: str, sources: dict[str, Callable[[], Iterator[bytes]]], fmt: str) -> None: ...
        def _psql(self, dbname: str, command: str) -> None: ...

    @property
    def market(self) -> MarketParams:
        params = self.params
        if not isinstance(params, MarketParams):
            raise TypeError("the market capabilities run on a market dataset's parameters")
        return params

    def connect(self) -> None:
        """The adapter's connections; on a market dataset, each runs :attr:`market_session_sql`
        first (not on an external endpoint, whose sessions are the user's server's)."""
        super().connect()  # type: ignore[misc]  # the server's (PostgresServer, later in the MRO)
        session_sql = by_kind(self.dataset, paper=None, market=self.market_session_sql)
        if session_sql is None or self.endpoint is not None:
            return
        self._conn().execute(session_sql)
        if self.qconn is not None:
            with self.qconn.cursor() as cur:
                cur.execute(session_sql)

    # -- the query store ------------------------------------------------------------------

    def _load_market(self) -> int:
        """Instruments, then every day of M into its own partition (binary COPY from the day's
        part files), indexes and ANALYZE; VACUUM (the insert counters reset: no autovacuum
        during the queries) and CHECKPOINT (nothing left for a timed checkpoint to write)."""
        days = self.market.load_days()
        rows = self._market_store(DB, days, self._parquet_sources(days), "FORMAT binary", instruments=True)
        c = self._conn()
        c.execute("VACUUM instruments, quotes, trades")
        c.execute("CHECKPOINT")
        return rows

    def _market_store(self, db: str, days: list[str], sources: dict[str, Callable[[], Iterator[bytes]]],
                      fmt: str, instruments: bool) -> int:
        """A fresh market schema for ``days`` in database ``db``, COPYed from ``sources`` (``fmt``),
        with the instruments table's rows if ``instruments``; indexed and analysed; the rows."""
        self._ensure_database(db)
        with self._connect(db) as c:
            self._market_schema(c, days)
            if instruments:
                with c.cursor() as cur, cur.copy(COPY_INSTRUMENTS) as copy:
                    for row in self.dataset.instruments().select(INSTRUMENT_COLUMNS).iter_rows():
                        copy.write_row(row)
            self._copy_tables(db, sources, fmt)
            self._market_finish(c)
            return sum(int(_scalar(c, COUNT[t])) for t in TABLES)

    def _market_schema(self, c: psycopg.Connection[Any], days: list[str]) -> None:
        """The market tables, empty, in ``c``'s database (any earlier ones, and the paper's, dropped),
        with a partition per day of ``days`` where the tables are partitioned."""
        c.execute(DROP)
        if self.extension:
            c.execute(sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(self.extension)))
        self._market_tables(c, days)

    def _market_tables(self, c: psycopg.Connection[Any], days: list[str]) -> None:
        """The market tables, empty, where ``c`` creates tables (the first schema of its
        ``search_path``), with a partition per day of ``days`` where the tables are partitioned."""
        c.execute(self.engine_file(self.market_schema_file))
        if self.market_partitioned:
            for t in MARKET_TABLES:
                for day in days:
                    start = dt.datetime.combine(dt.date.fromisoformat(day), dt.time(), dt.UTC)
                    c.execute(PARTITION.format(sql.Identifier(day_partition(t, day)), sql.Identifier(t),
                                               sql.Literal(start), sql.Literal(start + dt.timedelta(days=1))))

    def _market_targets(self, days: list[str]) -> dict[str, tuple[str, list[str]]]:
        """Where a load of ``days`` COPYs: each relation's (table, days), quotes first (the larger,
        so the COPYs end together): a day's partition, or the whole table."""
        if not self.market_partitioned:
            return {t: (t, days) for t in MARKET_TABLES}
        return {day_partition(t, d): (t, [d]) for t in MARKET_TABLES for d in days}

    def _parquet_sources(self, days: list[str]) -> dict[str, Callable[[], Iterator[bytes]]]:
        targets = self._market_targets(days).items()
        return {name: pgcopy.parquet_chunks(self.dataset.files(t, ds)) for name, (t, ds) in targets}

    def _market_finish(self, c: psycopg.Connection[Any]) -> None:
        """After the COPYs: the indexes, then the statistics."""
        if self.market_index_file:
            c.execute(self.engine_file(self.market_index_file))
        c.execute("ANALYZE instruments, quotes, trades")

    # -- M-W ------------------------------------------------------------------------------

    def _bulk_load_market(self, fmt: str, scratch: Path) -> LoadFigures:
        """Day D's quotes and trades into a fresh database ``mw_<fmt>`` built as the query store
        is: the CSV streamed as it is (``COPY … (FORMAT csv, HEADER MATCH)``: the header must name
        the table's columns in order), or the day's part files as binary COPY; both tables in
        parallel, then the indexes and ANALYZE; committed on return."""
        day = [self.market.D]
        db = f"mw_{fmt}"
        if fmt == "parquet":
            files = [f for t in MARKET_TABLES for f in self.dataset.files(t, day)]
            rows = self._market_store(db, day, self._parquet_sources(day), "FORMAT binary", instruments=False)
            return LoadFigures(rows=rows, input_bytes=sum(f.stat().st_size for f in files),
                               detail={"database": db, "copy": "binary", "durability": self.w_durability})
        if fmt != "csv":
            raise ValueError(f"unknown format {fmt!r}")
        paths = {t: self.dataset.csv_file(t) for t in MARKET_TABLES}
        # The CSV holds day D alone: a row of another day fails its partition's constraint.
        sources = {name: csv_chunks(paths[t]) for name, (t, _) in self._market_targets(day).items()}
        rows = self._market_store(db, day, sources, "FORMAT csv, HEADER MATCH", instruments=False)
        return LoadFigures(rows=rows, input_bytes=sum(p.stat().st_size for p in paths.values()),
                           detail={"database": db, "copy": "csv", "durability": self.w_durability})

    def _baseline_load_market(self, fmt: str, scratch: Path) -> LoadFigures:
        """PostgreSQL's own simplest path into a fresh database ``mw_baseline_<fmt>``: the same
        schema, then ``psql -c "\\copy table FROM 'file' (FORMAT csv, HEADER)"`` per table (the
        partitioned table routes each row to its day), then the same indexes and ANALYZE.
        PostgreSQL reads no Parquet: for ``parquet`` the day's files are first written as CSV
        with pyarrow into ``scratch``, and that counts."""
        day = [self.market.D]
        db = f"mw_baseline_{fmt}"
        if fmt == "csv":
            paths = {t: self.dataset.csv_file(t) for t in MARKET_TABLES}
            nbytes = sum(p.stat().st_size for p in paths.values())
        elif fmt == "parquet":
            scratch.mkdir(parents=True, exist_ok=True)
            paths, nbytes = {}, 0
            for t in MARKET_TABLES:
                files = self.dataset.input_files(t, day, scratch)
                nbytes += sum(f.stat().st_size for f in files)
                paths[t] = scratch / f"{t}.csv"
                pacsv.write_csv(pq.read_table(files, schema=MARKET_SCHEMAS[t]), paths[t])
        else:
            raise ValueError(f"unknown format {fmt!r}")
        self._ensure_database(db)
        with self._connect(db) as c:
            self._market_schema(c, day)
            for t, p in paths.items():
                self._psql(db, f"\\copy {t} FROM {psql_quoted(p)} WITH (FORMAT csv, HEADER)")
            self._market_finish(c)
            rows = sum(int(_scalar(c, COUNT[t])) for t in MARKET_TABLES)
        return LoadFigures(rows=rows, input_bytes=nbytes, detail={"database": db, "tool": "psql \\copy",
                                                                  "durability": self.w_durability})

    # -- M-SE -----------------------------------------------------------------------------

    def _storage_bytes_market(self) -> dict[str, int]:
        """M-SE: the 20 days' partitions of both tables in the store :meth:`_load_market` built
        (VACUUMed and CHECKPOINTed there; the queries since wrote nothing) — heap, TOAST, maps and
        indexes — and the instruments table; beside it, the heap and index split."""
        c = self._conn()
        days = self.market.load_days()
        out: dict[str, int] = {}
        heap = 0
        for t in TABLES:
            names = [day_partition(t, d) for d in days] if t in MARKET_TABLES else [t]
            total, table = c.execute(SIZES, [names]).fetchone() or (0, 0)
            out[f"{t}_total"], heap = int(total), heap + int(table)
        total = sum(out.values())
        return storage_figures("total_relation_size", heap, total - heap, wal_bytes(c), **out)


def _scalar(c: psycopg.Connection[Any], query: Any, params: list[Any] | None = None) -> Any:
    row = c.execute(query, params).fetchone()
    if row is None:
        raise RuntimeError("no row")
    return row[0]
