"""The market suite's users (SPEC §2.3's last paragraph, STAC-M3's 1T … 100T): M-VWAB-12D with
u concurrent users, each its own client with its own disjoint block of instruments and 12-day
window, and M-SNAP and M-STATS-UI with 10 users, each with its own times and requests.

One cell per (query, user count), ``<qid>/users=<u>``. The users are threads of the engine's
process, each with its own client (:func:`tickbench.suites.market.ops.user_engines`: its own
connection to a server, its own read-only open of an embedded store, or, for an in-memory
engine, its own view of the shared frames), all starting together; each runs its query
``warmup`` untimed and ``repetitions`` timed times, back to back. Every answer of every user is
checked against the reference over that user's parameters (a wrong one makes the cell wrong,
naming the user). Beside each cell, the same users against a no-op query: the harness's own
ceiling, and a figure within :data:`~tickbench.suites.stream.harness.CLIENT_BOUND_FACTOR` of
it is marked client-bound.
"""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING, Any

import polars as pl
from pydantic import BaseModel, ConfigDict

from tickbench import verify
from tickbench.engines.base import Server, SharedReaders
from tickbench.market_params import MarketParams, user_params, write_params_json
from tickbench.market_reference import answer
from tickbench.results import Stats
from tickbench.run.cell import CellContext, Worker
from tickbench.suites.stream.harness import bound

if TYPE_CHECKING:
    from tickbench.engines.base import Engine
    from tickbench.results import Record

VWAB_USERS: tuple[int, ...] = (1, 10, 50, 100)  # STAC-M3's 1T, 10T, 50T, 100T
UI_USERS = 10  # M-SNAP's and M-STATS-UI's users
USERS_QUERIES = ("M-VWAB-12D", "M-SNAP", "M-STATS-UI")
CATEGORY = "users"
SHARED_KEY = "market-users"  # ctx.shared: the users' parameters and reference answers, shared by the engines


class UsersFigures(BaseModel):
    """A users cell's figures: how the users ran, each user's latencies, all users' queries/s,
    the harness's ceiling beside them and the peak memory."""

    model_config = ConfigDict(extra="forbid")
    query: str | None = None
    users: int | None = None
    model: str | None = None
    repetitions: int | None = None
    queries: int | None = None
    seconds: float | None = None
    qps: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None
    #: The slowest user's median latency over the fastest's.
    spread: float | None = None
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


def model_of(engine: type[Engine]) -> str:
    """How an engine's users are made (recorded with each cell)."""
    if not engine.persistent:
        return "threads over the in-memory frames, each with its own parameters"
    if issubclass(engine, Server):
        return "threads, each with its own connection to the server"
    if issubclass(engine, SharedReaders):
        return "threads, each with its own read-only open of the store"
    return "threads over the engine's one open of the store (one per process), each with its own parameters"


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
                                "repetitions": ctx.protocol.repetitions}
        for key in (qid, bench):  # the query itself, or this many users, declared beyond the engine
            if key in info.unsupported:
                return ctx.make(bench, "unsupported", info.unsupported[key], figures=base)
        return self.worker.attempt(bench, lambda: self._cell(bench, qid, users, base), figures=base)

    def _cell(self, bench: str, qid: str, users: int, base: dict[str, Any]) -> Record:
        ctx, proto = self.ctx, self.ctx.protocol
        params = self.params(users)
        expected = [self.expected(qid, i, p) for i, p in enumerate(params)]
        budget = proto.cell_budget_s
        timeout = budget + (proto.warmup + 2) * proto.timeout_s + 120
        msg = {"qid": qid, "users": [p.as_dict() for p in params], "warmup": max(1, proto.warmup),
               "repetitions": proto.repetitions, "budget_s": budget}
        ceiling = self.worker.call(timeout, op="market_users", noop=True, **msg)
        engine = ctx.engine
        own_store = engine.persistent and issubclass(engine, SharedReaders) and not issubclass(engine, Server)
        if own_store:  # a read-write open locks the store: the users open it read-only meanwhile
            self.worker.call(proto.load_timeout_s, op="stop")
        try:
            reply = self.worker.call(timeout, op="market_users", **msg)
        finally:
            if own_store:
                self.worker.call(proto.load_timeout_s, op="start")
        errors = [u["error"] for u in reply["users"] if "error" in u]
        if errors:
            return ctx.make(bench, "error", "; ".join(errors)[:2000], figures=base)
        figures = {**base, **summarise(reply["users"]), "rss_peak_bytes": reply["rss_peak_bytes"]}
        noop = summarise(ceiling["users"])
        figures["ceiling_qps"], figures["ceiling_p50_ms"] = noop["qps"], noop["p50_ms"]
        figures["client_bound"] = client_bound(figures, noop)
        samples = sorted(n for u in reply["users"] for n in u["ns"])
        stopped = sum(1 for u in reply["users"] if u["stopped"])
        notes = (f"{stopped} of {users} users stopped at the cell budget of {budget:g} s before their "
                 f"{proto.repetitions} timed queries (raise it with --cell-budget)") if stopped else ""
        for i, (u, p, want) in enumerate(zip(reply["users"], params, expected, strict=True)):
            got = [verify.normalize(pl.from_arrow(t), want) for t in u["answers"]]  # type: ignore[arg-type]
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
        return ctx.make(bench, "ok", verified=True, samples_ns=samples, stats=Stats.of(samples),
                        rows=sum(w.height for w in expected), figures=figures, notes=notes)


def client_bound(engine: dict[str, Any], noop: dict[str, Any]) -> bool:
    """Whether the users' queries/s, or their median latency, is within the client-bound factor
    of the same users' against a no-op query (the harness may be what limits it)."""
    if bound(engine.get("qps") or 0.0, noop.get("qps")):
        return True
    mine, harness = engine.get("p50_ms"), noop.get("p50_ms")
    if not mine:
        return False
    return bound(1 / mine, 1 / harness if harness else None)


def summarise_ms(ms: list[float]) -> dict[str, Any]:
    """p50, p99 (nearest rank) and max of ascending latencies ``ms``, and their count."""
    return {"n": len(ms), "p50_ms": statistics.median(ms), "p99_ms": percentile(ms, 99), "max_ms": ms[-1]}


def summarise(users: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of one run of users: each user's p50, p99, max and queries/s; all users'
    queries/s (timed queries over the span from the first timed query's start to the last's
    end), their latency percentiles together, and the slowest user's median over the fastest's."""
    per_user = []
    for i, u in enumerate(users):
        ms = sorted(n / 1e6 for n in u["ns"])
        span = (u["last_ns"] - u["first_ns"]) / 1e9
        per_user.append({"user": i, **summarise_ms(ms), "qps": len(ms) / span if span > 0 else None})
    every = sorted(n / 1e6 for u in users for n in u["ns"])
    seconds = (max(u["last_ns"] for u in users) - min(u["first_ns"] for u in users)) / 1e9
    medians = [p["p50_ms"] for p in per_user]
    overall = summarise_ms(every)
    return {"queries": len(every), "seconds": seconds, "qps": len(every) / seconds if seconds > 0 else None,
            "p50_ms": overall["p50_ms"], "p99_ms": overall["p99_ms"], "max_ms": overall["max_ms"],
            "spread": max(medians) / min(medians) if min(medians) > 0 else None, "per_user": per_user}
