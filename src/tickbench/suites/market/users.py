"""The market suite's users (SPEC §2.3's last paragraph, STAC-M3's 1T … 100T): M-VWAB-12D with
u concurrent users, each its own client with its own disjoint block of instruments and 12-day
window, and M-SNAP and M-STATS-UI with 10 users, each with its own times and requests.

One cell per (query, user count), ``<qid>/users=<u>``. Each user is a client of its own
(:func:`model_of`): a process of its own with its own connection to a server or its own open of
an embedded store (:meth:`tickbench.run.cell.Worker.clients`); where the engine admits one open
of its store per process (:class:`~tickbench.engines.base.ProcessClients`, e.g. chDB), a thread
of the engine's process with a connection of its own; for an in-memory engine, a thread over
its frames. No lock of tickbench's stands between the users; the engine's own limit, where it
shapes this, is recorded with each cell (:attr:`~tickbench.engines.base.Engine.users_limit`).
All users start together, once every client is open (a barrier across the processes), each
runs ``warmup`` queries untimed, and once every user is warm (a gate across the processes,
:mod:`tickbench.run.gate`) all time at least :data:`MIN_REPETITIONS` queries each, back to back,
from one common start. Every answer of every user is checked against the reference over that user's parameters
(a wrong one makes the cell wrong, naming the user). Each user's query is also timed alone, in
the engine's process with no other user running (:meth:`Users.alone`): users' baskets and windows
differ in size, and on an engine whose work follows them (an index scan) so do their medians;
the cell records the spread of the medians alone beside theirs (the users' own work), and each
user's slowdown (its median among the users over its median alone). How the slowdowns spread
follows the engine's scheduling: near 1 where each query waits its turn and then runs at its
own speed (a short query waits as long as a long one), large where the engine shares its time
among the running queries (each user is slowed about as much as its query is short). Beside
each cell, the harness's own
ceiling: the same users, in the same processes, decoding a real answer of theirs as their client
does, with no engine behind it (:meth:`~tickbench.engines.base.Engine.client_decoder`); a figure
within :data:`~tickbench.suites.harness.CLIENT_BOUND_FACTOR` of it is marked client-bound.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from tickbench import verify
from tickbench.datasets.market.params import MarketParams, user_params, write_params_json
from tickbench.datasets.market.reference import answer
from tickbench.engines.base import ProcessClients, Server, SharedReaders
from tickbench.results import Stats
from tickbench.run.cell import CellContext, MemoryBudgetExceeded, Worker, stopping
from tickbench.suites.harness import bound

if TYPE_CHECKING:
    from tickbench.engines.base import Engine
    from tickbench.results import Record

VWAB_USERS: tuple[int, ...] = (1, 10, 50, 100)  # STAC-M3's 1T, 10T, 50T, 100T
UI_USERS = 10  # M-SNAP's and M-STATS-UI's users
USERS_QUERIES = ("M-VWAB-12D", "M-SNAP", "M-STATS-UI")
CATEGORY = "users"
SHARED_KEY = "market-users"  # ctx.shared: the users' parameters and reference answers, shared by the engines
MIN_REPETITIONS = 20  # timed queries per user at least (a per-user p10 … p90 needs them)
# Every user runs its query until this long after the users' common start (--users-seconds): with
# 20 queries alone, a fast engine's users (QuestDB's M-STATS-UI: 1.5 ms alone) timed 0.5 s each,
# the first done left the rest to a lighter load, and a median of 20 fell on either side of a
# queue's stalls (10-user spreads of 1.6 and 4.8 in two runs).
USERS_SECONDS = 5.0
CEILING_BUDGET_S = 5.0  # the harness's ceiling runs this long at most (it needs a rate, not a full cell)
#: Each user's untimed queries before the gate: its own client's first query (connection,
#: prepared plan). The engine itself is warmed by its query cells, which a run takes before its
#: users cells (a --resume that starts at the users cells has not run them in this process).
USER_WARMUP = 1
ALONE_REPETITIONS = 3  # each user's query alone: timed this many times after one untimed, the median kept


class UsersFigures(BaseModel):
    """A users cell's figures: how the users ran, each user's latencies, all users' queries/s,
    the harness's ceiling beside them and the peak memory."""

    model_config = ConfigDict(extra="forbid")
    query: str | None = None
    users: int | None = None
    model: str | None = None
    #: The engine's own limit on concurrent clients that shaped the model (its documentation's words).
    limit: str | None = None
    #: How many processes the users ran in.
    processes: int | None = None
    #: Why and how several users shared a process (a process per user outgrew the memory budget).
    packed: str | None = None
    #: Timed queries per user at least.
    repetitions: int | None = None
    #: Each user ran its query until this many seconds after the users' common start (at least
    #: :attr:`repetitions` times).
    window_s: float | None = None
    queries: int | None = None
    seconds: float | None = None
    qps: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None
    p10_ms: float | None = None
    p90_ms: float | None = None
    #: The slowest user's median latency over the fastest's.
    spread: float | None = None
    #: The same over each user's query alone (its median with no other user running): how much
    #: of :attr:`spread` is the users' own work (their baskets and windows differ in size).
    alone_spread: float | None = None
    #: The largest slowdown of a user (its median among the users over its median alone) over
    #: the smallest: near 1 where each query waits its turn and then runs at its own speed,
    #: large where the engine shares its time among the running queries.
    slowdown_spread: float | None = None
    per_user: list[dict[str, Any]] | None = None
    ceiling_qps: float | None = None
    ceiling_p50_ms: float | None = None
    client_bound: bool | None = None
    #: The largest resident memory of the users' process and the engine's servers while they ran.
    rss_peak_bytes: int | None = None


def users_id(qid: str, users: int) -> str:
    return f"{qid}/users={users}"


def parse_id(bench: str) -> tuple[str, int] | None:
    """``(qid, users)`` of a users cell's id, or ``None`` for any other cell."""
    qid, sep, rest = bench.partition("/users=")
    return (qid, int(rest)) if sep and rest.isdigit() else None


def cell_ids(vwab_users: tuple[int, ...], ui_users: int) -> list[str]:
    return [*(users_id("M-VWAB-12D", u) for u in vwab_users),
            *(users_id(q, ui_users) for q in ("M-SNAP", "M-STATS-UI") if ui_users > 0)]


def own_processes(engine: type[Engine]) -> bool:
    """Whether each user is a client process of its own (:class:`SharedReaders`: a connection to a
    server, or an open of an embedded store that admits several processes); otherwise the users
    are threads of the engine's process (one open per process, or an in-memory engine)."""
    return engine.persistent and issubclass(engine, SharedReaders)


def model_of(engine: type[Engine]) -> str:
    """How an engine's users are made (recorded with each cell)."""
    if not engine.persistent:
        return "threads of the engine's process over its in-memory frames, each with its own parameters"
    if issubclass(engine, Server):
        return "a process per user, each with its own connection to the server"
    if issubclass(engine, SharedReaders):
        return "a process per user, each with its own open of the store (read-only where the engine has one)"
    if issubclass(engine, ProcessClients):
        return "threads of the engine's process (one open of the store per process), each with its own connection"
    return "threads of the engine's process over its one open of the store, each with its own parameters"


def percentile(sorted_ms: list[float], pct: float) -> float:
    """The nearest-rank percentile of ascending ``sorted_ms``."""
    return sorted_ms[max(0, math.ceil(pct / 100 * len(sorted_ms)) - 1)]


class Users:
    """The users cells of one engine, on its started, loaded worker."""

    def __init__(self, ctx: CellContext, worker: Worker) -> None:
        self.ctx = ctx
        self.worker = worker
        params = ctx.params
        if not isinstance(params, MarketParams):
            raise TypeError("the market suite runs with the market dataset's parameters")
        self.base = params

    def params(self, users: int) -> list[MarketParams]:
        """Users 0 … users-1's parameters (user 0's are the run's), drawn once per run."""
        cache: dict[int, MarketParams] = self.ctx.shared.setdefault(SHARED_KEY, {}).setdefault("params", {})
        for i in range(users):
            if i not in cache:
                cache[i] = self.base if i == 0 else user_params(self.ctx.ds, self.base, self.ctx.seed, i)
        return [cache[i] for i in range(users)]

    def expected(self, qid: str, user: int, p: MarketParams) -> pl.DataFrame:
        """The reference answer of ``qid`` over user ``user``'s parameters, once per run."""
        if user == 0:
            return self.ctx.refs[qid]
        refs: dict[tuple[str, int], pl.DataFrame] = self.ctx.shared.setdefault(SHARED_KEY, {}).setdefault("refs", {})
        if (qid, user) not in refs:
            refs[(qid, user)] = answer(qid, self.ctx.ds, p)
        return refs[(qid, user)]

    def cell(self, bench: str) -> Record:
        parsed = parse_id(bench)
        if parsed is None:
            raise ValueError(f"not a users cell: {bench}")
        qid, users = parsed
        ctx, info = self.ctx, self.ctx.info
        base: dict[str, Any] = {"query": qid, "users": users, "model": model_of(ctx.engine),
                                "repetitions": repetitions(ctx.protocol.repetitions),
                                "window_s": ctx.opts["users_seconds"]}
        if ctx.engine.users_limit:
            base["limit"] = ctx.engine.users_limit
        for key in (qid, bench):  # the query itself, or this many users, declared beyond the engine
            if key in info.unsupported:
                return ctx.make(bench, "unsupported", info.unsupported[key], figures=base)
        return self.worker.attempt(bench, lambda: self._cell(bench, qid, users, base), figures=base)

    def _cell(self, bench: str, qid: str, users: int, base: dict[str, Any]) -> Record:
        ctx, proto = self.ctx, self.ctx.protocol
        params = self.params(users)
        expected = [self.expected(qid, i, p) for i, p in enumerate(params)]
        budget = proto.cell_budget_s
        timeout = budget + (USER_WARMUP + 2) * proto.timeout_s + 120
        msg = {"op": "market_users", "qid": qid, "warmup": USER_WARMUP,
               "repetitions": base["repetitions"], "budget_s": budget, "window_s": ctx.opts["users_seconds"]}
        each = [{"user": i, "params": p.as_dict()} for i, p in enumerate(params)]
        # a real answer of each user's query (the reference's rows), for the harness's ceiling
        answers = [_ipc(want.to_arrow()) for want in expected]
        if own_processes(ctx.engine):
            reply, ceiling = self._processes(msg, each, answers, timeout)
        else:  # threads of the engine's process
            go = {**msg, "users": each}
            reply = self.worker.call(timeout, **go, start_ns=time.perf_counter_ns())
            ceiling = self.worker.call(timeout, **{**go, "budget_s": CEILING_BUDGET_S, "window_s": 0}, ceiling=answers,
                                       start_ns=time.perf_counter_ns())
            reply["processes"] = 1
        errors = [u["error"] for u in reply["users"] if "error" in u]
        errors += [f"the harness's ceiling: {u['error']}" for u in ceiling["users"] if "error" in u]
        if errors:
            return ctx.make(bench, "error", "; ".join(errors)[:2000], figures=base)
        alone = self.alone(qid, each, timeout)
        if isinstance(alone, str):
            return ctx.make(bench, "error", alone[:2000], figures=base)
        figures = {**base, **with_alone(summarise(reply["users"]), [a for a, _ in alone]),
                   "rss_peak_bytes": reply["rss_peak_bytes"], "processes": reply["processes"]}
        if "packed" in reply:
            figures["packed"] = reply["packed"]
        noop = summarise(ceiling["users"])
        figures["ceiling_qps"], figures["ceiling_p50_ms"] = noop["qps"], noop["p50_ms"]
        figures["client_bound"] = client_bound(figures, noop)
        samples = sorted(n for u in reply["users"] for n in u["ns"])
        stopped = sum(1 for u in reply["users"] if u["stopped"])
        notes = (f"{stopped} of {users} users stopped at the cell budget of {budget:g} s before their "
                 f"{base['repetitions']} timed queries (raise it with --cell-budget)") if stopped else ""
        for i, (u, p, want, (_, by_itself)) in enumerate(zip(reply["users"], params, expected, alone, strict=True)):
            got = [verify.normalize(pl.from_arrow(pa.ipc.open_stream(b).read_all()), want)  # type: ignore[arg-type]
                   for b in u["answers"]]
            if proto.save_answers is not None and i > 0:
                where = proto.save_answers / ctx.info.name / "users" / str(i)
                write_params_json(where / "params.json", p)
                got[0].write_parquet(where / f"{qid}.parquet")
            for j, g in enumerate(got):
                verdict = verify.compare(g, want)
                if not verdict.ok:
                    n = u["answer_of"].count(j)
                    return ctx.make(bench, "wrong", f"user {i} ({n} of its answers): {verdict.reason}", verified=False,
                                    figures=figures, rows=g.height)
            for b in by_itself:  # its query's answers alone, checked as well: no unchecked time
                g = verify.normalize(pl.from_arrow(pa.ipc.open_stream(b).read_all()), want)  # type: ignore[arg-type]
                if not (verdict := verify.compare(g, want)).ok:
                    return ctx.make(bench, "wrong", f"user {i}, alone: {verdict.reason}", verified=False,
                                    figures=figures, rows=g.height)
        return ctx.make(bench, "ok", verified=True, samples_ns=samples, stats=Stats.of(samples),
                        rows=sum(w.height for w in expected), figures=figures, notes=notes)


    def alone(self, qid: str, each: list[dict[str, Any]], timeout: float) -> list[tuple[float, list[bytes]]] | str:
        """Each user's query alone, in the engine's process with no other user running, one user
        after another: the median (ms) of :data:`ALONE_REPETITIONS` timed runs after an untimed
        one, and its distinct answers (Arrow IPC, for the caller to check). Measured once per
        engine, query and user, and shared by that engine's cells (user i's parameters are the
        same in every cell). A failure's text instead."""
        proto = self.ctx.protocol
        cache: dict[tuple[str, str, int], tuple[float, list[bytes]]] = (
            self.ctx.shared.setdefault(SHARED_KEY, {}).setdefault("alone", {}))
        out = []
        for u in each:
            key = (self.ctx.info.name, qid, int(u["user"]))
            if key not in cache:
                reply = self.worker.call(timeout, op="market_users", qid=qid, warmup=1, repetitions=ALONE_REPETITIONS,
                                         budget_s=proto.cell_budget_s, users=[u], start_ns=time.perf_counter_ns())
                mine = reply["users"][0]
                if "error" in mine:
                    return f"user {u['user']}'s query alone: {mine['error']}"
                cache[key] = (statistics.median(mine["ns"]) / 1e6, mine["answers"])
            out.append(cache[key])
        return out

    def _processes(self, msg: dict[str, Any], each: list[dict[str, Any]], answers: list[bytes],
                   timeout: float) -> tuple[dict[str, Any], dict[str, Any]]:
        """The users as client processes of their own, each opened beside the worker before the
        clock; the engine's run, then the harness's ceiling in the same processes. An embedded
        store's read-write open is closed meanwhile (it would lock the users' read-only opens).
        When that many processes outgrow the memory budget (each holds an interpreter and the
        engine's libraries beside its queries), the cell runs again with the users packed two,
        then four … to a process, each user a thread with its own client, and the reply says so."""
        ctx, proto = self.ctx, self.ctx.protocol
        embedded = not issubclass(ctx.engine, Server)
        if embedded:
            self.worker.call(proto.load_timeout_s, op="stop")
        packed = 1
        first_refusal = ""
        try:
            while True:
                try:
                    reply, ceiling = self._pool(msg, each, answers, timeout, packed)
                    break
                except MemoryBudgetExceeded as exc:
                    if packed >= len(each) or stopping():
                        raise
                    first_refusal = first_refusal or str(exc)
                    packed *= 2
        finally:
            if embedded:
                self.worker.call(proto.load_timeout_s, op="start")
        if packed > 1:
            reply["packed"] = (f"{packed} users to a process (threads, each with its own client) in "
                               f"{reply['processes']} processes: with a process per user, {first_refusal}")
        return reply, ceiling

    def _pool(self, msg: dict[str, Any], each: list[dict[str, Any]], answers: list[bytes], timeout: float,
              packed: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """One run of the users in processes of ``packed`` users each (the last may hold fewer)."""
        groups = [list(range(i, min(i + packed, len(each)))) for i in range(0, len(each), packed)]
        with self.worker.clients(len(groups)) as pool:
            runs = pool.run(timeout, [{**msg, "users": [each[i] for i in g], "own": True} for g in groups],
                            warm_gate=True)
            peak = pool.peak_rss
            noop = pool.run(timeout, [{**msg, "budget_s": CEILING_BUDGET_S, "window_s": 0,
                                       "users": [each[i] for i in g], "ceiling": [answers[i] for i in g]}
                                      for g in groups], warm_gate=True)
        reply = {"users": [u for r in runs for u in r["users"]], "processes": len(groups),
                 "rss_peak_bytes": max(peak, *(r["rss_peak_bytes"] for r in runs))}
        return reply, {"users": [u for r in noop for u in r["users"]]}


def repetitions(asked: int) -> int:
    """Timed queries per user: the protocol's, and :data:`MIN_REPETITIONS` at least."""
    return max(asked, MIN_REPETITIONS)


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def client_bound(engine: dict[str, Any], noop: dict[str, Any]) -> bool:
    """Whether the users' queries/s, or their median latency, is within the client-bound factor
    of the same users' against a no-op query (the harness may be what limits it)."""
    if bound(engine.get("qps") or 0.0, noop.get("qps")):
        return True
    mine, harness = engine.get("p50_ms"), noop.get("p50_ms")
    if not mine:
        return False
    return bound(1 / mine, 1 / harness if harness else None)


def with_alone(figures: dict[str, Any], alone_ms: list[float]) -> dict[str, Any]:
    """``figures`` (of :func:`summarise`) with each user's median alone (``alone_ms``, by user)
    and slowdown (its median among the users over that), and the spreads of both."""
    per_user = figures["per_user"]
    for u, ms in zip(per_user, alone_ms, strict=True):
        u["alone_p50_ms"] = ms
        u["slowdown"] = u["p50_ms"] / ms if ms > 0 else None
    slowdowns = [u["slowdown"] for u in per_user if u["slowdown"] is not None]
    return {**figures, "alone_spread": max(alone_ms) / min(alone_ms) if min(alone_ms) > 0 else None,
            "slowdown_spread": max(slowdowns) / min(slowdowns) if len(slowdowns) == len(per_user) else None}


def summarise_ms(ms: list[float]) -> dict[str, Any]:
    """p10, p50, p90, p99 (nearest rank; p50 the median) and max of ascending latencies ``ms``,
    and their count."""
    return {"n": len(ms), "p10_ms": percentile(ms, 10), "p50_ms": statistics.median(ms),
            "p90_ms": percentile(ms, 90), "p99_ms": percentile(ms, 99), "max_ms": ms[-1]}


def summarise(users: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of one run of users: each user's pid, p10, p50, p90, p99, max and queries/s;
    all users' queries/s (timed queries over the span from the first timed query's start to
    the last's end, on the machine's monotonic clock, which every process shares), their
    latency percentiles together, and the slowest user's median over the fastest's."""
    per_user = []
    origin = min(u.get("began_ns") or u["first_ns"] for u in users)  # the users' common start
    for i, u in enumerate(users):
        ms = sorted(n / 1e6 for n in u["ns"])
        span = (u["last_ns"] - u["first_ns"]) / 1e9
        per_user.append({"user": i, "pid": u.get("pid"), **summarise_ms(ms),
                         "qps": len(ms) / span if span > 0 else None,
                         # its start (its warm-up's), its first timed query's start and its last's
                         # end, s after the users' common start
                         "began_s": (u.get("began_ns", origin) - origin) / 1e9,
                         "from_s": (u["first_ns"] - origin) / 1e9, "to_s": (u["last_ns"] - origin) / 1e9})
    every = sorted(n / 1e6 for u in users for n in u["ns"])
    seconds = (max(u["last_ns"] for u in users) - min(u["first_ns"] for u in users)) / 1e9
    medians = [p["p50_ms"] for p in per_user]
    overall = summarise_ms(every)
    return {"queries": len(every), "seconds": seconds, "qps": len(every) / seconds if seconds > 0 else None,
            "p10_ms": overall["p10_ms"], "p50_ms": overall["p50_ms"], "p90_ms": overall["p90_ms"],
            "p99_ms": overall["p99_ms"], "max_ms": overall["max_ms"],
            "spread": max(medians) / min(medians) if min(medians) > 0 else None, "per_user": per_user}
