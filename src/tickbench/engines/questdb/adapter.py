"""QuestDB, a server (JVM) on 127.0.0.1 with its own data directory in the run's working directory.

Where each part is:

* ``server.py`` — :class:`~tickbench.engines.questdb.server.QuestDBServer`: install, ``server.conf``
  and argv, readiness, the HTTP helpers and the kept-alive connections, an external endpoint's
  prefixed tables and marker table, the WAL apply (``pending_visibility``), ``settings()``;
* ``load.py`` — :class:`~tickbench.engines.questdb.load.QuestDBLoad`: the query store's tables and
  its load over ILP, W (``bulk_load``, ``baseline_load``) and SE (``storage_bytes``);
* ``ingest.py`` — :class:`~tickbench.engines.questdb.ingest.QuestDBIngest`: the ingest store under
  each commit mode, with the writers of ``writer.py``;
* ``market.py`` — :class:`~tickbench.engines.questdb.market.QuestDBMarket`: the market suite's
  tables (``market_schema.sql``), their load over ILP, M-W and M-SE, the market bindings;
* ``market_ingest.py`` — :class:`~tickbench.engines.questdb.market_ingest.QuestDBMarketIngest`:
  the market suite's queries during ingest (a store of ``mi_<tag>_*`` tables, its readers);
* ``schema.py`` — schema.sql's tables, /imp schemas, ILP row layout, query binding;
* this module — the query path: each query file's text as sent (tables prefixed on an external
  endpoint, parameters written in), the answer as JSON from ``/exec`` or Parquet from ``/exp``
  (:data:`~tickbench.engines.questdb.server.PARQUET_ANSWERS`), the plan, the server-side time.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from typing import Any, ClassVar

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from tickbench.engines.base import (
    EngineTime,
    IngestByKind,
    IngestCounter,
    StoreByKind,
    by_kind,
)
from tickbench.engines.questdb.ingest import QuestDBIngest
from tickbench.engines.questdb.load import QuestDBLoad
from tickbench.engines.questdb.market import QuestDBMarket
from tickbench.engines.questdb.market_ingest import QuestDBMarketIngest
from tickbench.engines.questdb.schema import bind_form
from tickbench.engines.questdb.server import PARQUET_ANSWERS, json_answer, json_table

# External endpoints: a table name the query files read (after FROM), to be prefixed.
FROM_TABLE = re.compile(r"\b(FROM\s+\(?\s*)(trades|book)\b")
# QuestDB 9.3 logs each /exp Parquet export in this table (phases with their µs timestamps),
# committed before the answer's last byte: the server-side time of a Parquet answer. {after}: the
# µs timestamp of the last row already read.
EXPORT_LOG = ('SELECT id, phase, status, cast(ts AS LONG) AS us FROM "sys.copy_export_log" '
              "WHERE ts > cast({after} AS TIMESTAMP)")
EXPORT_PHASES = [("stream_sending_data", "started"), ("stream_sending_data", "finished"), ("success", "finished")]


def _parquet_decoder(answer: pa.Table) -> Callable[[], object]:
    sink = pa.BufferOutputStream()
    pq.write_table(answer, sink, compression="none")
    data = sink.getvalue()
    return lambda: pq.read_table(pa.BufferReader(data))


class Adapter(StoreByKind, IngestByKind, QuestDBLoad, QuestDBIngest, EngineTime, QuestDBMarket, QuestDBMarketIngest):
    """QuestDB: the query path, over its server, query store, ingest store and market ingest
    store; each capability serves both dataset kinds, its part for each picked by ``by_kind``
    (W's preparation, the query mode after a load and the durability settings are one for both)."""

    # The users' queue is QuestDB's own: tickbench gives each user a process and a connection.
    users_limit: ClassVar[str] = (
        "HTTP requests, and the queries that do not run in parallel (an index scan), run on QuestDB's network "
        "pool, max(2, CPU count) threads by default (QuestDB's shared-workers docs): at most that many users' "
        "queries run at once, and the others wait in the order QuestDB's dispatcher takes them")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: QuestDB's own time of the last /exec query (timings.execute), in ns.
        self.last_server_ns: int | None = None
        #: Whether the last query's answer came from /exp Parquet (its time is in the export log).
        self.last_exported = False
        #: The µs timestamp of the last export log row :meth:`query_server_ns` read.
        self.export_log_mark = 0

    def ingest_counter(self) -> IngestCounter | None:
        return by_kind(self.dataset, market=self._ingest_counter_market)()  # the market's during-ingest cell alone

    def _query_sql(self, qid: str) -> str:
        """Query ``qid`` as sent: the file's text, tables prefixed on an endpoint, parameters written in."""
        return self._query_form(qid)[0]

    def _query_form(self, qid: str) -> tuple[str, str]:
        """:meth:`_query_sql`, and the same URL-encoded for ``/exec`` (:func:`bind_form`)."""
        text = self.query_text(qid)
        if self.endpoint is not None:  # tickbench's prefixed tables on the user's server
            text = FROM_TABLE.sub(lambda m: m.group(1) + self.table(m.group(2)), text)
        return bind_form(text, self.query_bindings())

    def run_query(self, qid: str) -> pa.Table:
        """The answer of ``qid`` on this thread's kept-alive connection: Parquet from ``/exp``
        for :data:`PARQUET_ANSWERS`, else JSON from ``/exec`` with ``timings=true`` (parsed by
        :meth:`~tickbench.engines.questdb.server.QuestDBServer._answer`)."""
        if self.query_conns is None:
            raise RuntimeError("QuestDB is not started")
        sql, form = self._query_form(qid)
        self.last_server_ns = None
        self.last_exported = qid in PARQUET_ANSWERS
        if self.last_exported:
            return self._export(sql, pool=self.query_conns)
        answer = self._answer(sql, self.query_conns, timings=True, form=form)
        timings = answer.get("timings") or {}
        if "execute" in timings:  # its clock starts before compilation: timings.compiler is inside it
            self.last_server_ns = int(timings["execute"])
        return json_table(answer)

    def client_decoder(self, qid: str, answer: pa.Table) -> Callable[[], object]:
        """The client's decoding of ``answer`` as :meth:`run_query` receives it: a Parquet
        export read for :data:`PARQUET_ANSWERS`, else ``/exec``'s JSON parsed into Arrow."""
        if qid in PARQUET_ANSWERS:
            return super().client_decoder(qid, answer) if answer.num_rows == 0 else _parquet_decoder(answer)
        body = json_answer(answer)
        return lambda: json_table(orjson.loads(body))

    def explain(self, qid: str) -> str:
        """``EXPLAIN``: QuestDB's plan (it has no ``EXPLAIN ANALYZE``), e.g. whether a
        lookup is a backward ``Interval`` scan of one partition or a full scan."""
        if self.query_conns is None:
            raise RuntimeError("QuestDB is not started")
        sql = self._query_sql(qid)
        status, body = self._get("/exec", {"query": "EXPLAIN " + sql}, pool=self.query_conns)
        answer: dict[str, Any] = json.loads(body)
        if status != 200 or "error" in answer:
            raise RuntimeError(f"QuestDB: {answer.get('error', body[:500])} in: EXPLAIN {sql[:200]}")
        # /exec escapes the plan's text as HTML (&nbsp; indents, &gt; in filters)
        return "\n".join(html.unescape(str(row[0])).replace("\xa0", " ") for row in answer["dataset"])

    def query_server_ns(self) -> int | None:
        """QuestDB's own time of the last query, in ns, read after the clock stops.

        * ``/exec`` (JSON): ``timings.execute`` of the answer: QuestDB's clock from the start of
          the request's processing (compilation, ``timings.compiler``, included) until the last
          row is written to the response: execution, JSON writing and sending all but the last
          chunk; not the request's arrival or the client's parsing.
        * ``/exp`` (Parquet): the export's span in QuestDB's export log ``sys.copy_export_log``,
          from its ``stream_sending_data``/``started`` row to its ``success`` row (µs): the
          cursor's execution, Parquet encoding and sending, and two of the log's own three
          commits; not compilation (a cached plan), the last log commit or the client's decoding.
          The log's rows since the last reading must be exactly one export's three phases (the
          runner's repetitions run one at a time); otherwise, e.g. another client's export in
          between, the first reading (earlier exports), or a server whose log table is named
          otherwise, ``None``.
        """
        if not self.last_exported:
            return self.last_server_ns
        self.last_exported = False
        try:
            rows = self._exec(EXPORT_LOG.format(after=self.export_log_mark), pool=self.query_conns)["dataset"]
        except RuntimeError:
            return None
        if rows:
            self.export_log_mark = max(int(r[3]) for r in rows)
        if len({r[0] for r in rows}) != 1 or [(r[1], r[2]) for r in rows] != EXPORT_PHASES:
            return None
        return (int(rows[2][3]) - int(rows[0][3])) * 1000
