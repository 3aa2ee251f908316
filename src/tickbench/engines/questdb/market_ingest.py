"""QuestDB's market ingest store (:class:`QuestDBMarketIngest`: the market suite's M-SNAP while
day D streams in, SPEC §2.3's last paragraph): ``market_schema.sql``'s three tables under names
of their own, ``mi_<tag>_instruments``, ``mi_<tag>_quotes`` and ``mi_<tag>_trades``, made on the
running server beside the loaded market tables for each store, the instruments loaded as
:meth:`~.market.QuestDBMarket._load_market` loads them, quotes and trades empty.

* Writers: the stream suite's writer processes, each with its own ILP/HTTP sender, through the
  ingest store's :class:`~.writer.IlpTarget` aimed at these tables (one payload, one WAL
  transaction); acknowledged under the ``cairo.commit.mode`` of the store's durability
  setting, as the paper's ingest store (the open restarts the server into it if M-W or an
  ingest suite left it otherwise): by default ``nosync``, the query cells'
  (:data:`~.server.QUERY_COMMIT_MODE`), so that the queries during and alone run as the market
  query cells do.
* Visibility: a WAL transaction is acknowledged once committed and visible once QuestDB's apply
  job has applied it; :meth:`QuestDBMarketIngest._ingest_count_market` counts what a new query
  sees now (an interval scan of the designated timestamp), which is the visibility the suite
  measures. The cell's watcher takes the same count in a process of its own
  (:meth:`QuestDBMarketIngest._ingest_counter_market`: its own HTTP connection, opened there with
  the run's credentials).
* Readers: each user its own kept-alive HTTP connection, the market query file sent to ``/exec``
  as the market users' queries are, its table names after ``FROM`` rewritten to the store's.
"""

from __future__ import annotations

import contextlib
import http.client
import re
import urllib.parse
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa

from tickbench.datasets.market.params import MarketParams, iso_ns
from tickbench.engines.base import EngineUnavailable, IngestCounter, IngestReader, StreamTarget, upto_all
from tickbench.engines.questdb.ingest import COMMIT_MODES, ILP_REQUEST_TIMEOUT_MS
from tickbench.engines.questdb.market import MARKET_SYMBOLS, MARKET_TABLES, market_bindings
from tickbench.engines.questdb.schema import bind
from tickbench.engines.questdb.server import LOOPBACK, READER_IDLE_S, json_table
from tickbench.engines.questdb.writer import IlpTarget
from tickbench.engines.server import ReaderPool

if TYPE_CHECKING:
    from tickbench.datasets.base import RunParams
    from tickbench.engines.base import Endpoint

STORE_TABLES = ("instruments", *MARKET_TABLES)
# QuestDB has one namespace (no databases or schemas), so the store's tables take a prefix; a
# new tag per store because QuestDB drops a WAL table asynchronously, and one created again at
# once under a dropped one's name failed now and then (as M-W's tables, market.py).
STORE_TABLE = re.compile(r"mi_[0-9a-f]{12}_(instruments|quotes|trades)")
# A market table named by a query file (every one follows FROM; JOIN for any later file).
TABLE_REF = re.compile(r"\b(FROM|JOIN)(\s+\(?\s*)(instruments|quotes|trades)\b")


def store_sql(text: str, names: dict[str, str]) -> str:
    """A market query file's text with its tables renamed to the store's ``names``."""
    return TABLE_REF.sub(lambda m: m.group(1) + m.group(2) + names[m.group(3)], text)


def count_sql(names: dict[str, str], table: str, upto_ns: int) -> str:
    """The visibility count of the store's ``table`` (one of ``names``): rows of the applied WAL
    transactions with ``ts <= upto_ns``, what a new query sees now."""
    if table not in MARKET_TABLES:
        raise ValueError(f"not a streamed market table: {table!r}")
    return f"SELECT count() FROM {names[table]} WHERE ts <= '{iso_ns(upto_ns)}'"


class QuestDBMarketIngest:
    """QuestDB's part of :class:`~tickbench.engines.base.Ingest` for the market dataset (picked
    by ``by_kind``), on its running server."""

    if TYPE_CHECKING:  # the adapter's own, used here
        endpoint: Endpoint | None
        ports: dict[str, int]

        def query_text(self, qid: str) -> str: ...
        def _conn(self) -> http.client.HTTPConnection: ...
        def _exec(self, sql: str, keep: bool = False, pool: Any = None) -> dict[str, Any]: ...
        def _rows(self, sql: str) -> list[dict[str, Any]]: ...
        def _answer(self, sql: str, pool: ReaderPool[http.client.HTTPConnection],
                    timings: bool = False, form: str | None = None) -> dict[str, Any]: ...
        def _market_create(self, table: str, name: str) -> None: ...
        def _load_instruments(self, name: str = "instruments") -> int: ...
        def ilp_auth(self) -> str: ...
        def http_auth(self) -> dict[str, str]: ...
        def restart_with(self, **settings: Any) -> None: ...

    #: The open store's tables: market table -> the server's name.
    mi_names: dict[str, str] | None = None
    #: The visibility counts' connections (one per thread: the watcher's and the suite's own).
    mi_counts: ReaderPool[http.client.HTTPConnection] | None = None

    def _ingest_open_market(self, store: Path, setting: str) -> None:
        """Fresh tables ``mi_<tag>_*`` from ``market_schema.sql`` (earlier stores' dropped), the
        instruments loaded; ``store`` holds nothing (the server keeps its tables in its root)."""
        if self.endpoint is not None:
            raise EngineUnavailable("the market suite runs on tickbench's own QuestDB server, not an external endpoint")
        self._ingest_close_market()
        self.restart_with(commit_mode=COMMIT_MODES[setting])  # as the paper's store, whichever cell ran before
        for row in self._rows("SELECT table_name FROM tables()"):
            if STORE_TABLE.fullmatch(str(row["table_name"])):
                self._exec(f"DROP TABLE IF EXISTS {row['table_name']}")
        tag = uuid.uuid4().hex[:12]
        names = {t: f"mi_{tag}_{t}" for t in STORE_TABLES}
        self._load_instruments(names["instruments"])
        for table in MARKET_TABLES:
            self._market_create(table, names[table])
        self.mi_names = names
        self.mi_counts = ReaderPool(self._conn, READER_IDLE_S)

    def _names(self) -> dict[str, str]:
        if self.mi_names is None:
            raise RuntimeError("the market ingest store is not open")
        return self.mi_names

    def _ingest_stream_target_market(self) -> StreamTarget:
        """The ingest store's ILP/HTTP target aimed at the store's quotes and trades."""
        names = self._names()
        return IlpTarget(LOOPBACK, self.ports["http"], ILP_REQUEST_TIMEOUT_MS, self.ilp_auth(),
                         names={t: names[t] for t in MARKET_TABLES}, symbols=MARKET_SYMBOLS)

    def _ingest_count_market(self, table: str, upto_ns: int | None = None) -> int:
        """Rows of the applied WAL transactions with ``ts <= upto_ns``: what a new query sees."""
        return int(self._exec(count_sql(self._names(), table, upto_all(upto_ns)), pool=self.mi_counts)["dataset"][0][0])

    def _ingest_counter_market(self) -> IngestCounter:
        """The same counts from the watcher's own process: the server's address, the run's
        HTTP credentials and the store's names, plain data."""
        return _Counter(LOOPBACK, self.ports["http"], self.http_auth(), self._names())

    def _ingest_reader_market(self) -> IngestReader:
        return _Reader(self, self._names())

    def _ingest_close_market(self) -> None:
        """Close the counts' connections and drop the store's tables (a store is never reopened)."""
        if self.mi_counts is not None:
            self.mi_counts.close()
            self.mi_counts = None
        names, self.mi_names = self.mi_names, None
        # A server that has died cannot drop them; the next store's open drops them instead, and
        # the cell's own error is the one to report.
        with contextlib.suppress(RuntimeError, OSError):
            for name in (names or {}).values():
                self._exec(f"DROP TABLE IF EXISTS {name}")


class _Counter(IngestCounter):
    """:meth:`QuestDBMarketIngest._ingest_count_market` from another process: one kept-alive HTTP
    connection of its own to ``/exec``, opened at first use."""

    def __init__(self, host: str, port: int, auth: dict[str, str], names: dict[str, str]) -> None:
        self.host, self.port, self.auth, self.names = host, port, auth, names
        self.conn: http.client.HTTPConnection | None = None

    def count(self, table: str, upto_ns: int) -> int:
        sql = count_sql(self.names, table, upto_ns)
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=3600)
        try:
            self.conn.request("GET", "/exec?" + urllib.parse.urlencode({"query": sql}), headers=self.auth)
            resp = self.conn.getresponse()
            body = resp.read()
        except (OSError, http.client.HTTPException):
            self.close()  # a connection the server closed: a new one at the next count
            raise
        if resp.will_close:
            self.close()
        answer = orjson.loads(body)
        if resp.status != 200 or "error" in answer:
            raise RuntimeError(f"QuestDB: {answer.get('error', body[:500])} in: {sql[:200]}")
        return int(answer["dataset"][0][0])

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class _Reader(IngestReader):
    """One user's reader: a kept-alive HTTP connection of its own, market files sent to
    ``/exec`` with the store's table names and the user's parameters written in."""

    def __init__(self, engine: QuestDBMarketIngest, names: dict[str, str]) -> None:
        self.engine, self.names = engine, names
        self.pool: ReaderPool[http.client.HTTPConnection] = ReaderPool(engine._conn, READER_IDLE_S)

    def run_query(self, qid: str, params: RunParams) -> pa.Table:
        if not isinstance(params, MarketParams):
            raise TypeError("a market ingest reader runs market queries on a user's market parameters")
        sql = bind(store_sql(self.engine.query_text(qid), self.names), market_bindings(params))
        return json_table(self.engine._answer(sql, self.pool))

    def close(self) -> None:
        self.pool.close()
