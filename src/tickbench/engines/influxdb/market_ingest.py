"""InfluxDB's market ingest store (:class:`InfluxMarketIngest`: the market suite's M-SNAP while
day D streams in, SPEC §2.3's last paragraph): a database of its own on the running server,
``market_ingest_<hex>``, made as the market load makes its database (shards of one day, the
instruments written), into which the stream suite's writer processes post day D's quotes and
trades as line protocol while each user queries it over an HTTP connection of its own.

The payloads are the market load's line protocol (:func:`~.market.quote_lines`,
:func:`~.market.trade_lines`): the same measurements, tags and fields, so the market query files
run unchanged. Two of their values are a row's place in its day, not in its batch: ``tie`` (a
quote's or trade's number among those of its series at one ts, which keeps each a point of its
own) and a trade's ``ord`` (its place in its instrument-day's tape, which M-SNAP's last trade
is the greatest of). A feed handler numbers these as the day's rows arrive; here the writers are
processes that each send every other batch, so the numbering (:func:`day_tape`) is made from
the day once, before the clock, and each payload takes its rows' numbers from it: ties split
between two payloads, or two writers, keep the numbers the load gives them.

A point is in InfluxDB's cache, and visible to a new query, before its write is acknowledged
(after the WAL fsync), so :meth:`InfluxMarketIngest._ingest_count_market` is a plain count; the
during-ingest cell's watcher takes it in a process of its own (:class:`_Counter`, plain data:
the port, the store's database and the run's credentials, its connection opened there).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

from tickbench.data.dataset import Dataset
from tickbench.datasets.market.params import MarketParams
from tickbench.engines.base import EngineUnavailable, IngestCounter, IngestReader, StreamTarget, upto_all
from tickbench.engines.influxdb.ingest import WAL_FSYNC_DELAYS
from tickbench.engines.influxdb.market import LINES, batches, bound_value, instrument_lines, quote_ties, trade_tape
from tickbench.engines.influxdb.server import QUERY_IDLE_S, query_results
from tickbench.engines.influxdb.writer import LinePostTarget, Session
from tickbench.engines.server import ReaderPool

if TYPE_CHECKING:
    from collections.abc import Iterable

    from tickbench.datasets.base import RunParams
    from tickbench.engines.base import Endpoint

STORE_PREFIX = "market_ingest_"  # a store's database: market_ingest_<random hex>
# Each table's key: the columns naming one row of the day (SPEC §1.3).
KEYS = {"quotes": ["exchange", "sym", "seq"], "trades": ["exchange", "sym", "trade_id"]}
# The points each table holds: a count of a field every row has.
COUNT = {"quotes": "SELECT count(seq) FROM quotes WHERE time <= $upto",
         "trades": "SELECT count(trade_id) FROM trades WHERE time <= $upto"}


def day_tape(dataset: Dataset, day: str) -> dict[str, pl.DataFrame]:
    """Day ``day``'s numbering, by each table's :data:`KEYS`: every trade's ``ord`` and ``tie``
    (:func:`~.market.trade_tape`), and the ``tie`` of each quote that has one above 0 (a few in
    a thousand; every other quote's is 0)."""
    def read(table: str) -> pl.DataFrame:
        return pl.concat([pl.read_parquet(f) for f in dataset.files(table, [day])])

    quotes = quote_ties(read("quotes")).filter(pl.col("tie") > 0)
    return {"quotes": quotes.select(*KEYS["quotes"], "tie"),
            "trades": trade_tape(read("trades")).select(*KEYS["trades"], "ord", "tie")}


class MarketLineTarget(LinePostTarget):
    """The market ingest store's streaming path: the market load's line protocol formatted
    before the clock, each payload one POST to ``/write`` (acknowledged by HTTP 204 after the
    WAL fsync) over a kept-alive connection of the writer's own (:class:`~.writer.LineSender`).
    Plain data (the day's numbering, :func:`day_tape`, travels with it): writers are processes."""

    path = ("line protocol formatted before the clock (the market load's encoder, ties and tape order "
            "from the day's numbering), one POST /write per payload on kept-alive HTTP, writer processes")

    def __init__(self, port: int, db: str, tape: dict[str, pl.DataFrame], auth: dict[str, str] | None = None) -> None:
        super().__init__(port, db, auth)
        self.tape = tape

    def encode(self, table: str, batch: pa.Table) -> Any:
        frame = pl.from_arrow(batch)
        assert isinstance(frame, pl.DataFrame)
        numbered = frame.join(self.tape[table], on=KEYS[table], how="left")
        if table == "trades" and numbered["ord"].null_count():
            raise ValueError("trades outside the day the store was opened for")
        lines = LINES[table](numbered.with_columns(pl.col("tie").fill_null(0)))
        return lines.str.join("").item().encode()



class InfluxMarketIngest:
    """InfluxDB's part of :class:`~tickbench.engines.base.Ingest` for the market dataset
    (picked by ``by_kind``), on its running server."""

    if TYPE_CHECKING:  # the adapter's own, used here
        dataset: Dataset
        params: RunParams
        endpoint: Endpoint | None

        @property
        def http_port(self) -> int: ...
        @property
        def market(self) -> MarketParams: ...
        def query_text(self, qid: str) -> str: ...
        def http_auth(self) -> dict[str, str]: ...
        def _session(self) -> Session: ...
        def _create(self, db: str) -> None: ...
        def _databases(self) -> list[str]: ...
        def restart_with(self, **settings: Any) -> None: ...
        def _write_all(self, db: str, batches: Iterable[bytes]) -> None: ...
        def _query(self, q: str, db: str = ..., params: dict[str, Any] | None = None,
                   session: Session | None = None, packed: bool = False) -> list[dict[str, Any]]: ...
        def run_market_query(self, qid: str, text: str, session: Session | None, market: MarketParams | None = None,
                             db: str | None = None) -> pa.Table: ...

    #: The open store's database.
    mi_db: str | None = None
    #: Day D's numbering (:func:`day_tape`), for the open store's target.
    mi_tape: dict[str, pl.DataFrame] | None = None
    #: The visibility counts' connections (one per thread: the watcher's and the suite's own).
    mi_counts: ReaderPool[Session] | None = None

    def _ingest_open_market(self, store: Path, setting: str) -> None:
        """A fresh database ``market_ingest_<hex>`` (earlier stores' dropped) with shards of one
        day and the instruments written as the market load writes them; ``store`` holds nothing
        (the server keeps its databases in its own directories). The server runs under
        ``setting``'s wal-fsync-delay, as for the paper's store (restarted if it does not)."""
        if self.endpoint is not None:
            raise EngineUnavailable("the market ingest store is a database of tickbench's own InfluxDB server, "
                                    "not of an external endpoint")
        self._ingest_close_market()
        self.restart_with(wal_fsync_delay=WAL_FSYNC_DELAYS[setting])
        for old in self._databases():
            if old.startswith(STORE_PREFIX):
                self._query(f'DROP DATABASE "{old}"', db="")
        market = self.market
        db = STORE_PREFIX + secrets.token_hex(6)
        self._create(db)
        first = bound_value(dt.date.fromisoformat(min(market.load_days())))
        self._write_all(db, batches([instrument_lines(self.dataset.instruments(), first)]))
        self.mi_tape = day_tape(self.dataset, market.D)
        self.mi_db = db
        self.mi_counts = ReaderPool(self._session, QUERY_IDLE_S)

    def _store(self) -> str:
        if self.mi_db is None:
            raise RuntimeError("the market ingest store is not open")
        return self.mi_db

    def _ingest_stream_target_market(self) -> StreamTarget:
        db = self._store()
        assert self.mi_tape is not None
        return MarketLineTarget(self.http_port, db, self.mi_tape, self.http_auth())

    def _ingest_count_market(self, table: str, upto_ns: int | None = None) -> int:
        """Points of ``table`` at or before ``upto_ns``: every written row is a point of its own
        (ties have their own series), in the cache and visible before its write is acknowledged."""
        if table not in COUNT:
            raise ValueError(f"not a streamed market table: {table!r}")
        assert self.mi_counts is not None
        return _count(self.mi_counts.get(), self._store(), table, upto_all(upto_ns))

    def _ingest_counter_market(self) -> IngestCounter:
        """The counts over a connection of the watcher's own process, with the run's credentials."""
        return _Counter(self.http_port, self._store(), self.http_auth())

    def _ingest_reader_market(self) -> IngestReader:
        return _Reader(self, self._store())

    def _ingest_close_market(self) -> None:
        """Close the counts' connections and drop the store's database (never reopened)."""
        if self.mi_counts is not None:
            self.mi_counts.close()
            self.mi_counts = None
        db, self.mi_db = self.mi_db, None
        self.mi_tape = None
        if db is not None:
            # A server that has died cannot drop it; the next store's open drops it instead,
            # and the cell's own error is the one to report.
            with contextlib.suppress(RuntimeError, OSError):
                self._query(f'DROP DATABASE "{db}"', db="")


def _count(session: Session, db: str, table: str, upto_ns: int) -> int:
    """``table``'s points in ``db`` at or before ``upto_ns`` (a statement of :data:`COUNT`)."""
    if table not in COUNT:
        raise ValueError(f"not a streamed market table: {table!r}")
    results = query_results(session.request, COUNT[table], db, {"upto": int(upto_ns)})
    return sum(int(s["values"][0][1]) for s in results[0].get("series", []))


class _Counter(IngestCounter):
    """``_ingest_count_market`` from another process: a keep-alive connection of its own, opened
    at first use (a connection cannot be pickled), with the run's credentials."""

    def __init__(self, port: int, db: str, auth: dict[str, str]) -> None:
        self.port, self.db, self.auth = port, db, dict(auth)
        self.session: Session | None = None

    def count(self, table: str, upto_ns: int) -> int:
        if self.session is None:
            self.session = Session(self.port, self.auth)
        try:
            return _count(self.session, self.db, table, upto_ns)
        except BaseException:
            self.close()  # a failed request's connection is not reused
            raise

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "session": None}  # the connection stays in the process that opened it


class _Reader(IngestReader):
    """One user's reader: a kept-alive HTTP connection of its own; the market query files run
    as the adapter runs them, bound to the user's parameters, on the store's database."""

    def __init__(self, engine: InfluxMarketIngest, db: str) -> None:
        self.engine, self.db = engine, db
        self.pool: ReaderPool[Session] = ReaderPool(engine._session, QUERY_IDLE_S)

    def run_query(self, qid: str, params: RunParams) -> pa.Table:
        if not isinstance(params, MarketParams):
            raise TypeError("a market ingest reader runs market queries on a user's market parameters")
        try:
            return self.engine.run_market_query(qid, self.engine.query_text(qid), self.pool.get(), params, self.db)
        except BaseException:
            self.pool.discard()  # a failed request's connection is not reused
            raise

    def close(self) -> None:
        self.pool.close()

