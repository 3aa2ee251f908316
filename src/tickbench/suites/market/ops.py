"""The market suite's operations in the engine process: the market dataset's load, M-W's bulk
loads and M-SE's storage measurement, each timed there, around the adapter's own calls (the
engine's market capabilities); and the users (:func:`users_op`), each a thread with its own
client, timing its own queries."""

from __future__ import annotations

import copy
import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from tickbench.engines.base import (
    Engine,
    Market,
    MarketBulkLoad,
    MarketStorage,
    SharedReaders,
    capability,
    open_shared,
)
from tickbench.params import params_from_dict
from tickbench.run.memory import tree_rss
from tickbench.run.visibility import wait_settled, wait_visible

perf = time.perf_counter_ns


def load_op(adapter: Engine, msg: dict[str, Any]) -> dict[str, Any]:
    """The market dataset into the engine; the load ends when its rows are queryable and the
    engine's own work on them (compaction) is done."""
    t0 = time.perf_counter_ns()
    rows = capability(adapter, Market).load_market()
    wait_visible(adapter)
    wait_settled(adapter)
    return {"ns": time.perf_counter_ns() - t0, "rows": rows}


def bulk_op(adapter: Engine, msg: dict[str, Any]) -> dict[str, Any]:
    """M-W: one bulk load of day D from ``fmt`` into a fresh store in ``scratch`` (tickbench's
    path, or the engine's own simplest with ``baseline``); the clock stops when it is queryable."""
    bulk = capability(adapter, MarketBulkLoad)
    load = bulk.market_baseline_load if msg.get("baseline") else bulk.market_bulk_load
    t0 = time.perf_counter_ns()
    figures = load(msg["fmt"], Path(msg["scratch"]))
    wait_visible(adapter)
    rows = figures.committed_rows()
    return {"ns": time.perf_counter_ns() - t0, "rows": rows, "input_bytes": figures.input_bytes,
            "detail": figures.detail}


def storage_op(adapter: Engine, msg: dict[str, Any]) -> dict[str, Any]:
    """M-SE: the bytes of the loaded market days, once the engine has settled."""
    wait_visible(adapter)
    wait_settled(adapter)
    return {"bytes": capability(adapter, MarketStorage).market_storage_bytes()}


# -- users (SPEC §2.3's last paragraph) --------------------------------------------------------

RSS_SAMPLE_S = 0.1  # how often the users' resident memory is sampled while they run
NOOP_ANSWER = pa.table({"x": pa.array([], pa.int64())})
NOOP_QUERIES = 1_000  # timed no-op queries per user at least: enough for a rate, not a start-up skew


def own_clients(engine: type[Engine]) -> bool:
    """Whether each user opens a client of its own: a connection to a server, or a read-only
    open of an embedded store that allows several (:class:`SharedReaders`). Otherwise (an
    in-memory engine, or an embedded store its engine opens once per process, e.g. LMDB under
    ArcticDB or chDB's session) the users are threads over the one open store."""
    return engine.persistent and issubclass(engine, SharedReaders)


def user_engines(adapter: Engine, params: list[dict[str, Any]]) -> list[Engine]:
    """One client per user, each bound to its own parameters (:func:`own_clients`): a new
    adapter instance that opens the loaded store beside the others (:func:`open_shared`), or a
    copy of the adapter that shares its open store and reads it from the user's thread. A user
    that cannot open its client ends them all, naming it."""
    out: list[Engine] = []
    own = own_clients(type(adapter))
    try:
        for i, raw in enumerate(params):
            p = params_from_dict(raw)
            if not own:
                inst = copy.copy(adapter)
                inst.set_params(p)
            else:
                inst = type(adapter)(adapter.info, adapter.workdir, adapter.dataset, p)
                try:
                    open_shared(inst)
                except Exception as exc:
                    raise RuntimeError(f"user {i} of {len(params)} could not open its own client: "
                                       f"{type(exc).__name__}: {exc}") from exc
            out.append(inst)
    except BaseException:
        close_users(adapter, out)
        raise
    return out


def close_users(adapter: Engine, instances: list[Engine]) -> None:
    """Close the users' own clients (a copy sharing the adapter's store closes nothing)."""
    if own_clients(type(adapter)):
        for inst in instances:
            inst.stop()


def _digest(table: pa.Table) -> str:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()


def users_op(adapter: Engine, msg: dict[str, Any]) -> dict[str, Any]:
    """The worker operation ``market_users``: ``len(msg["users"])`` users at once, each a thread
    with its own client (:func:`user_engines`) and parameters, each running query ``qid``
    ``warmup`` untimed then ``repetitions`` timed times (its next query once the last one's
    whole answer is in), all starting together once every client is open. Past ``budget_s`` a user
    starts no further query (it has run at least one timed). With ``noop`` the users call a
    query that does nothing, at least :data:`NOOP_QUERIES` times each, keeping no answer: the
    harness's own ceiling. Replies, per user, its timed latencies,
    the span of its timed queries and its distinct answers (every answer is kept until the
    users are done and checked by the runner), and the largest resident memory of this
    process and the engine's servers while they ran."""
    qid, noop = str(msg["qid"]), bool(msg.get("noop"))
    params: list[dict[str, Any]] = msg["users"]
    warmup, reps = int(msg["warmup"]), int(msg["repetitions"])
    if noop:
        reps = max(reps, NOOP_QUERIES)
    instances = [] if noop else user_engines(adapter, params)
    pids = sorted({os.getpid(), *(instances[0].memory_pids() if instances else [])})
    out: list[dict[str, Any]] = [{} for _ in params]
    done = threading.Event()
    together = threading.Barrier(len(params))
    peak = [tree_rss(pids)]

    def sample() -> None:
        while not done.wait(RSS_SAMPLE_S):
            peak[0] = max(peak[0], tree_rss(pids))

    def user(i: int) -> None:
        run = (lambda: NOOP_ANSWER) if noop else (lambda: instances[i].run_query(qid))
        answers: list[pa.Table] = []
        ns: list[int] = []
        first = last = 0
        stopped = False
        together.wait()
        deadline = perf() + int(float(msg["budget_s"]) * 1e9)
        try:
            for k in range(warmup + reps):
                if ns and perf() >= deadline:
                    stopped = True
                    break
                t0 = perf()
                table = run()
                t1 = perf()
                if not noop:
                    answers.append(table)
                if k >= warmup:
                    first = first or t0
                    last = t1
                    ns.append(t1 - t0)
        except Exception as exc:
            out[i] = {"error": f"user {i}: {type(exc).__name__}: {exc}"}
            return
        out[i] = {"ns": ns, "first_ns": first, "last_ns": last, "stopped": stopped, "answers": answers}

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    threads = [threading.Thread(target=user, args=(i,)) for i in range(len(params))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        peak[0] = max(peak[0], tree_rss(pids))
    finally:
        done.set()
        sampler.join()
        close_users(adapter, instances)
    for u in out:  # outside the clock: identical answers are sent, and checked, once
        if "answers" in u:
            distinct: dict[str, int] = {}
            kept: list[pa.Table] = []
            of: list[int] = []
            for table in u["answers"]:
                key = _digest(table)
                if key not in distinct:
                    distinct[key] = len(kept)
                    kept.append(table)
                of.append(distinct[key])
            u["answers"], u["answer_of"] = kept, of
    return {"users": out, "rss_peak_bytes": peak[0]}
