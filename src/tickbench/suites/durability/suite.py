"""The durability suite's cells, in the parent: start the writers in the engine process, kill
the engine at the seeded point, have it recover, and record what was lost (the protocol is in
:mod:`tickbench.suites.durability.ops` and METHODOLOGY.md)."""

from __future__ import annotations

import re
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from tickbench import latency
from tickbench.engines.base import Ingest, Server, capability_class
from tickbench.results import Record
from tickbench.run.cell import CellContext, EngineError, Worker
from tickbench.suites.base import Option, Options, Suite, WorkerOp
from tickbench.suites.durability import report as report_module
from tickbench.suites.durability.ops import ACK, kill_delay_s, open_op, read_acks, recover_op, write_op
from tickbench.suites.ingest import requires_ingest

if TYPE_CHECKING:
    from tickbench.engines.base import Engine, EngineInfo

WRITER_GRACE_S = 120.0  # how long writers may take to notice a dead server (client retries)


def durability_id(setting: str) -> str:
    return f"durability/{setting}"


class DurabilityFigures(BaseModel):
    """A durability cell: the setting and the kill, then what recovery found."""

    model_config = ConfigDict(extra="forbid")
    setting: str | None = None
    meaning: str | None = None
    durable: bool | None = None
    writers: int | None = None
    seconds_cap: float | None = None
    kill_after_s: float | None = None
    killed: str | None = None
    finished_before_kill: bool | None = None
    processes_killed: int | None = None
    writer_saw: str | None = None
    acknowledged: int | None = None
    read: int | None = None
    counted: int | None = None
    lost: int | None = None
    lost_first: list[int] | None = None
    changed: int | None = None
    changed_first: list[int] | None = None
    duplicated: int | None = None
    unacknowledged_present: int | None = None
    recovery_s: float | None = None
    throughput: float | None = None
    latency: dict[str, Any] | None = None


class DurabilitySuite(Suite):
    name = "durability"
    title = report_module.TITLE
    order = 50
    summary = "kill -9 mid-ingest, recover, count acknowledged rows lost, per durability setting"
    options = (
        Option("durability_seconds", 10.0, "seconds writers stream after the first acknowledgement; the kill "
               "falls 25-75 % in", kind="float", check=lambda v: None if v >= 1 else "must be at least 1"),
        Option("durability_writers", 1, "writer clients, one event per write",
               check=lambda v: None if v >= 1 else "must be at least 1"),
    )
    report: ClassVar[ModuleType | None] = report_module
    figures_model = DurabilityFigures
    endpoint_refusal = ("it kills the server's processes (SIGKILL) to test recovery, and tickbench never kills "
                        "or restarts a server it does not run")
    worker_ops: ClassVar[dict[str, WorkerOp]] = {
        "durability_open": open_op, "durability_write": write_op, "durability_recover": recover_op}

    def requires(self, engine: type[Engine], info: EngineInfo) -> str | None:
        return requires_ingest(self.name, engine, info)

    def cell_ids(self, opts: Options, engine: type[Engine]) -> list[str]:
        return [durability_id(s) for s in settings(engine) or ("default",)]

    def support(self, engine: type[Engine], info: EngineInfo) -> str:
        reason = self.refusal(engine, info)
        return f"— {reason}" if reason else "✔ " + ", ".join(f"`{s}`" for s in settings(engine))

    def run(self, ctx: CellContext, todo: list[str]) -> None:
        """Record every durability cell of ``todo``, setting by setting."""
        worker = ctx.worker("durability")
        if not worker.start_or_fail(todo):
            return
        try:
            for setting in settings(ctx.engine):
                bench = durability_id(setting)
                if bench in todo:
                    ctx.on_record(_cell(ctx, worker, bench, setting))
        finally:
            worker.close()

    def headline(self, record: Record) -> str:
        f = record.figures
        return (f"{f['acknowledged']:,} acknowledged · {f['lost']:,} lost · recovery {f['recovery_s']:.2f} s · "
                f"{f['throughput']:,.0f} writes/s")


def settings(engine: type[Engine]) -> tuple[str, ...]:
    """The durability settings ``engine`` names (none without the ingest capability)."""
    return tuple(engine.ingest_durability) if issubclass(engine, Ingest) else ()


def slug(setting: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", setting)


def _cell(ctx: CellContext, worker: Worker, bench: str, setting: str) -> Record:
    cls = ctx.engine
    ingest = capability_class(cls, Ingest)
    seconds, writers = ctx.opts["durability_seconds"], ctx.opts["durability_writers"]
    server = issubclass(cls, Server)
    work = ctx.workdir / "durability" / slug(setting)
    work.mkdir(parents=True, exist_ok=True)
    store, ack_log = work / "store", work / "acks.bin"
    delay = kill_delay_s(ctx.seed, ctx.info.name, setting, seconds)
    figures: dict[str, Any] = {
        "setting": setting, "meaning": ingest.ingest_durability[setting], "durable": setting in ingest.ingest_durable,
        "writers": writers, "seconds_cap": seconds, "kill_after_s": round(delay, 3),
        "killed": "server processes (SIGKILL)" if server else "writer process (SIGKILL)",
    }
    timeout = ctx.protocol.load_timeout_s

    def body() -> Record:
        worker.call(timeout, op="durability_open", store=str(store), setting=setting)
        worker.begin(op="durability_write", seconds=seconds, writers=writers, ack_log=str(ack_log))
        first = worker.wait_until(lambda: ack_log.exists() and ack_log.stat().st_size >= ACK.size, timeout)
        if first is None:  # the writers replied before any acknowledgement: they failed
            reply = worker.collect(0)
            raise EngineError("the writers stopped before any acknowledgement: " + "; ".join(reply["errors"]))
        worker.pause_until(first + round(delay * 1e9))
        # Did the writers finish before the kill came? (then it did not hit mid-stream)
        figures["finished_before_kill"] = worker.replied()
        if server:
            figures["processes_killed"] = worker.kill_servers()
            wrote = worker.collect(seconds + WRITER_GRACE_S)
        else:
            worker.kill()  # the embedded engine is its writer's process
            wrote = {"errors": []}
        figures["writer_saw"] = (wrote["errors"] or ["no error"])[0]
        r = worker.call(timeout, op="durability_recover", store=str(store), setting=setting, ack_log=str(ack_log))
        return _outcome(ctx, bench, setting, figures, r, read_acks(ack_log))

    return worker.attempt(bench, body, figures=figures)


def _outcome(ctx: CellContext, bench: str, setting: str, figures: dict[str, Any], r: dict[str, Any],
             acks: dict[int, tuple[int, int]]) -> Record:
    """The cell's record from what recovery found (``r``) and the writers' ack log."""
    h = latency.new()
    for t0, t1 in acks.values():
        latency.record(h, t1 - t0)
    span = max(t1 for _, t1 in acks.values()) - min(t0 for t0, _ in acks.values()) if acks else 0
    figures.update({k: r[k] for k in ("acknowledged", "read", "counted", "lost", "lost_first", "changed",
                                      "changed_first", "duplicated", "unacknowledged_present")})
    figures.update(recovery_s=r["recovery_ns"] / 1e9, throughput=len(acks) / (span / 1e9) if span else 0.0,
                   latency=latency.summary(h))
    problems = []
    if r["changed"]:
        problems.append(f"{r['changed']} acknowledged rows read back changed (first: {r['changed_first']})")
    if r["duplicated"]:
        problems.append(f"{r['duplicated']} rows read back more than once")
    if r["lost"] and figures["durable"]:
        problems.append(f"{r['lost']} acknowledged rows lost under {setting}, a setting that promises none "
                        f"(first: {r['lost_first']})")
    if problems:
        return ctx.make(bench, "wrong", "; ".join(problems), verified=False, figures=figures,
                        samples_ns=[r["recovery_ns"]], rows=r["acknowledged"])
    notes = f"{r['lost']} acknowledged rows lost (not a durable setting)" if r["lost"] else ""
    return ctx.make(bench, "ok", verified=True, figures=figures, samples_ns=[r["recovery_ns"]],
                    rows=r["acknowledged"], notes=notes)


SUITE = DurabilitySuite()
