"""The scaling suite's declaration and protocol (METHODOLOGY.md, "Scaling")."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict

from tickbench import verify
from tickbench.data.dataset import Dataset, DatasetError
from tickbench.datasets.base import generate, open_dataset
from tickbench.datasets.paper import reference
from tickbench.datasets.paper.params import QueryParams, span_params
from tickbench.datasets.paper.spec import QUERY_IDS
from tickbench.results import Record, Stats
from tickbench.run.cell import CellContext, EngineError, Worker
from tickbench.suites.base import Option, Options, Suite, WorkerOp
from tickbench.suites.scaling import report as report_module
from tickbench.suites.scaling.ops import params_op

if TYPE_CHECKING:
    from tickbench.engines.base import Engine

SPANS = ("day", "week", "month")

# The table each query reads and whether it reads one symbol (S) or every symbol: how "rows
# read" is counted for the log-log slope (the rows of the partitions in the query's scope).
QUERY_SCOPE: dict[str, tuple[str, bool]] = {
    "T-V1": ("trades", False), "T-V2": ("trades", False), "T-VWAP": ("trades", True),
    "O-T": ("book", True), "O-B1": ("book", False), "O-B2": ("book", False), "O-S": ("book", True),
    "O-V1": ("book", True), "O-V2": ("book", True), "O-NBBO": ("book", True), "C-R": ("book", True),
    "C-VT": ("trades", True), "C-VO1": ("book", True), "C-VO2": ("book", True),
}




def paper_params(ctx: CellContext) -> QueryParams:
    """The run's parameters, the paper dataset's (the suite runs on no other)."""
    if not isinstance(ctx.params, QueryParams):
        raise TypeError("the scaling suite runs on the paper dataset")
    return ctx.params


def scaling_id(qid: str) -> str:
    return f"scaling/{qid}"


def rows_read(ds: Dataset, qid: str, params: QueryParams) -> int:
    """Rows of the partitions the query reads under ``params`` (its table, days, and symbol
    when it reads one): the x axis of the scaling slope."""
    table, one_sym = QUERY_SCOPE[qid]
    days = set(params.days("multi_day" if qid == "O-NBBO" else "day"))
    return sum(r["rows"] for r in ds.manifest.partitions
               if r["table"] == table and r["day"] in days and (not one_sym or r["sym"] == params.symbol))


def loglog_slope(points: list[tuple[float, float]]) -> float | None:
    """The least-squares slope of log(latency) against log(rows); ``None`` without two
    distinct row counts."""
    pts = [(x, y) for x, y in points if x > 0 and y > 0]
    if len({x for x, _ in pts}) < 2:
        return None
    xs = np.log10([x for x, _ in pts])
    ys = np.log10([y for _, y in pts])
    return float(np.polyfit(xs, ys, 1)[0])


@dataclass
class ScaledData:
    """The datasets of the scaling suite: the run's, and the ones at larger scale factors."""

    datasets: list[Dataset] = field(default_factory=list)
    note: str = ""


def scaled_datasets(ds: Dataset, factor: float, jobs: int = 2) -> ScaledData:
    """The run's dataset and the one at ``factor`` × its scale, generated beside it (reused
    when already there). An imported dataset has no generator scale: only its own."""
    m = ds.manifest
    if m.source != "generated" or factor == 1:
        return ScaledData([ds], note=f"dataset {m.source}: one scale factor only")
    scale = m.scale * factor
    name = f"sf{scale:g}-seed{m.seed}" + (f"-sym{m.symbols}" if m.symbols else "")
    out = ds.root.resolve().parent / name
    try:
        generate(out, scale, m.seed, m.symbols, jobs)
    except DatasetError as exc:  # e.g. a scale past the maximum: the spans still give a slope
        return ScaledData([ds], note=f"scale ×{factor:g} not generated: {exc}")
    return ScaledData([ds, open_dataset(out)], note=f"scales {m.scale:g} and {scale:g} (×{factor:g})")


class ScalingFigures(BaseModel):
    """A scaling cell: one point per (scale, span) and the log-log slopes."""

    model_config = ConfigDict(extra="forbid")
    points: list[dict[str, Any]] | None = None
    slope: float | None = None
    slope_by_scale: dict[str, float | None] | None = None
    note: str = ""


class ScalingSuite(Suite):
    name = "scaling"
    title = "Scaling with data read"
    order = 40
    summary = "each query over a day, a week and a month at two scale factors: the log-log slope"
    options = (
        Option("scaling_factor", 2.0, "the second dataset's scale, × the run's", kind="float",
               check=lambda v: None if v >= 1 else "must be at least 1"),
        Option("scaling_spans", SPANS, "the spans each query is rebound to, of day,week,month", kind="text",
               parse=lambda t: tuple(s.strip() for s in t.split(",")), text_default="day,week,month",
               check=lambda v: None if v and set(v) <= set(SPANS) else "expected some of day,week,month",
               decode=tuple),
        Option("scaling_queries", QUERY_IDS, "the published queries to scale, e.g. O-T,O-NBBO", kind="text",
               parse=lambda t: QUERY_IDS if t.strip() == "all" else tuple(q.strip() for q in t.split(",")),
               text_default="all",
               check=lambda v: None if v and set(v) <= set(QUERY_IDS) else "expected query ids, e.g. O-T,O-NBBO",
               decode=tuple),
    )
    report: ClassVar[ModuleType | None] = report_module
    figures_model = ScalingFigures
    worker_ops: ClassVar[dict[str, WorkerOp]] = {"params": params_op}
    endpoint_refusal = ("it loads further datasets into stores of their own; not implemented for external "
                        "endpoints yet")

    def cell_ids(self, opts: Options, engine: type[Engine]) -> list[str]:
        return [scaling_id(q) for q in QUERY_IDS if q in opts["scaling_queries"]]

    def run(self, ctx: CellContext, todo: list[str]) -> None:
        if "scaled" not in ctx.shared:  # generated once per run, for every engine
            ctx.shared["scaled"] = scaled_datasets(ctx.ds, ctx.opts["scaling_factor"])
        scaled: ScaledData = ctx.shared["scaled"]
        workers: list[tuple[Dataset, Worker]] = []
        for i, ds in enumerate(scaled.datasets):
            worker = ctx.worker(f"scale{i}", ds, load=True)
            if not worker.start_or_fail(todo):
                for _, w in workers:
                    w.kill()
                return
            workers.append((ds, worker))
        try:
            for qid in QUERY_IDS:
                bench = scaling_id(qid)
                if bench not in todo:
                    continue
                if qid in ctx.info.unsupported:
                    ctx.record(bench, "unsupported", ctx.info.unsupported[qid])
                    continue
                ctx.on_record(self._cell(ctx, bench, qid, workers, scaled.note))
        finally:
            for _, w in workers:
                w.close()

    def _cell(self, ctx: CellContext, bench: str, qid: str, workers: list[tuple[Dataset, Worker]],
              note: str) -> Record:
        points: list[dict[str, Any]] = []
        proto = ctx.protocol
        budget = ctx.budget()
        for ds, worker in workers:
            for span in ctx.opts["scaling_spans"]:
                sp = span_params(paper_params(ctx), span, ctx.seed)
                point: dict[str, Any] = {"scale": ds.manifest.scale, "span": span, "days": len(sp.span_days),
                                         "rows_read": rows_read(ds, qid, sp)}

                def body(ds: Dataset = ds, worker: Worker = worker, sp: Any = sp, span: str = span,
                         point: dict[str, Any] = point) -> Record:
                    worker.call(proto.timeout_s, op="params", params=sp.as_dict())
                    expected = reference.answer(qid, ds, sp)
                    first = worker.call(proto.timeout_s, op="query", qid=qid, answer=True)
                    verdict = verify.compare(verify.normalize(pl.from_arrow(first["answer"]), expected),  # type: ignore[arg-type]
                                             expected)
                    if not verdict.ok:
                        return ctx.make(bench, "wrong", f"scale {ds.manifest.scale:g}, {span}: {verdict.reason}",
                                        verified=False, figures={"points": points})
                    samples: list[int] = []
                    for _ in range(proto.repetitions):  # at least one per point; then within the budget
                        if samples and budget.spent():
                            point["stopped_at_budget"] = True
                            break
                        samples.append(worker.call(proto.timeout_s, op="query", qid=qid, answer=False)["ns"])
                    point.update(rows=expected.height, samples_ns=samples,
                                 median_ms=statistics.median(samples) / 1e6)
                    return ctx.make(bench, "ok")

                rec = worker.attempt(bench, body, figures={"points": points})
                if rec.status != "ok":
                    if rec.status != "wrong":
                        rec.reason = f"scale {ds.manifest.scale:g}, {span}: {rec.reason}"
                    return rec
                points.append(point)
        slope = loglog_slope([(p["rows_read"], p["median_ms"]) for p in points])
        by_scale = {}
        for scale in sorted({p["scale"] for p in points}):
            pts = [(p["rows_read"], p["median_ms"]) for p in points if p["scale"] == scale]
            by_scale[f"{scale:g}"] = loglog_slope(pts)
        figures = {"points": points, "slope": slope, "slope_by_scale": by_scale, "note": note}
        samples = [s for p in points for s in p["samples_ns"]]
        return ctx.make(bench, "ok", verified=True, samples_ns=samples, stats=Stats.of(samples), figures=figures,
                        plan=self._plan(ctx, qid, workers[0][1]))

    @staticmethod
    def _plan(ctx: CellContext, qid: str, worker: Worker) -> str:
        """The engine's plan of ``qid`` over the longest span of the run's own dataset (the
        worker is still bound to it when it ran last), outside the clock; labelled with it."""
        span = ctx.opts["scaling_spans"][-1]
        sp = span_params(paper_params(ctx), span, ctx.seed)
        try:
            worker.call(ctx.protocol.timeout_s, op="params", params=sp.as_dict())
        except EngineError as exc:
            return f"(no plan: the {span} span could not be bound: {str(exc)[:500]})"
        plan = worker.explain(qid)
        return f"({qid} over the {span} span, scale {ctx.ds.manifest.scale:g})\n{plan}" if plan else ""

    def headline(self, record: Record) -> str:
        slope = record.figures.get("slope")
        return "slope –" if slope is None else f"log-log slope {slope:.2f}"


SUITE = ScalingSuite()
