"""Checks of an engine's market ingest (:class:`~tickbench.engines.base.Ingest`):

* :func:`check_ingest_record`, for every market engine's suite test: a during-ingest record
  and its controls;
* :func:`check_market_ingest`, shared by the server engines' own tests: the first events of day
  D sent through the store's target (as a writer process would, the target pickled), counted to
  the nanosecond around a row's ts (also by the engine's counter for a watcher process, pickled,
  where it has one), read back by a user's reader with the engine's M-SNAP file
  and verified against the reference, and the store gone from the server once closed."""

from __future__ import annotations

import dataclasses
import pickle
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from tickbench.data.dataset import Dataset
from tickbench.datasets.market.params import MarketParams
from tickbench.datasets.market.reference import answer
from tickbench.engines.base import Engine, Ingest, capability
from tickbench.results import Record
from tickbench.suites.market.during_ingest import VISIBLE_ON_COMMIT, visible_text
from tickbench.suites.market.ingest_ops import (
    ALONE_MIN_QUERIES,
    TABLES,
    WATCHER_PROCESS,
    WATCHER_THREAD,
    MarketReplay,
    probes,
)
from tickbench.verify import compare, normalize

EVENTS = 4_000  # D's first events (quotes and trades in time order)
VISIBLE_S = 60.0


def check_market_ingest(engine: Engine, ds: Dataset, params: MarketParams, store: Path,
                        leftovers: Callable[[], set[str]]) -> None:
    """Open a store on ``engine`` (started), write, count, read and close it; ``leftovers()``
    names the store's objects the server has (tables, a database), which must exist while it is
    open and be gone after its close."""
    ingest = capability(engine, Ingest)
    replay = MarketReplay(ds, params, EVENTS)
    ingest.ingest_open(store)
    try:
        assert leftovers(), "the open store made nothing on the server"
        target = ingest.ingest_stream_target()
        if not target.in_process:  # plain data, as pickled into each writer process
            target = pickle.loads(pickle.dumps(target))
        sender = target.connect()
        try:  # each table in two payloads, in order (one writer's commits)
            for table in TABLES:
                rows = replay.tables[table]
                half = rows.num_rows // 2
                for part in (rows.slice(0, half), rows.slice(half)):
                    sender.send(target.encode(table, part))
        finally:
            sender.close()
        deadline = time.monotonic() + VISIBLE_S
        while any(ingest.ingest_count(t, 2**62) < replay.tables[t].num_rows for t in TABLES):
            assert time.monotonic() < deadline, f"the rows written were not visible within {VISIBLE_S:g} s"
            time.sleep(0.01)
        counter = ingest.ingest_counter()
        if counter is not None:  # plain data, as pickled into the watcher's process
            counter = pickle.loads(pickle.dumps(counter))
        try:
            for t in TABLES:
                ts = replay.ts[t]
                at = int(ts[len(ts) // 2])
                for upto in (at - 1, at, at + 1, replay.open_ns - 1):
                    assert ingest.ingest_count(t, upto) == replay.expected(t, upto), (t, upto)
                    if counter is not None:  # the watcher's counts over its own connection
                        assert counter.count(t, upto) == replay.expected(t, upto), (t, upto)
        finally:
            if counter is not None:
                counter.close()
        reader = ingest.ingest_reader()
        try:
            user = dataclasses.replace(params, T=probes(params, replay.open_ns, replay.end_ns))
            want = answer("M-SNAP", ds, user)
            got = pl.from_arrow(reader.run_query("M-SNAP", user))
            assert isinstance(got, pl.DataFrame)
            verdict = compare(normalize(got, want), want)
            assert verdict.ok, verdict.reason
            assert want["last_price"].null_count() < want.height  # the probes saw trades
        finally:
            reader.close()
    finally:
        ingest.ingest_close()
    assert not leftovers(), "the closed store is still on the server"


def check_ingest_record(rec: Record, cls: type[Engine], ds: Dataset, params: MarketParams, minutes: float,
                        users: int) -> None:
    """A during-ingest record of an engine with the capability ``cls``, at the tiniest scale:
    verified, the span of D it replayed the same as every engine's (``minutes`` of D from its
    open, as the reference replay cuts it), the ingest alone and the queries alone beside it with
    their during/alone ratios, "visible on commit" exactly when the engine declares it, and the
    writers' and watcher's process rule."""
    assert issubclass(cls, Ingest)
    assert rec.status == "ok" and rec.verified is True, f"{rec.status} {rec.reason}"
    f = rec.figures
    replay = MarketReplay(ds, params, span_ns=int(minutes * 60e9))
    assert f["span_minutes"] == minutes
    assert (f["replayed_events"], f["span_start_ns"], f["span_end_ns"]) == (len(replay), replay.open_ns,
                                                                            replay.end_ns)
    # the whole span sent, during the queries and alone, at the rate achieved
    assert f["written"] == f["planned"] == f["ingest_alone_written"] == sum(t.num_rows for t in replay.tables.values())
    assert f["throughput"] > 0 and f["ingest_alone_events_per_s"] > 0
    assert f["ingest_during_over_alone"] == pytest.approx(f["throughput"] / f["ingest_alone_events_per_s"])
    # queries alone: the same users, at least ALONE_MIN_QUERIES each, beside those during the ingest
    assert f["during"]["queries"] > 0 and f["alone"]["queries"] >= users * ALONE_MIN_QUERIES
    assert f["query_alone_p50_ms"] == f["alone"]["p50_ms"] > 0
    assert f["query_during_over_alone"] > 0
    assert f["query_during_over_alone"] == pytest.approx(f["during"]["p50_ms"] / f["query_alone_p50_ms"])
    assert "after" not in f and "during_over_after" not in f
    assert f["visible_on_commit"] is cls.ingest_visible_on_commit
    if cls.ingest_visible_on_commit:  # no poll latency: it would be the watcher's own
        assert f["visibility"] is None and visible_text(f) == VISIBLE_ON_COMMIT
    else:
        assert f["visibility"]["count"] > 0 and visible_text(f).endswith(" ms")
    # the watcher in a process of its own wherever the engine gives its counts as plain data
    own = cls.ingest_counter is not Ingest.ingest_counter and "thread" not in f["writers_mode"]
    assert f["watcher"] == (WATCHER_PROCESS if own else WATCHER_THREAD)
    if "thread" in f["writers_mode"]:  # an embedded store: the cell says why
        assert f["one_process"] == cls.ingest_one_process != "" and f["one_process"] in rec.notes
    else:
        assert "process" in f["writers_mode"] and not f["one_process"]
