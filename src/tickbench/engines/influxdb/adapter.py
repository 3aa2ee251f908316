"""InfluxDB 1.x (influxd built from its Go module), one server per run on 127.0.0.1.

Where each part is:

* ``server.py`` — :class:`~tickbench.engines.influxdb.server.InfluxDBServer`: install,
  ``influxd.toml`` and argv (``auth-enabled``, the admin with the run's random password made at
  start), readiness, the HTTP transport, an external endpoint's database, settings;
* ``load.py`` — :class:`~tickbench.engines.influxdb.load.InfluxDBLoad`: the query store's load
  over ``/write`` as line protocol built column-wise with Polars (:mod:`.lineprotocol`), its
  visibility and settling, W and SE;
* ``ingest.py`` — :class:`~tickbench.engines.influxdb.ingest.InfluxDBIngest`: the ingest store
  under each ``wal-fsync-delay``, with the writers of ``writer.py``;
* this module — the query path: InfluxQL files sent to ``/query`` with bound parameters, whose
  header comments say how InfluxDB's series become the SPEC's columns (:mod:`.results`); and
  Flux files (``queries/<ID>.flux``, for the market queries InfluxQL cannot express) sent to
  ``/api/v2/query`` with their values bound through the request's ``extern``.

Query answers come back as MessagePack (``Accept: application/x-msgpack``, decoded in C), or
for Flux as annotated CSV, over one kept-alive connection per client thread; the server's own
time of each query is the growth of its HTTP service's ``queryReqDurationNs`` counter (Flux:
``fluxQueryReqDurationNs``) in ``/debug/vars``, read after the clock.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import pyarrow as pa

from tickbench.datasets.paper.spec import BY_ID
from tickbench.engines.base import (
    EngineTime,
    IngestByKind,
    IngestCounter,
    StoreByKind,
    by_kind,
)
from tickbench.engines.influxdb.ingest import InfluxDBIngest
from tickbench.engines.influxdb.load import InfluxDBLoad
from tickbench.engines.influxdb.market import InfluxMarket, MarketHeader, shape
from tickbench.engines.influxdb.market_ingest import InfluxMarketIngest
from tickbench.engines.influxdb.results import (
    Header,
    flux_frame,
    flux_program,
    found,
    influx_bindings,
    parse_header,
    statements,
    to_table,
)
from tickbench.engines.influxdb.writer import Session

PARAM = re.compile(r"\$([a-z_0-9]+)")


class Adapter(StoreByKind, IngestByKind, InfluxMarket, InfluxMarketIngest, InfluxDBLoad, InfluxDBIngest, EngineTime):
    """InfluxDB: the query path, over its server, query store and ingest store; each capability
    serves both dataset kinds, its part for each picked by ``by_kind``."""

    # A point is in the cache, visible to a new query, before its write is acknowledged.
    ingest_visible_on_commit: ClassVar[bool] = True

    query_requests = 1  # the InfluxQL requests the last run_query sent (a lookback: one a round)
    flux_requests = 0  # the Flux requests it sent

    def ingest_counter(self) -> IngestCounter | None:
        return by_kind(self.dataset, market=self._ingest_counter_market)()  # the market's during-ingest cell alone

    # -- queries ------------------------------------------------------------------------

    def is_flux(self, qid: str) -> bool:
        """Whether ``qid``'s query file is Flux (``queries/<ID>.flux``) rather than InfluxQL."""
        return self.info.query_file(qid).suffix == ".flux"

    def run_query(self, qid: str) -> pa.Table:
        text = self.query_text(qid)
        if self.query_sessions is None:
            raise RuntimeError("InfluxDB is not started")
        # writer.Session reaches the loopback only: an external endpoint's queries go over a
        # connection each (with its host and authentication).
        session = self.query_sessions.get() if self.endpoint is None else None
        self.query_requests, self.flux_requests = 1, 0
        try:
            if self.is_flux(qid):
                return self._run_flux(qid, text, session)
            header = parse_header(text)
            if qid.startswith("M-"):  # the market suite's files (market.py)
                return self.run_market_query(qid, text, session)
            results = self._run_statements(text, header, session)
        except BaseException:
            self.query_sessions.discard()  # a failed request's connection is not reused
            raise
        probes = self.params.bindings()[header.probe[1]] if header.probe else None
        table = to_table(results, header.renames, BY_ID[qid].columns,
                         header.probe[0] if header.probe else None, probes)
        return table.sort_by([(c, "ascending") for c in header.sort]) if header.sort else table

    def _run_flux(self, qid: str, text: str, session: Session | None) -> pa.Table:
        """A Flux file, run as one script over the loaded database (``db``) with the market
        parameters bound (:func:`~tickbench.engines.influxdb.results.flux_program`); its answer
        has the SPEC's columns by name, which the adapter puts in the SPEC's order and types."""
        if not qid.startswith("M-"):
            raise ValueError(f"{qid}: Flux files answer market queries only")
        script, extern = flux_program(text, {"db": self.db, **self.market.bindings()})
        self.query_requests, self.flux_requests = 0, 1
        return shape(qid, flux_frame(self._flux(script, extern, session)), MarketHeader())

    def _run_statements(self, text: str, header: Header, session: Session | None) -> list[dict[str, Any]]:
        """The per-statement results of a query file: one request, or with a lookback header
        one request per round (see :mod:`.results`), the statements still without a row each
        round asked again over the next, longer window. Sets :attr:`query_requests`."""
        raw = self.params.bindings()
        binds = influx_bindings(raw)
        if header.lookback is None or header.probe is None:
            self.query_requests = 1
            used = {name: binds[name] for name in PARAM.findall(text)}
            return self._query(text, db=self.db, params=used, session=session, packed=True)
        lookback, times = header.lookback, header.probe[1]
        stmts = statements(text)
        if len(raw[times]) != len(stmts):
            raise ValueError(f"a lookback query needs one statement per element of {times}; "
                             f"it has {len(stmts)} statements")
        results: dict[int, dict[str, Any]] = {}
        pending = [(i, int(binds[f"{times}_{i}"])) for i in range(len(stmts))]
        self.query_requests = 0
        for window in (*lookback.windows_ns, None):
            round_binds = {**binds, **lookback.lows(binds, pending, window)}
            q = ";\n".join(stmts[i] for i, _ in pending)
            used = {name: round_binds[name] for name in PARAM.findall(q)}
            answers = self._query(q, db=self.db, params=used, session=session, packed=True)
            self.query_requests += 1
            for (i, _), answer in zip(pending, answers, strict=True):
                results[i] = answer
            pending = [(i, t) for i, t in pending if not found(results[i])]
            if not pending:
                break
        return [results[i] for i in range(len(stmts))]

    def explain(self, qid: str) -> str | None:
        """``EXPLAIN ANALYZE`` of the query's first statement (InfluxQL explains one SELECT at
        a time; a query of one statement per probe time repeats it with another time), with a
        lookback header as its first round binds it (the shortest window): the iterators, TSM
        blocks and points each read decoded. ``None`` for a Flux file: InfluxDB 1.x's
        ``/api/v2/query`` streams the query's own results only (the profiler's tables, which 2.x
        appends, are never read by its handler), so there is no plan to show."""
        if self.is_flux(qid):
            return None
        text = self.query_text(qid)
        if qid.startswith("M-"):
            return self.market_explain(qid, text)
        header = parse_header(text)
        stmts = statements(text)
        binds = influx_bindings(self.params.bindings())
        if header.lookback is not None and header.probe is not None:
            first = [(0, int(binds[f"{header.probe[1]}_0"]))]
            binds |= header.lookback.lows(binds, first, header.lookback.windows_ns[0])
        used = {name: binds[name] for name in PARAM.findall(stmts[0])}
        results = self._query("EXPLAIN ANALYZE " + stmts[0], db=self.db, params=used)
        lines = [str(v[0]) for r in results for s in r.get("series", []) for v in s["values"]]
        more = f"(the first of {len(stmts)} statements, which differ only in their bound values)\n"
        return (more if len(stmts) > 1 else "") + "\n".join(lines)

    def query_notes(self, qid: str) -> str:
        if self.is_flux(qid):
            return ("Flux over /api/v2/query (InfluxQL cannot express it); no plan: InfluxDB 1.x's "
                    "Flux endpoint returns neither the plan nor the profiler's tables")
        return ""

    def query_server_ns(self) -> int | None:
        """The server's own time of the last query: the growth of ``queryReqDurationNs`` and
        ``fluxQueryReqDurationNs`` (the HTTP handlers' time, from the request to the last byte
        of the answer) since the last reading, when exactly the query's own requests ran in
        between (one, or one per lookback round; else ``None``: another client's query, or one
        of the adapter's own). Read after the clock stops."""
        before, now = self.query_counters, self._query_counters()
        self.query_counters = now
        if before is None or now is None:
            return None
        if (now[0] - before[0], now[2] - before[2]) != (self.query_requests, self.flux_requests):
            return None
        return now[1] - before[1] + now[3] - before[3]
