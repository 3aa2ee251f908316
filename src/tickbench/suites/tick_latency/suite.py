"""The tick-latency suite's declaration and protocol (METHODOLOGY.md, "Tick latency")."""

from __future__ import annotations

import statistics
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from tickbench import latency
from tickbench.results import Record, Stats
from tickbench.run.cell import CellContext, Worker
from tickbench.suites.base import Option, OptionError, Options, Suite, WorkerOp
from tickbench.suites.ingest import requires_ingest
from tickbench.suites.tick_latency import report as report_module
from tickbench.suites.tick_latency.ops import tick_op

if TYPE_CHECKING:
    from tickbench.engines.base import Engine, EngineInfo

MATRIX: tuple[tuple[int, int], ...] = tuple((x, y) for y in (10_000, 100_000) for x in (1, 10, 100))
MODES = ("single", "batch")


def parse_matrix(text: str) -> tuple[tuple[int, int], ...]:
    """``"1x10000,10x10000"`` → ``((1, 10000), (10, 10000))``."""
    out = []
    for item in text.split(","):
        x, sep, y = item.strip().lower().partition("x")
        if not sep or not x.isdigit() or not y.isdigit() or int(x) < 1 or int(y) < 1:
            raise OptionError(f"--tick-matrix {text}: expected XxY,… with positive integers, e.g. 1x10000,10x10000")
        out.append((int(x), int(y)))
    return tuple(out)


def tick_id(x: int, y: int, mode: str) -> str:
    return f"tick-latency/X={x},Y={y}/{mode}"


class TickFigures(BaseModel):
    """A tick-latency cell: its shape, then (when it ran) seconds per repetition and the
    per-event write and per-ticker read latency histograms."""

    model_config = ConfigDict(extra="forbid")
    x: int | None = None
    y: int | None = None
    mode: str | None = None
    batch: int | None = None
    events: int | None = None
    reps: int | None = None
    written: int | None = None
    read: int | None = None
    write_s: list[float] | None = None
    write_s_mean: float | None = None
    write_s_std: float | None = None
    engine_write_s: list[float] | None = None
    read_s: list[float] | None = None
    read_s_mean: float | None = None
    read_s_std: float | None = None
    events_per_s: float | None = None
    stopped_at_budget: bool | None = None
    latency: dict[str, Any] | None = None
    read_latency: dict[str, Any] | None = None


def _std(xs: list[float]) -> float:
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


class TickLatencySuite(Suite):
    name = "tick-latency"
    title = "Tick latency (after KungfuDB, table 1)"
    order = 10
    summary = "X tickers × Y records written one event per write (and in batches), then read back"
    options = (
        Option("tick_matrix", MATRIX, "cells XxY (X tickers, Y records each), e.g. 1x10000,10x10000",
               kind="text", parse=parse_matrix, text_default="1x10000,10x10000,100x10000,1x100000,10x100000,100x100000",
               decode=lambda raw: tuple((int(x), int(y)) for x, y in raw)),
        Option("tick_reps", 3, "repetitions per cell", check=lambda v: None if v >= 1 else "must be at least 1"),
        Option("tick_batch", 1000, "events per write in batch mode",
               check=lambda v: None if v >= 1 else "must be at least 1"),
    )
    report: ClassVar[ModuleType | None] = report_module
    figures_model = TickFigures
    endpoint_refusal = ("its ingest stores restart the server with each durability setting (a server-wide "
                        "setting) and live beside the loaded tables in stores of their own")
    worker_ops: ClassVar[dict[str, WorkerOp]] = {"tick": tick_op}

    def requires(self, engine: type[Engine], info: EngineInfo) -> str | None:
        return requires_ingest(self.name, engine, info)

    def cell_ids(self, opts: Options, engine: type[Engine]) -> list[str]:
        return [tick_id(x, y, m) for x, y in opts["tick_matrix"] for m in MODES]

    def run(self, ctx: CellContext, todo: list[str]) -> None:
        worker = ctx.worker("tick")
        if not worker.start_or_fail(todo):
            return
        try:
            for x, y in ctx.opts["tick_matrix"]:
                for mode in MODES:
                    bench = tick_id(x, y, mode)
                    if bench in todo:
                        ctx.on_record(self._cell(ctx, worker, bench, x, y, mode))
        finally:
            worker.close()

    def _cell(self, ctx: CellContext, worker: Worker, bench: str, x: int, y: int, mode: str) -> Record:
        batch = 1 if mode == "single" else ctx.opts["tick_batch"]
        base = {"x": x, "y": y, "mode": mode, "batch": batch, "events": x * y}

        def body() -> Record:
            reps: list[dict[str, Any]] = []
            budget = ctx.budget()
            for rep in range(ctx.opts["tick_reps"]):
                if reps and budget.spent():
                    break
                r = worker.call(ctx.protocol.load_timeout_s, op="tick", store=str(ctx.workdir / "tick" / "store"),
                                x=x, y=y, batch=batch, seconds=budget.left())
                reps.append(r)
                if r["wrong"] or r["read"] != r["written"]:
                    why = r["wrong"] or f"{r['written']} rows written, {r['read']} read back"
                    return ctx.make(bench, "wrong", f"repetition {rep + 1}: {why}", verified=False, figures=base)
                if r["stopped"]:
                    break
            asked = ctx.opts["tick_reps"] * x * y
            written = sum(r["written"] for r in reps)
            stopped = written < asked
            write_s = [r["write_ns"] / 1e9 for r in reps]
            read_s = [r["read_ns"] / 1e9 for r in reps]
            figures = {
                **base, "reps": len(reps), "written": sum(r["written"] for r in reps),
                "read": sum(r["read"] for r in reps),
                "write_s": write_s, "write_s_mean": statistics.fmean(write_s), "write_s_std": _std(write_s),
                "engine_write_s": [r["engine_write_ns"] / 1e9 for r in reps],
                "read_s": read_s, "read_s_mean": statistics.fmean(read_s), "read_s_std": _std(read_s),
                "events_per_s": written / sum(write_s) if sum(write_s) else 0.0,
                "stopped_at_budget": stopped,
                "latency": latency.summary(latency.merge(r["write_hdr"] for r in reps)),
                "read_latency": latency.summary(latency.merge(r["read_hdr"] for r in reps)),
            }
            samples = [r["write_ns"] for r in reps]
            notes = budget.note(written, asked, "events") if stopped else ""
            return ctx.make(bench, "ok", verified=True, samples_ns=samples, stats=Stats.of(samples), rows=written,
                            figures=figures, notes=notes)

        return worker.attempt(bench, body, figures=base)

    def headline(self, record: Record) -> str:
        f = record.figures
        return f"{f['events_per_s']:,.0f} events/s · p99 {f['latency'].get('p99_us', 0):,.0f} µs"


SUITE = TickLatencySuite()
