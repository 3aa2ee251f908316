"""The concurrency suite's declaration and protocol (METHODOLOGY.md, "Concurrency")."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

import polars as pl
from pydantic import BaseModel, ConfigDict

from tickbench import latency, verify
from tickbench.datasets.paper.spec import QUERY_IDS
from tickbench.engines.base import Server, SharedReaders
from tickbench.results import Record
from tickbench.run.cell import CellContext, Worker
from tickbench.suites.base import Option, Options, Suite, WorkerOp, parse_counts
from tickbench.suites.concurrency import report as report_module
from tickbench.suites.concurrency.ops import mix_op

if TYPE_CHECKING:
    from tickbench.engines.base import Engine


def concurrency_id(clients: int) -> str:
    return f"concurrency/clients={clients}"


class ConcurrencyFigures(BaseModel):
    """A concurrency cell: the clients and how they were made, then queries/s and latency."""

    model_config = ConfigDict(extra="forbid")
    clients: int | None = None
    model: str | None = None
    mix: list[str] | None = None
    seconds_target: float | None = None
    queries: int | None = None
    seconds: float | None = None
    qps: float | None = None
    latency: dict[str, Any] | None = None
    per_client: list[dict[str, Any]] | None = None
    by_query: dict[str, int] | None = None


class ConcurrencySuite(Suite):
    name = "concurrency"
    title = "Concurrent clients"
    order = 30
    summary = "n clients running the published query mix at once: queries/s and latency"
    options = (
        Option("concurrency_clients", (1, 2, 4, 8), "client counts", kind="text",
               parse=lambda t: parse_counts(t, "--concurrency-clients"), text_default="1,2,4,8", decode=tuple),
        Option("concurrency_seconds", 10.0, "seconds each cell runs the mix", kind="float",
               check=lambda v: None if v > 0 else "must be positive"),
    )
    report: ClassVar[ModuleType | None] = report_module
    figures_model = ConcurrencyFigures
    endpoint_refusal = ("its clients attach to a server through the port file of the one tickbench started; "
                        "not implemented for external endpoints yet")
    worker_ops: ClassVar[dict[str, WorkerOp]] = {"mix": mix_op}

    def cell_ids(self, opts: Options, engine: type[Engine]) -> list[str]:
        return [concurrency_id(c) for c in opts["concurrency_clients"]]

    def run(self, ctx: CellContext, todo: list[str]) -> None:
        worker = ctx.worker("engine", load=True)
        mix = [q for q in QUERY_IDS if q not in ctx.info.unsupported]
        wrong: list[str] = []

        def verify_mix() -> None:
            """The mix's answers, verified once beforehand (the first wrong one stops it)."""
            for qid in mix:
                first = worker.call(ctx.protocol.timeout_s, op="query", qid=qid, answer=True)
                expected = ctx.refs[qid]
                verdict = verify.compare(verify.normalize(pl.from_arrow(first["answer"]), expected),  # type: ignore[arg-type]
                                         expected)
                if not verdict.ok:
                    wrong.append(f"{qid}: {verdict.reason}")
                    return

        if not worker.start_or_fail(todo, then=verify_mix):
            return
        expected_rows = {q: ctx.refs[q].height for q in mix}
        try:
            if wrong:
                for bench in todo:
                    ctx.record(bench, "wrong", wrong[0], verified=False)
                return
            for clients in ctx.opts["concurrency_clients"]:
                bench = concurrency_id(clients)
                if bench in todo:
                    ctx.on_record(self._cell(ctx, worker, bench, clients, mix, expected_rows))
        finally:
            worker.close()

    def _cell(self, ctx: CellContext, worker: Worker, bench: str, clients: int, mix: list[str],
              expected: dict[str, int]) -> Record:
        seconds = ctx.opts["concurrency_seconds"]
        timeout = seconds + 2 * ctx.protocol.timeout_s + 60
        model = "processes" if issubclass(ctx.engine, SharedReaders) else "threads"
        base: dict[str, Any] = {"clients": clients, "model": model, "mix": mix, "seconds_target": seconds}
        msg = {"qids": mix, "expected": expected, "seconds": seconds, "seed": ctx.seed}

        def body() -> Record:
            if model == "threads":
                replies = worker.call(timeout, op="mix", clients=clients, **msg)["clients"]
            else:
                replies = _mix_processes(ctx, worker, clients, timeout, msg)
            return _record(ctx, bench, base, replies)

        return worker.attempt(bench, body, figures=base)

    def headline(self, record: Record) -> str:
        f = record.figures
        return f"{f['qps']:,.1f} queries/s · p99 {f['latency'].get('p99_us', 0) / 1e3:,.1f} ms"


def _mix_processes(ctx: CellContext, worker: Worker, clients: int, timeout: float,
                   msg: dict[str, Any]) -> list[dict[str, Any]]:
    """Clients as engine processes over the primary's store. For an engine without a server
    the primary closes its own connection first (a store opened read-only by several processes
    cannot also be open for writing) and reopens it afterwards; a server engine's primary
    keeps its server running, and each client process connects to it."""
    own_store = not issubclass(ctx.engine, Server)
    if own_store:
        worker.call(ctx.protocol.load_timeout_s, op="stop")
    try:
        return [r["clients"][0] for r in worker.fan_out(clients, timeout, op="mix", clients=1, own=True, **msg)]
    finally:
        if own_store:
            worker.call(ctx.protocol.load_timeout_s, op="start")


def _record(ctx: CellContext, bench: str, base: dict[str, Any], replies: list[dict[str, Any]]) -> Record:
    errors = [c["error"] for c in replies if "error" in c]
    if errors:
        return ctx.make(bench, "error", "; ".join(errors)[:2000], figures=base)
    merged = latency.merge(c["hdr"] for c in replies)
    queries = sum(sum(c["counts"].values()) for c in replies)
    elapsed = max(c["seconds"] for c in replies)
    per_client = []
    for c in replies:
        s = latency.summary(latency.decode(c["hdr"]))
        per_client.append({"queries": s["count"], "qps": s["count"] / c["seconds"],
                           "p50_us": s.get("p50_us"), "p99_us": s.get("p99_us")})
    by_query: dict[str, int] = {}
    for c in replies:
        for q, n in c["counts"].items():
            by_query[q] = by_query.get(q, 0) + n
    figures = {**base, "queries": queries, "seconds": elapsed, "qps": queries / elapsed,
               "latency": latency.summary(merged), "per_client": per_client, "by_query": by_query}
    wrong = [w for c in replies for w in c["wrong"]]
    if wrong:
        return ctx.make(bench, "wrong", "; ".join(wrong[:5]), verified=False, figures=figures)
    return ctx.make(bench, "ok", verified=True, samples_ns=[round(elapsed * 1e9)], rows=queries, figures=figures)


SUITE = ConcurrencySuite()
