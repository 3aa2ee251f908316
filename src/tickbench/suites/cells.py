"""The protocol of a suite of verified queries, a bulk load and a storage figure, one engine at a
time (SPEC §3): the published suite's and the market suite's cells.

Per query: one warm-up whose answer is verified against the reference (a wrong answer ends the
cell: it is never timed), then ``repetitions`` timed runs within the cell's budget; in cold mode
the engine is stopped, the OS page cache dropped where permitted, and the engine started again
before each timed run. W: the dataset's bulk-load input, CSV and Parquet, each beside the
engine's own baseline path. SE: the bytes on disk of the loaded period. Every cell's failure
(timeout, error, crash) is recorded and the run goes on with the next cell.
"""

from __future__ import annotations

import hashlib
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
from pydantic import BaseModel, ConfigDict

from tickbench import verify
from tickbench.engines.base import STORAGE_SPLIT, BulkLoad, EngineInfo, Storage, capability
from tickbench.results import Memory, QueryText, Record, Stats, harness_share_ms
from tickbench.run.cell import CellContext, WarmUp, Worker, WorkerOp
from tickbench.run.environment import drop_page_cache
from tickbench.run.visibility import wait_settled, wait_visible

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


class LoadStorageFigures(BaseModel):
    """The figures of W (``csv``, ``parquet``) and SE (sizes); queries carry none."""

    model_config = ConfigDict(extra="allow")
    csv: WLoadFigures | None = None
    parquet: WLoadFigures | None = None
    #: Where the engine's W clock stopped, and what it does after (its ``engine.toml``'s ``w_clock``).
    clock_stops: str | None = None
    bytes: dict[str, int] | None = None
    measured: str | None = None
    engine_bytes: int | None = None
    csv_bytes: int | None = None
    parquet_bytes: int | None = None
    rows: int | None = None
    pct_of_csv: float | None = None
    pct_of_parquet: float | None = None
    data_bytes: int | None = None
    index_bytes: int | None = None
    log_bytes: int | None = None
    #: A query cell's harness share: its median client time less the median of the engine's own
    #: times (ms), where the engine reports its own (report.cells.transport_bound judges it).
    harness_ms: float | None = None
    #: A query cell's untimed runs before its timed repetitions (run.cell.WarmUp).
    warmup_runs: int | None = None


def query_text(info: EngineInfo, qid: str) -> QueryText | None:
    path = info.query_file(qid)
    if not path.is_file():
        return None
    text = path.read_text()
    # The engine that owns the file: this one's, or its queries_from engine's (engine.toml).
    return QueryText(file=f"engines/{path.parent.parent.name}/queries/{path.name}", text=text,
                     sha256=hashlib.sha256(text.encode()).hexdigest())


#: The capability each bulk-load and storage cell needs of an engine, and how its absence reads
#: (the published suite's W and SE, the market suite's M-W and M-SE: the same capabilities).
NEEDS: dict[str, tuple[type, str]] = {"W": (BulkLoad, "no bulk-load capability"),
                                      "SE": (Storage, "no storage capability"),
                                      "M-W": (BulkLoad, "no bulk-load capability"),
                                      "M-SE": (Storage, "no storage capability")}


def bulk_op(adapter: Engine, msg: dict[str, Any]) -> dict[str, Any]:
    """The worker operation ``bulk`` (W, M-W): one bulk load of the dataset's bulk-load day from
    ``fmt`` into a fresh store in ``scratch``, through tickbench's load path or (``baseline``)
    the engine's own simplest one, timed in the engine process; the clock stops when the rows
    are queryable."""
    scratch = Path(msg["scratch"])
    bulk = capability(adapter, BulkLoad)
    load = bulk.baseline_load if msg.get("baseline") else bulk.bulk_load
    bulk.bulk_prepare()
    t0 = time.perf_counter_ns()
    figures = load(msg["fmt"], scratch)
    wait_visible(adapter)
    rows = figures.committed_rows()
    return {"ns": time.perf_counter_ns() - t0, "rows": rows,
            "input_bytes": figures.input_bytes, "detail": figures.detail}


def storage_op(adapter: Engine, msg: dict[str, Any]) -> dict[str, Any]:
    """The worker operation ``storage`` (SE, M-SE): the bytes of the store the figure measures,
    once the engine has settled."""
    storage = capability(adapter, Storage)
    storage.storage_load()  # the store SE measures, when it is not the loaded one
    wait_visible(adapter)
    wait_settled(adapter)  # measured on the settled store
    return {"bytes": storage.storage_bytes()}


#: The engine-process operations of :class:`Cells`, for a suite's ``worker_ops``.
WORKER_OPS: dict[str, WorkerOp] = {"bulk": bulk_op, "storage": storage_op}


def missing(engine: type[Engine], info: EngineInfo, bench: str) -> str | None:
    """Why ``engine`` cannot run the load or storage cell ``bench``: it lacks the capability (the
    reason its engine.toml gives, else a generic one); ``None`` when it can."""
    cap, generic = NEEDS[bench]
    return None if issubclass(engine, cap) else info.unsupported.get(bench, generic)


class Cells:
    """The cells of one suite on one started, loaded worker: its queries (:meth:`query`), its
    bulk load (:meth:`w`, recorded as ``w_id``) and its storage figure (:meth:`se`, as
    ``se_id``, over the days of ``period``)."""

    def __init__(self, ctx: CellContext, worker: Worker, period: list[str], w_id: str = "W",
                 se_id: str = "SE") -> None:
        self.ctx = ctx
        self.worker = worker
        self.info = ctx.info
        self.protocol = ctx.protocol
        self.period = period
        self.w_id, self.se_id = w_id, se_id

    def query(self, qid: str) -> Record:
        info, proto = self.info, self.protocol
        query = query_text(info, qid)
        mode = "cold" if proto.cold else "warm"
        if qid in info.unsupported:
            return self.ctx.make(qid, "unsupported", info.unsupported[qid], query=query, mode=mode)
        return self.worker.attempt(qid, lambda: self._query(qid, query, mode), query=query, mode=mode)

    def _query(self, qid: str, query: QueryText | None, mode: str) -> Record:
        proto, call = self.protocol, self.worker.call
        expected = self.ctx.refs[qid]
        warm = WarmUp(proto)
        first = call(proto.timeout_s, op="query", qid=qid, answer=True)
        warm.ran()
        answer = verify.normalize(pl.from_arrow(first["answer"]), expected)  # type: ignore[arg-type]
        if proto.save_answers is not None:
            dest = proto.save_answers / self.info.name / f"{qid}.parquet"
            dest.parent.mkdir(parents=True, exist_ok=True)
            answer.write_parquet(dest)
        verdict = verify.compare(answer, expected)
        if not verdict.ok:
            return self.ctx.make(qid, "wrong", verdict.reason, verified=False, query=query, mode=mode,
                                 rows=answer.height)
        while warm.more():
            call(proto.timeout_s, op="query", qid=qid, answer=False)
            warm.ran()
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
        # The harness share: what the client waited beyond the engine's own time (the result's
        # transport and the client), where the engine reports its own.
        share = harness_share_ms(samples, server)
        figures: dict[str, Any] = {"warmup_runs": warm.runs}
        if share is not None:
            figures["harness_ms"] = share
        return self.ctx.make(qid, "ok", verified=True, mode=mode, cold_note=cold_note, samples_ns=samples,
                             server_samples_ns=server, stats=Stats.of(samples), memory=memory,
                             rows=expected.height, query=query, notes=notes, plan=plan, figures=figures)

    def _cold_restart(self) -> str:
        timeout = self.protocol.load_timeout_s
        self.worker.call(timeout, op="stop")
        dropped = drop_page_cache()
        self.worker.call(timeout, op="start")
        cache = "OS page cache dropped" if dropped else "OS page cache not dropped (not permitted)"
        if not self.ctx.engine.persistent:
            self.worker.call(timeout, op=self.ctx.suite.load_op)
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
        if (why := missing(self.ctx.engine, self.info, self.w_id)) is not None:
            return self.ctx.make(self.w_id, "not_applicable", why)
        figures: dict[str, Any] = {}
        return self.worker.attempt(self.w_id, lambda: self._w(figures), figures=figures)

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
                    return self.ctx.make(self.w_id, "wrong", f"{fmt}: {mine['rows']} rows committed, "
                                         f"expected {expected_rows}", figures=figures)
            mine = sorted((m for m, _ in runs), key=lambda f: f["seconds"])[len(runs) // 2]
            base_s = statistics.median(b["seconds"] for _, b in runs)
            mine["samples_s"] = [m["seconds"] for m, _ in runs]
            mine["baseline_samples_s"] = [b["seconds"] for _, b in runs]
            mine["baseline_seconds"] = base_s
            mine["ratio_to_baseline"] = mine["seconds"] / base_s
            figures[fmt] = mine
        csv = figures["csv"]
        figures["clock_stops"] = self.info.w_clock  # the engine's own statement (engine.toml)
        return self.ctx.make(self.w_id, "ok", verified=True, samples_ns=[round(csv["seconds"] * 1e9)],
                             figures=figures)

    def se(self) -> Record:
        if (why := missing(self.ctx.engine, self.info, self.se_id)) is not None:
            return self.ctx.make(self.se_id, "not_applicable", why)
        return self.worker.attempt(self.se_id, self._se)

    def _se(self) -> Record:
        measured: dict[str, int] = self.worker.call(self.protocol.load_timeout_s, op="storage")["bytes"]
        primary_key = next(iter(measured))
        missing_split = [k for k in STORAGE_SPLIT if k not in measured]
        if missing_split:  # every engine's SE says the same things (engines.base.storage_figures)
            return self.ctx.make(self.se_id, "error", f"the engine's measurement lacks {', '.join(missing_split)}",
                                 figures={"bytes": measured})
        sizes = self.ctx.ds.sizes(self.period)
        primary = measured[primary_key]
        figures = {
            "bytes": measured, "measured": primary_key, "engine_bytes": primary,
            **{k: measured[k] for k in STORAGE_SPLIT},
            "csv_bytes": sizes["csv_bytes"], "parquet_bytes": sizes["parquet_bytes"],
            "rows": sizes["rows"],
            "pct_of_csv": 100.0 * primary / sizes["csv_bytes"] if sizes["csv_bytes"] else None,
            "pct_of_parquet": 100.0 * primary / sizes["parquet_bytes"],
        }
        return self.ctx.make(self.se_id, "ok", verified=True, figures=figures)


