"""The published suite (SPEC §2.1) for one engine: its 14 queries, W and SE, through the shared
protocol of :mod:`tickbench.suites.cells`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from tickbench.report.cells import Measure, timing_measures
from tickbench.report.widgets import PageParts, Section, SuiteView
from tickbench.results import Record
from tickbench.run.cell import CellContext
from tickbench.suites.base import Suite, WorkerOp
from tickbench.suites.cells import WORKER_OPS, Cells, LoadStorageFigures
from tickbench.suites.published import BENCHMARKS, BY_ID, QUERY_IDS, report

if TYPE_CHECKING:
    from tickbench.engines.base import Engine, EngineInfo


class PublishedSuite(Suite):
    """The reference paper's suite: 14 queries, W and SE (SPEC §2.1)."""

    name = "published"
    title = "The published suite (the reference paper's)"
    order = 0
    summary = "the reference paper's 14 queries, W (bulk load) and SE (storage efficiency)"
    figures_model = LoadStorageFigures
    own_sections = True
    worker_ops: ClassVar[dict[str, WorkerOp]] = WORKER_OPS
    endpoint_refusal = None
    endpoint_unmeasured: ClassVar[dict[str, str]] = {
        "W": "not measured on an external endpoint: W loads the bulk day into fresh stores of its own beside "
             "the loaded data, and its baseline runs the engine's own local tools",
        "SE": "not measured on an external endpoint: SE measures the bytes the loaded period takes on the "
              "server's disk, which tickbench does not own or see there",
    }

    def cell_ids(self, opts: dict[str, Any], engine: type[Engine]) -> list[str]:
        return [b.id for b in BENCHMARKS]

    def category(self, benchmark: str) -> str:
        return BY_ID[benchmark].category

    def requires(self, engine: type[Engine], info: EngineInfo) -> str | None:
        return None  # each benchmark says for itself (engine.toml's [unsupported] by id)

    def support(self, engine: type[Engine], info: EngineInfo) -> str:
        return "✔"

    def report_html(self, view: SuiteView) -> PageParts[list[Section]]:
        return report.html(view)

    def report_markdown(self, view: SuiteView) -> PageParts[list[str]]:
        return report.markdown(view)

    def cell_text(self, record: Record) -> str:
        return report.cell_text(record)

    def measures(self, record: Record) -> list[Measure]:
        """A query's timed repetitions; W's CSV and Parquet loads apart; SE's bytes, for information."""
        ok = record.status == "ok"
        if record.benchmark == "W":
            out = []
            for fmt in ("csv", "parquet"):
                f = record.figures.get(fmt) or {}
                samples = f.get("samples_s") or ([f["seconds"]] if "seconds" in f else [])
                out.append(Measure(f"W {fmt}", [s * 1e3 for s in samples] if ok else []))
            return out
        if record.benchmark == "SE":
            size = record.figures.get("engine_bytes")
            return [Measure("SE", [float(size)] if ok and size is not None else [], "B", testable=False)]
        return timing_measures(record)

    def run(self, ctx: CellContext, todo: list[str]) -> None:
        """Start and load the engine, then every query, W and SE of ``todo``."""
        worker = ctx.worker("engine", load=True)
        if not worker.start_or_fail(todo, then=lambda: ctx.meta.update(worker.call(60, op="info"))):
            return
        cells = Cells(ctx, worker, ctx.params.days("month"))
        try:
            for bench in todo:
                if bench in QUERY_IDS:
                    ctx.on_record(cells.query(bench))
                elif bench == "W":
                    ctx.on_record(cells.w())
                elif bench == "SE":
                    ctx.on_record(cells.se())
        finally:
            worker.close()



SUITE = PublishedSuite()
