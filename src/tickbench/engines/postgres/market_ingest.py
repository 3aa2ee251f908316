"""Queries while the market ingests (:class:`PostgresMarketIngest`, the market suite's
during-ingest cells) on PostgreSQL and the engines built on its server (TimescaleDB).

The store is schema ``market_ingest`` of the query store's database on the same server: the
engine's own market tables (``market_schema.sql``: PostgreSQL's partition of day D, TimescaleDB's
hypertables with their columnstore settings), made there by a session whose ``search_path``
names that schema first, with the instruments loaded and the btrees of PostgreSQL's
``market_indexes.sql`` built while the tables are empty. A schema rather than a database,
because readers and writers then pick the store by ``search_path`` alone: the engine's query
files run unchanged, the loaded tables beside it stay as they are, and the database already
has the extension. Day D's quotes and trades reach it through the stream suite's path
(:class:`~tickbench.engines.postgres.writer.CopyTarget`: one binary COPY per payload, from
writer processes, under the ``synchronous_commit`` of the store's durability setting, as the
paper's ingest store: by default ``on``); each reader is a connection of its own
(ADBC, as the query path's), and :meth:`_ingest_count_market` a ``count(*)`` on a connection
of the adapter's.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import adbc_driver_postgresql.dbapi as adbc
import psycopg
import pyarrow as pa
from psycopg import sql

from tickbench.data.dataset import Dataset
from tickbench.datasets.base import RunParams
from tickbench.datasets.market.params import MarketParams
from tickbench.datasets.market.schema import MARKET_SCHEMAS, MARKET_TABLES
from tickbench.engines.base import (
    Endpoint,
    EngineUnavailable,
    IngestCounter,
    IngestReader,
    StreamTarget,
    upto_all,
)
from tickbench.engines.postgres.ingest import SYNCHRONOUS_COMMIT
from tickbench.engines.postgres.market import COPY_INSTRUMENTS, DB, INSTRUMENT_COLUMNS
from tickbench.engines.postgres.writer import CopyTarget

SCHEMA = "market_ingest"
RECREATE = [sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA)),
            sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(SCHEMA))]
DROP = RECREATE[0]
COUNT_UPTO = {t: sql.SQL("SELECT count(*) FROM {} WHERE ts <= %s").format(sql.Identifier(t)) for t in MARKET_TABLES}
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class PostgresMarketReader(IngestReader):
    """One user's connection (ADBC, ``search_path`` on the ingest schema): a query runs as the
    query path runs it, its text with the parameters written in, made once per parameter set."""

    def __init__(self, engine: PostgresMarketIngest) -> None:
        self.engine = engine
        self.conn: Any = adbc.connect(engine.adbc_uri(DB, engine.market_ingest_path()), autocommit=True)
        if engine.market_session_sql:
            with self.conn.cursor() as cur:
                cur.execute(engine.market_session_sql)
        self.texts: dict[tuple[str, RunParams], str] = {}

    def run_query(self, qid: str, params: RunParams) -> pa.Table:
        text = self.texts.get((qid, params))
        if text is None:
            text = self.texts[(qid, params)] = self.engine.literal_text(qid, params)
        with self.conn.cursor() as cur:
            cur.execute(text)
            table: pa.Table = cur.fetch_arrow_table()
        return table

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class PostgresMarketIngest:
    """The PostgreSQL adapter's part of :class:`~tickbench.engines.base.Ingest` for the market
    dataset (and that of the engines built on it), picked by ``by_kind``."""

    #: The indexes of the ingest store's tables, built while they are empty (``None``: none).
    #: PostgreSQL's market btrees: the loaded store builds them after its COPY, and TimescaleDB's
    #: (which has none, its compressed chunks indexing their batches) needs them here, where the
    #: chunk being written stays in the rowstore.
    market_ingest_index_file: ClassVar[str | None] = "market_indexes.sql"

    market_counter: psycopg.Connection[Any] | None = None
    #: The open store's durability setting (a key of ``SYNCHRONOUS_COMMIT``), for its writers.
    market_setting: str | None = None
    market_readers: list[PostgresMarketReader]

    if TYPE_CHECKING:  # the adapter's, which this mixin is part of
        dataset: Dataset
        params: RunParams
        endpoint: Endpoint | None
        extension: ClassVar[str | None]
        market_session_sql: ClassVar[str | None]

        @property
        def market(self) -> MarketParams: ...
        def engine_file(self, name: str) -> str: ...
        def conninfo(self, dbname: str, search_path: str | None = None) -> dict[str, Any]: ...
        def adbc_uri(self, dbname: str, search_path: str | None = None) -> str: ...
        def literal_text(self, qid: str, params: RunParams) -> str: ...
        def _connect(self, dbname: str) -> psycopg.Connection[Any]: ...
        def _ensure_database(self, name: str) -> None: ...
        def _market_tables(self, c: psycopg.Connection[Any], days: list[str]) -> None: ...

    def market_ingest_path(self) -> str:
        """The ``search_path`` of the store's sessions: its schema, then ``public`` when the
        engine has an extension (whose functions, such as ``create_hypertable``, are there)."""
        return SCHEMA + (",public" if self.extension else "")

    def _ingest_connect(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(**self.conninfo(DB, self.market_ingest_path()), autocommit=True)
        if self.market_session_sql:
            conn.execute(self.market_session_sql)
        return conn

    def _ingest_open_market(self, store: Path, setting: str) -> None:
        """Schema ``market_ingest`` of the query store's database, made afresh (any earlier one
        dropped): the market tables, day D's partition where they are partitioned, the
        instruments, the indexes, ``ANALYZE instruments``. ``store`` (a directory) holds nothing:
        the data are the server's. The writers commit under ``setting``, as the paper's store's."""
        if self.endpoint is not None:
            raise EngineUnavailable("the market ingest store is not made on an external endpoint")
        self._ingest_close_market()
        store.mkdir(parents=True, exist_ok=True)
        self._ensure_database(DB)
        with self._connect(DB) as c:  # the default search_path: an extension goes into public
            if self.extension:
                c.execute(sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(self.extension)))
            for statement in RECREATE:
                c.execute(statement)
        with self._ingest_connect() as c, c.transaction():
            self._market_tables(c, [self.market.D])
            with c.cursor() as cur, cur.copy(COPY_INSTRUMENTS) as copy:
                for row in self.dataset.instruments().select(INSTRUMENT_COLUMNS).iter_rows():
                    copy.write_row(row)
            if self.market_ingest_index_file:
                c.execute(self.engine_file(self.market_ingest_index_file))
            c.execute("ANALYZE instruments")
        self.market_counter = self._ingest_connect()
        self.market_readers = []
        self.market_setting = setting

    def _ingest_stream_target_market(self) -> StreamTarget:
        if self.market_counter is None or self.market_setting is None:
            raise RuntimeError("the market ingest store is not open")
        return CopyTarget(self.conninfo(DB, self.market_ingest_path()), SYNCHRONOUS_COMMIT[self.market_setting],
                          {t: MARKET_SCHEMAS[t] for t in MARKET_TABLES})

    def _ingest_count_market(self, table: str, upto_ns: int | None = None) -> int:
        """``count(*)`` of the rows with ``ts`` at or before ``upto_ns``, as a new statement sees
        them (read committed): the rows of the COPYs committed before it began. ``ts`` is whole
        µs, so the bound is ``upto_ns`` rounded down to µs."""
        if self.market_counter is None:
            raise RuntimeError("the market ingest store is not open")
        upto = EPOCH + dt.timedelta(microseconds=upto_all(upto_ns) // 1_000)
        row = self.market_counter.execute(COUNT_UPTO[table], [upto]).fetchone()
        return int(row[0]) if row else 0

    def _ingest_counter_market(self) -> IngestCounter:
        """The counts over a connection of the watcher's own process (libpq's parameters)."""
        if self.market_counter is None:
            raise RuntimeError("the market ingest store is not open")
        return _Counter(self.conninfo(DB, self.market_ingest_path()), self.market_session_sql)

    def _ingest_reader_market(self) -> IngestReader:
        if self.market_counter is None:
            raise RuntimeError("the market ingest store is not open")
        reader = PostgresMarketReader(self)
        self.market_readers.append(reader)
        return reader

    def _ingest_close_market(self) -> None:
        """Close the readers and the counter, and drop the schema (every cell makes its own)."""
        if self.market_counter is None:
            return
        for reader in self.market_readers:
            reader.close()
        self.market_readers = []
        self.market_counter.close()
        self.market_counter = None
        self.market_setting = None
        with self._connect(DB) as c:
            c.execute(DROP)


class _Counter(IngestCounter):
    """``_ingest_count_market`` from another process: its own connection, opened at first use."""

    def __init__(self, conninfo: dict[str, Any], session_sql: str | None) -> None:
        self.conninfo, self.session_sql = conninfo, session_sql
        self.conn: psycopg.Connection[Any] | None = None

    def count(self, table: str, upto_ns: int) -> int:
        if self.conn is None:
            self.conn = psycopg.connect(**self.conninfo, autocommit=True)
            if self.session_sql:
                self.conn.execute(self.session_sql)
        upto = EPOCH + dt.timedelta(microseconds=upto_ns // 1_000)
        row = self.conn.execute(COUNT_UPTO[table], [upto]).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
