"""PostgreSQL 15 (Debian's ``postgresql-15``), one server per run on 127.0.0.1.

Where each part is:

* ``server.py`` — :class:`~tickbench.engines.postgres.server.PostgresServer`: install, initdb
  (a random superuser password), argv and settings, readiness, the connections, an external
  endpoint's schema, the tables both stores share, and the hooks an engine on this server sets;
* ``load.py`` — :class:`~tickbench.engines.postgres.load.PostgresLoad`: the query store's load
  (binary ``COPY FROM STDIN`` encoded from Arrow, :mod:`.pgcopy`), W and SE;
* ``ingest.py`` — :class:`~tickbench.engines.postgres.ingest.PostgresIngest`: the ingest store
  under each ``synchronous_commit`` setting, with the writers of ``writer.py``;
* ``market.py`` and ``market_ingest.py`` — the market suite: its query store, M-W and M-SE
  (:class:`~tickbench.engines.postgres.market.PostgresMarket`), and the store its queries run on
  while the market ingests (:class:`~tickbench.engines.postgres.market_ingest.PostgresMarketIngest`);
* this module — the query path. Queries are the ``queries/*.sql`` files with psycopg named
  parameters (``%(sym)s``); tables are heap tables partitioned by day, each day's partition with
  a covering btree and BRIN indexes (``schema.sql``, ``partitions.sql``, ``indexes.sql``).

Query results come back through ADBC's PostgreSQL driver, which runs each query as
``COPY (query) TO STDOUT (FORMAT binary)`` and decodes the rows straight into Arrow in C (no
Python object per value); its parameters are written into the text as SQL literals by psycopg
(COPY takes no bind parameters), once per query and parameter set, before the clock. The
server's own time of each query is read from ``pg_stat_statements`` after the clock stops
(:meth:`Adapter.query_server_ns`).

An engine built on PostgreSQL's server (TimescaleDB) subclasses :class:`Adapter` and sets its
hooks (:class:`~tickbench.engines.postgres.server.PostgresServer`): ``extra_settings``,
``extension``, the schema files, ``partition_file`` and ``copy_freeze``; its files are looked up
in its own folder first, then in this one.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, ClassVar

import psycopg
import pyarrow as pa

from tickbench.datasets.base import RunParams
from tickbench.engines.base import (
    EngineTime,
    IngestByKind,
    IngestCounter,
    StoreByKind,
    by_kind,
)
from tickbench.engines.postgres.ingest import PostgresIngest
from tickbench.engines.postgres.load import PostgresLoad
from tickbench.engines.postgres.market import PostgresMarket
from tickbench.engines.postgres.market_ingest import PostgresMarketIngest
from tickbench.engines.postgres.pgcopy import result_arrow

PARAM = re.compile(r"%\(([a-z0-9_]+)\)s")  # the names of bindings(), e.g. b50_syms
# The last statement of a backend, and the totals pg_stat_statements holds for it (in ms).
LAST_QUERY_ID = "SELECT query_id FROM pg_stat_activity WHERE pid = %s"
STATEMENT_TOTALS = ("SELECT coalesce(sum(calls), 0), coalesce(sum(total_exec_time), 0) FROM pg_stat_statements "
                    "WHERE queryid = %s AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())")


class Adapter(StoreByKind, IngestByKind, PostgresMarket, PostgresMarketIngest, PostgresLoad, PostgresIngest,
              EngineTime):
    """PostgreSQL: the query path, over its server, query store, ingest store and market ingest
    store; each capability serves both dataset kinds, its part for each picked by ``by_kind``."""

    # A COPY's rows are visible to every statement that begins after it commits (read committed).
    ingest_visible_on_commit: ClassVar[bool] = True

    def ingest_counter(self) -> IngestCounter | None:
        return by_kind(self.dataset, market=self._ingest_counter_market)()  # the market's during-ingest cell alone

    # -- queries --------------------------------------------------------------------------

    def literal_query(self, qid: str) -> str:
        """``qid``'s text with the run's parameters written in as SQL literals by psycopg
        (ADBC runs it as ``COPY (…) TO STDOUT``, which takes no bind parameters), without its
        final semicolon; made once per parameter set."""
        text = self.literal_queries.get(qid)
        if text is None:
            text = self.literal_text(qid, self.params)
            self.literal_queries[qid] = text
        return text

    def literal_text(self, qid: str, params: RunParams) -> str:
        """``qid``'s text with ``params`` written in as SQL literals by psycopg (on the adapter's
        connection, which it only reads the encoding from: no round trip), without its final
        semicolon."""
        raw = self.query_text(qid)
        with psycopg.ClientCursor(self._conn()) as cur:
            return cur.mogrify(raw, pg_bindings(params.bindings(), raw)).rstrip().rstrip(";") + "\n"

    def run_query(self, qid: str) -> pa.Table:
        if self.qconn is None:
            if self.endpoint is None:
                raise RuntimeError("PostgreSQL is not started")
            # An external endpoint: psycopg rows, bound parameters (ADBC is not set up there).
            raw = self.query_text(qid)
            with self._conn().cursor() as cur:
                cur.execute(raw, pg_bindings(self.params.bindings(), raw))
                return result_arrow(None, cur)
        text = self.literal_query(qid)
        with self.qconn.cursor() as cur:
            cur.execute(text)
            table: pa.Table = cur.fetch_arrow_table()
        return table

    def explain(self, qid: str) -> str:
        """``EXPLAIN (ANALYZE, BUFFERS)`` of the query as it runs (its literal form): the
        plan with each node's rows, time and pages (the partitions or TimescaleDB's chunks it
        kept). For a query that calls a lookup function of ``lookups.sql``, followed by the
        plans of the statements the function ran (the first three lookups'), which the outer
        plan shows only as a Function Scan: PostgreSQL's own ``auto_explain`` logs them and the
        log lines reach this session as notices. Only on a server tickbench runs (loading a
        module is for the server's superuser)."""
        with self._conn().cursor() as cur:
            cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + self.literal_query(qid))
            plan = "\n".join(str(r[0]) for r in cur.fetchall())
        if "pg_temp." not in self.query_text(qid) or self.endpoint is not None:
            return plan
        notices: list[str] = []
        conn = self._conn()

        def keep(diag: psycopg.errors.Diagnostic) -> None:
            if diag.message_primary and "plan:" in diag.message_primary:
                notices.append(diag.message_primary)

        conn.add_notice_handler(keep)
        try:
            conn.execute("LOAD 'auto_explain'")
            conn.execute("SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on; "
                          "SET auto_explain.log_nested_statements = on; SET client_min_messages = log")
            conn.execute(self.literal_query(qid)).fetchall()
        finally:
            conn.execute("RESET client_min_messages; SET auto_explain.log_min_duration = -1")
            conn.remove_notice_handler(keep)
        # The first lookups (the outer statement's own entry, which names the function, left out).
        nested = [n for n in notices if "pg_temp." not in n][:3]
        return plan + "".join(f"\n\n(a statement the lookup function ran)\n{n}" for n in nested)

    def set_params(self, params: RunParams) -> None:
        super().set_params(params)
        self.literal_queries = {}

    def query_server_ns(self) -> int | None:
        """The last query's time in the server, from ``pg_stat_statements``: the growth of
        its statement's total execution time (the ``COPY`` ADBC ran: planning, execution and
        sending the rows) since it was last read, when exactly one call of it ran in between
        (another client running the same statement makes it ``None``). Read after the
        clock stops, on the adapter's other connection."""
        if self.conn is None or self.qpid is None:
            return None
        row = self.conn.execute(LAST_QUERY_ID, [self.qpid]).fetchone()
        if row is None or row[0] is None:
            return None
        qid = int(row[0])
        totals = self.conn.execute(STATEMENT_TOTALS, [qid]).fetchone()
        if totals is None:
            return None
        calls, ms = int(totals[0]), float(totals[1])
        # Unread before: zero since connect() reset the statistics (an attached client did not).
        before = self.statement_totals.get(qid, None if self.attached else (0, 0.0))
        self.statement_totals[qid] = (calls, ms)
        if before is None or calls - before[0] != 1:
            return None
        return round((ms - before[1]) * 1e6)


def pg_bindings(binds: dict[str, Any], text: str) -> dict[str, Any]:
    """psycopg parameters for the ``%(name)s`` placeholders of ``text`` from
    ``QueryParams.bindings()``: naive UTC datetimes become aware ones, so psycopg sends them
    as ``timestamptz`` (lists as ``timestamptz[]``) and no session time zone is involved."""
    def utc(v: Any) -> Any:
        if isinstance(v, list):
            return [utc(x) for x in v]
        return v.replace(tzinfo=dt.UTC) if isinstance(v, dt.datetime) else v
    return {name: utc(binds[name]) for name in set(PARAM.findall(text))}
