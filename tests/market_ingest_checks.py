"""A check of a server engine's market ingest store (:class:`~tickbench.engines.base.MarketIngest`),
shared by the engines' own tests: the first events of day D sent through the store's target (as
a writer process would, the target pickled), counted to the nanosecond around a row's ts, read
back by a user's reader with the engine's M-SNAP file and verified against the reference, and
the store gone from the server once closed."""

from __future__ import annotations

import dataclasses
import pickle
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl

from tickbench.data.dataset import Dataset
from tickbench.engines.base import Engine, MarketIngest, capability
from tickbench.market_params import MarketParams
from tickbench.market_reference import answer
from tickbench.suites.market.ingest_ops import TABLES, MarketReplay, probes
from tickbench.verify import compare, normalize

EVENTS = 4_000  # D's first events (quotes and trades in time order)
VISIBLE_S = 60.0


def check_market_ingest(engine: Engine, ds: Dataset, params: MarketParams, store: Path,
                        leftovers: Callable[[], set[str]]) -> None:
    """Open a store on ``engine`` (started), write, count, read and close it; ``leftovers()``
    names the store's objects the server has (tables, a database), which must exist while it is
    open and be gone after its close."""
    ingest = capability(engine, MarketIngest)
    replay = MarketReplay(ds, params, EVENTS)
    ingest.market_ingest_open(store)
    try:
        assert leftovers(), "the open store made nothing on the server"
        target = ingest.market_ingest_target()
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
        while any(ingest.market_ingest_count(t, 2**62) < replay.tables[t].num_rows for t in TABLES):
            assert time.monotonic() < deadline, f"the rows written were not visible within {VISIBLE_S:g} s"
            time.sleep(0.01)
        for t in TABLES:
            ts = replay.ts[t]
            at = int(ts[len(ts) // 2])
            for upto in (at - 1, at, at + 1, replay.open_ns - 1):
                assert ingest.market_ingest_count(t, upto) == replay.expected(t, upto), (t, upto)
        reader = ingest.market_ingest_reader()
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
        ingest.market_ingest_close()
    assert not leftovers(), "the closed store is still on the server"
