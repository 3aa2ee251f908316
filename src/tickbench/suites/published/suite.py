"""The published suite's protocol (SPEC §2.1, §3) for one engine.

Per query: one warm-up whose answer is verified against the reference (a wrong answer ends the
cell: it is never timed), then ``repetitions`` timed runs; in cold mode the engine is stopped,
the OS page cache dropped where permitted, and the engine started again before each timed run.
Then W (CSV and Parquet, each beside the engine's own baseline path) and SE. Every cell's
failure (timeout, error, crash) is recorded and the run goes on with the next cell.
"""

from __future__ import annotations

import hashlib
import statistics
from typing import TYPE_CHECKING, Any, ClassVar

import polars as pl
from pydantic import BaseModel, ConfigDict

from tickbench import verify
from tickbench.engines.base import BulkLoad, EngineInfo, Storage
from tickbench.report.cells import Measure, timing_measures
from tickbench.report.widgets import PageParts, Section, SuiteView
from tickbench.results import Memory, QueryText, Record, Stats
from tickbench.run.cell import FAILURES, CellContext, Worker
from tickbench.run.environment import drop_page_cache
from tickbench.suites.base import Suite, WorkerOp
from tickbench.suites.published import BENCHMARKS, BY_ID, QUERY_IDS, report
from tickbench.suites.published.ops import bulk_op, storage_op

if TYPE_CHECKING:
    from tickbench.engines.base import Engine


class WLoadFigures(BaseModel):
    """W's figures for one input format (the median of the interleaved runs)."""

    model_config = ConfigDict(extra="allow")
    seconds: float
    rows: int
    input_bytes: int
    rows_per_s: float
    mb_per_s: float
    detail: dict[str, Any] = {}
    samples_s: list[float] = []
    baseline_seconds: float | None = None
    baseline_samples_s: list[float] = []
    ratio_to_baseline: float | None = None


class PublishedFigures(BaseModel):
    """The figures of W (``csv``, ``parquet``) and SE (sizes); queries carry none."""

    model_config = ConfigDict(extra="allow")
    csv: WLoadFigures | None = None
    parquet: WLoadFigures | None = None
    bytes: dict[str, int] | None = None
    measured: str | None = None
    engine_bytes: int | None = None
    csv_bytes: int | None = None
    parquet_bytes: int | None = None
    rows: int | None = None
    pct_of_csv: float | None = None
    pct_of_parquet: float | None = None


def _query_text(info: EngineInfo, qid: str) -> QueryText | None:
    path = info.query_file(qid)
    if not path.is_file():
        return None
    text = path.read_text()
    return QueryText(file=f"engines/{info.name}/queries/{path.name}", text=text,
                     sha256=hashlib.sha256(text.encode()).hexdigest())


#: The capability W and SE each need of an engine, and how its absence reads.
NEEDS: dict[str, tuple[type, str]] = {"W": (BulkLoad, "no bulk-load capability"),
                                      "SE": (Storage, "no storage capability")}


def missing(engine: type[Engine], info: EngineInfo, bench: str) -> str | None:
    """Why ``engine`` cannot run W or SE (``bench``): it lacks the capability (the reason its
    engine.toml gives, else a generic one); ``None`` when it can."""
    cap, generic = NEEDS[bench]
    return None if issubclass(engine, cap) else info.unsupported.get(bench, generic)


class PublishedSuite(Suite):
    """The reference paper's suite: 14 queries, W and SE (SPEC §2.1)."""

    name = "published"
    title = "The published suite (the reference paper's)"
    order = 0
    summary = "the reference paper's 14 queries, W (bulk load) and SE (storage efficiency)"
    figures_model = PublishedFigures
    own_sections = True
    worker_ops: ClassVar[dict[str, WorkerOp]] = {"bulk": bulk_op, "storage": storage_op}
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
        try:
            worker.start()
            ctx.meta.update(worker.call(60, op="info"))
        except FAILURES as exc:
            worker.kill()
            ctx.all_failed(todo, exc)
            return
        cells = _Cells(ctx, worker)
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


class _Cells:
    """The published suite's cells on one started, loaded worker."""

    def __init__(self, ctx: CellContext, worker: Worker) -> None:
        self.ctx = ctx
        self.worker = worker
        self.info = ctx.info
        self.protocol = ctx.protocol

    def query(self, qid: str) -> Record:
        info, proto = self.info, self.protocol
        query = _query_text(info, qid)
        mode = "cold" if proto.cold else "warm"
        if qid in info.unsupported:
            return self.ctx.make(qid, "unsupported", info.unsupported[qid], query=query, mode=mode)
        return self.worker.attempt(qid, lambda: self._query(qid, query, mode), query=query, mode=mode)

    def _query(self, qid: str, query: QueryText | None, mode: str) -> Record:
        proto, call = self.protocol, self.worker.call
        expected = self.ctx.refs[qid]
        first: dict[str, Any] = {}
        for _ in range(max(1, proto.warmup)):
            first = call(proto.timeout_s, op="query", qid=qid, answer=True)
        answer = verify.normalize(pl.from_arrow(first["answer"]), expected)  # type: ignore[arg-type]
        if proto.save_answers is not None:
            dest = proto.save_answers / self.info.name / f"{qid}.parquet"
            dest.parent.mkdir(parents=True, exist_ok=True)
            answer.write_parquet(dest)
        verdict = verify.compare(answer, expected)
        if not verdict.ok:
            return self.ctx.make(qid, "wrong", verdict.reason, verified=False, query=query, mode=mode,
                                 rows=answer.height)
        samples: list[int] = []
        server: list[int] = []
        memories: list[int] = []
        engine_memories: list[int] = []
        cold_note = ""
        stopped = ""
        budget = self.ctx.budget()
        for _ in range(proto.repetitions):
            if samples and budget.spent():
                stopped = budget.note(len(samples), proto.repetitions, "timed repetitions")
                break
            if proto.cold:
                cold_note = self._cold_restart()
            r = call(proto.timeout_s, op="query", qid=qid, answer=False)
            if r["rows"] != expected.height:
                return self.ctx.make(qid, "wrong", f"a timed repetition returned {r['rows']} rows, "
                                     f"expected {expected.height}", verified=False, query=query)
            samples.append(r["ns"])
            if r.get("server_ns") is not None:
                server.append(r["server_ns"])
            if r["memory"] is not None:
                memories.append(r["memory"])
            if r["engine_memory"] is not None:
                engine_memories.append(r["engine_memory"])
        plan = self.worker.explain(qid)
        memory = None
        if engine_memories:
            memory = Memory(bytes=max(engine_memories), kind="engine-reported peak")
        elif memories:
            memory = Memory(bytes=max(memories), kind=first["memory_kind"])
        notes = "; ".join(x for x in (first.get("notes", ""), stopped) if x)
        return self.ctx.make(qid, "ok", verified=True, mode=mode, cold_note=cold_note, samples_ns=samples,
                             server_samples_ns=server, stats=Stats.of(samples), memory=memory,
                             rows=expected.height, query=query, notes=notes, plan=plan)

    def _cold_restart(self) -> str:
        timeout = self.protocol.load_timeout_s
        self.worker.call(timeout, op="stop")
        dropped = drop_page_cache()
        self.worker.call(timeout, op="start")
        cache = "OS page cache dropped" if dropped else "OS page cache not dropped (not permitted)"
        if not self.ctx.engine.persistent:
            self.worker.call(timeout, op="load")
            return f"in-memory engine: data reloaded before each repetition; {cache}"
        return f"engine restarted; {cache}"

    def _load_figures(self, fmt: str, baseline: bool) -> dict[str, Any]:
        scratch = self.ctx.workdir / "w" / ("baseline" if baseline else "tickbench") / fmt
        r = self.worker.call(self.protocol.load_timeout_s, op="bulk", fmt=fmt, baseline=baseline,
                             scratch=str(scratch))
        seconds = r["ns"] / 1e9
        return {"seconds": seconds, "rows": r["rows"], "input_bytes": r["input_bytes"],
                "rows_per_s": r["rows"] / seconds, "mb_per_s": r["input_bytes"] / 1e6 / seconds,
                "detail": r["detail"]}

    def w(self) -> Record:
        if (why := missing(self.ctx.engine, self.info, "W")) is not None:
            return self.ctx.make("W", "not_applicable", why)
        figures: dict[str, Any] = {}
        return self.worker.attempt("W", lambda: self._w(figures), figures=figures)

    def _w(self, figures: dict[str, Any]) -> Record:
        manifest = self.ctx.ds.manifest
        expected_rows = sum(manifest.csv[t]["rows"] for t in manifest.csv)
        for fmt in ("csv", "parquet"):
            # One untimed pair first (a JVM's or a cache's first-use cost belongs to neither
            # path), then interleaved pairs in alternating order, so drift on a shared
            # machine affects both paths alike.
            self._load_figures(fmt, baseline=False)
            self._load_figures(fmt, baseline=True)
            runs = []
            for i in range(max(1, self.protocol.load_repetitions)):
                if i % 2 == 0:
                    mine = self._load_figures(fmt, baseline=False)
                    base = self._load_figures(fmt, baseline=True)
                else:
                    base = self._load_figures(fmt, baseline=True)
                    mine = self._load_figures(fmt, baseline=False)
                runs.append((mine, base))
            for mine, _ in runs:
                if mine["rows"] != expected_rows:
                    return self.ctx.make("W", "wrong", f"{fmt}: {mine['rows']} rows committed, "
                                         f"expected {expected_rows}", figures=figures)
            mine = sorted((m for m, _ in runs), key=lambda f: f["seconds"])[len(runs) // 2]
            base_s = statistics.median(b["seconds"] for _, b in runs)
            mine["samples_s"] = [m["seconds"] for m, _ in runs]
            mine["baseline_samples_s"] = [b["seconds"] for _, b in runs]
            mine["baseline_seconds"] = base_s
            mine["ratio_to_baseline"] = mine["seconds"] / base_s
            figures[fmt] = mine
        csv = figures["csv"]
        return self.ctx.make("W", "ok", verified=True, samples_ns=[round(csv["seconds"] * 1e9)], figures=figures)

    def se(self) -> Record:
        if (why := missing(self.ctx.engine, self.info, "SE")) is not None:
            return self.ctx.make("SE", "not_applicable", why)
        return self.worker.attempt("SE", self._se)

    def _se(self) -> Record:
        measured: dict[str, int] = self.worker.call(self.protocol.load_timeout_s, op="storage")["bytes"]
        primary_key = next(iter(measured))
        sizes = self.ctx.ds.sizes(self.ctx.params.days("month"))
        primary = measured[primary_key]
        figures = {
            "bytes": measured, "measured": primary_key, "engine_bytes": primary,
            "csv_bytes": sizes["csv_bytes"], "parquet_bytes": sizes["parquet_bytes"],
            "rows": sizes["rows"],
            "pct_of_csv": 100.0 * primary / sizes["csv_bytes"] if sizes["csv_bytes"] else None,
            "pct_of_parquet": 100.0 * primary / sizes["parquet_bytes"],
        }
        return self.ctx.make("SE", "ok", verified=True, figures=figures)


SUITE = PublishedSuite()
