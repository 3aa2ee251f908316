"""The protocols of the suites beyond the paper (SPEC §2.2) for one engine.

The timing loops run inside the engine's worker (:mod:`tickbench.run.ingest`); this module
sends them cell by cell, checks the rows (written = read back, answers = reference), merges
the histograms, and records one :class:`~tickbench.results.Record` per cell. A suite an
engine cannot take part in is recorded as ``unsupported`` with the reason from its
``engine.toml`` (or "no ingest capability implemented"), never skipped silently.
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from tickbench import reference, verify
from tickbench.data.dataset import Dataset
from tickbench.engines.base import EngineInfo
from tickbench.engines.registry import adapter_class
from tickbench.results import Record, Stats
from tickbench.run import durability_cells, latency
from tickbench.run.published import CellDone, Protocol, ReferenceAnswers, Skip
from tickbench.run.worker import CellTimeout, EngineError, EngineProcess, WorkerDied
from tickbench.suites.beyond import (
    QUERY_SCOPE,
    BeyondOptions,
    cell_ids,
    concurrency_id,
    rate_label,
    scaling_id,
    span_params,
    stream_id,
    tick_id,
)
from tickbench.suites.published import QUERY_IDS, QueryParams

NO_INGEST = "no ingest capability implemented"
INGEST_SUITES = ("tick-latency", "stream", "durability")
Failure = (CellTimeout, WorkerDied, EngineError)


def concurrency_model(engine: str) -> str:
    """How the engine's concurrent clients are made: its declared ``concurrency_model``
    (:class:`~tickbench.engines.base.Engine`)."""
    return adapter_class(engine).concurrency_model


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


class BeyondRun:
    """Runs one suite beyond the paper on one engine."""

    def __init__(self, info: EngineInfo, ds: Dataset, params: QueryParams, refs: ReferenceAnswers,
                 workdir: Path, protocol: Protocol, opts: BeyondOptions, seed: int,
                 on_record: CellDone, skip: Skip = lambda benchmark: False,
                 scaled: ScaledData | None = None) -> None:
        self.info = info
        self.ds = ds
        self.params = params
        self.refs = refs
        self.workdir = workdir
        self.protocol = protocol
        self.opts = opts
        self.seed = seed
        self.on_record = on_record
        self.skip = skip
        self.scaled = scaled or ScaledData([ds])

    def _record(self, suite: str, bench: str, status: str, reason: str = "", **extra: Any) -> Record:
        return Record(engine=self.info.name, benchmark=bench, category=suite, status=status,  # type: ignore[arg-type]
                      reason=reason, **extra)

    def run(self, suite: str) -> None:
        """Record every cell of ``suite`` that ``skip`` does not exclude."""
        settings = tuple(adapter_class(self.info.name).ingest_durability)
        todo = [b for b in cell_ids(suite, self.opts, settings) if not self.skip(b)]
        if not todo:
            return
        reason = self.info.unsupported.get(suite)
        if reason is None and suite in INGEST_SUITES and not adapter_class(self.info.name).supports_ingest():
            reason = NO_INGEST
        if reason is not None:
            for bench in todo:
                self.on_record(self._record(suite, bench, "unsupported", reason))
            return
        getattr(self, "_" + suite.replace("-", "_"))(todo)

    # -- lifecycle ----------------------------------------------------------------------------

    def _process(self, name: str, ds: Dataset | None = None) -> EngineProcess:
        return EngineProcess(self.info.name, self.workdir / name, (ds or self.ds).root, self.params)

    def _started(self, proc: EngineProcess, load: bool) -> None:
        proc.call(self.protocol.load_timeout_s, op="start")
        if load:
            proc.call(self.protocol.load_timeout_s, op="load")

    def _ingest_process(self, name: str, suite: str, todo: list[str]) -> EngineProcess | None:
        """A started worker for an ingest suite (no data loaded); ``None`` once every cell of
        ``todo`` is recorded as failed because the engine did not start."""
        proc = self._process(name)
        try:
            self._started(proc, load=False)
        except Failure as exc:
            proc.kill()
            self._all_failed(suite, todo, exc)
            return None
        return proc

    def _all_failed(self, suite: str, todo: list[str], exc: Exception) -> None:
        status = "timeout" if isinstance(exc, CellTimeout) else "error"
        for bench in todo:
            self.on_record(self._record(suite, bench, status, f"engine did not start or load: {exc}"))

    # -- tick-latency ------------------------------------------------------------------------

    def _tick_latency(self, todo: list[str]) -> None:
        proc = self._ingest_process("tick", "tick-latency", todo)
        if proc is None:
            return
        try:
            for x, y in self.opts.tick_matrix:
                for mode in ("single", "batch"):
                    bench = tick_id(x, y, mode)
                    if bench in todo:
                        self.on_record(self._tick_cell(proc, bench, x, y, mode))
        finally:
            proc.close()

    def _tick_cell(self, proc: EngineProcess, bench: str, x: int, y: int, mode: str) -> Record:
        batch = 1 if mode == "single" else self.opts.tick_batch
        reps: list[dict[str, Any]] = []
        base = {"x": x, "y": y, "mode": mode, "batch": batch, "events": x * y}
        try:
            for rep in range(self.opts.tick_reps):
                r = proc.call(self.protocol.load_timeout_s, op="tick", store=str(self.workdir / "tick" / "store"),
                              x=x, y=y, batch=batch)
                reps.append(r)
                if r["wrong"] or r["read"] != r["written"]:
                    why = r["wrong"] or f"{r['written']} rows written, {r['read']} read back"
                    return self._record("tick-latency", bench, "wrong", f"repetition {rep + 1}: {why}",
                                        verified=False, figures=base)
        except Failure as exc:
            proc.kill()
            self._restart(proc)
            status = "timeout" if isinstance(exc, CellTimeout) else "error"
            return self._record("tick-latency", bench, status, str(exc), figures=base)
        write_s = [r["write_ns"] / 1e9 for r in reps]
        read_s = [r["read_ns"] / 1e9 for r in reps]
        figures = {
            **base, "reps": len(reps), "written": sum(r["written"] for r in reps),
            "read": sum(r["read"] for r in reps),
            "write_s": write_s, "write_s_mean": statistics.fmean(write_s), "write_s_std": _std(write_s),
            "engine_write_s": [r["engine_write_ns"] / 1e9 for r in reps],
            "read_s": read_s, "read_s_mean": statistics.fmean(read_s), "read_s_std": _std(read_s),
            "events_per_s": x * y / statistics.fmean(write_s),
            "latency": latency.summary(latency.merge(r["write_hdr"] for r in reps)),
            "read_latency": latency.summary(latency.merge(r["read_hdr"] for r in reps)),
        }
        samples = [r["write_ns"] for r in reps]
        return self._record("tick-latency", bench, "ok", verified=True, samples_ns=samples,
                            stats=Stats.of(samples), rows=x * y, figures=figures)

    def _restart(self, proc: EngineProcess) -> None:
        try:
            self._started(proc, load=False)
        except Failure:
            proc.kill()  # the next cell starts a fresh worker

    # -- stream ------------------------------------------------------------------------------

    def _stream(self, todo: list[str]) -> None:
        proc = self._ingest_process("stream", "stream", todo)
        if proc is None:
            return
        try:
            for rate in self.opts.stream_rates:
                for writers in self.opts.stream_writers:
                    bench = stream_id(rate, writers)
                    if bench in todo:
                        self.on_record(self._stream_cell(proc, bench, rate, writers))
        finally:
            proc.close()

    def _stream_cell(self, proc: EngineProcess, bench: str, rate: int | None, writers: int) -> Record:
        o = self.opts
        base: dict[str, Any] = {"rate": rate_label(rate), "writers": writers, "max_batch": o.stream_max_batch,
                                "seconds_cap": o.stream_seconds}
        try:
            r = proc.call(4 * o.stream_seconds + 120 + self.protocol.timeout_s, op="stream",
                          store=str(self.workdir / "stream" / "store"), rate=rate, writers=writers,
                          seconds=o.stream_seconds, max_batch=o.stream_max_batch)
        except Failure as exc:
            proc.kill()
            self._restart(proc)
            status = "timeout" if isinstance(exc, CellTimeout) else "error"
            return self._record("stream", bench, status, str(exc), figures=base)
        figures = {
            **base, **{k: r[k] for k in ("planned", "written", "read", "counted", "written_by_table",
                                          "read_by_table", "dataset_events", "seconds", "throughput", "polls")},
            "latency": latency.summary(latency.decode(r["latency_hdr"])),
            "service": latency.summary(latency.decode(r["service_hdr"])),
            "visibility": latency.summary(latency.decode(r["visibility_hdr"])),
            "snapshot_during": latency.summary(latency.decode(r["snapshot_during_hdr"])),
            "snapshot_after": latency.summary(latency.decode(r["snapshot_after_hdr"])),
        }
        notes = ""
        if r["written"] < r["planned"]:
            notes = (f"{r['planned'] - r['written']} of {r['planned']} events not sent before the cell's time "
                     "limit: the engine fell behind the target rate")
        if r["errors"]:
            return self._record("stream", bench, "error", "; ".join(r["errors"])[:2000], figures=figures)
        if r["read"] != r["written"] or r["counted"] != r["written"] or r["read_by_table"] != r["written_by_table"]:
            return self._record("stream", bench, "wrong", f"{r['written']} rows acknowledged, {r['read']} read back, "
                                f"{r['counted']} counted", verified=False, figures=figures)
        return self._record("stream", bench, "ok", verified=True, samples_ns=[round(r["seconds"] * 1e9)],
                            rows=r["written"], figures=figures, notes=notes)

    # -- concurrency -------------------------------------------------------------------------

    def _mix(self) -> list[str]:
        return [q for q in QUERY_IDS if q not in self.info.unsupported]

    def _concurrency(self, todo: list[str]) -> None:
        proc = self._process("engine")
        try:
            self._started(proc, load=True)
            mix = self._mix()
            for qid in mix:  # the mix's answers, verified once beforehand
                first = proc.call(self.protocol.timeout_s, op="query", qid=qid, answer=True)
                expected = self.refs[qid]
                verdict = verify.compare(verify.normalize(pl.from_arrow(first["answer"]), expected),  # type: ignore[arg-type]
                                         expected)
                if not verdict.ok:
                    for bench in todo:
                        self.on_record(self._record("concurrency", bench, "wrong", f"{qid}: {verdict.reason}",
                                                    verified=False))
                    return
        except Failure as exc:
            proc.kill()
            return self._all_failed("concurrency", todo, exc)
        expected_rows = {q: self.refs[q].height for q in mix}
        model = concurrency_model(self.info.name)
        try:
            for clients in self.opts.concurrency_clients:
                bench = concurrency_id(clients)
                if bench in todo:
                    self.on_record(self._concurrency_cell(proc, bench, clients, model, mix, expected_rows))
        finally:
            proc.close()

    def _concurrency_cell(self, proc: EngineProcess, bench: str, clients: int, model: str, mix: list[str],
                          expected: dict[str, int]) -> Record:
        seconds = self.opts.concurrency_seconds
        timeout = seconds + 2 * self.protocol.timeout_s + 60
        base: dict[str, Any] = {"clients": clients, "model": model, "mix": mix, "seconds_target": seconds}
        msg = {"qids": mix, "expected": expected, "seconds": seconds, "seed": self.seed}
        try:
            if model == "threads":
                replies = proc.call(timeout, op="mix", clients=clients, start_at=time.time(), **msg)["clients"]
            else:
                replies = self._mix_processes(proc, clients, timeout, msg)
        except Failure as exc:
            proc.kill()
            try:
                self._started(proc, load=True)
            except Failure:
                proc.kill()
            status = "timeout" if isinstance(exc, CellTimeout) else "error"
            return self._record("concurrency", bench, status, str(exc), figures=base)
        errors = [c["error"] for c in replies if "error" in c]
        if errors:
            return self._record("concurrency", bench, "error", "; ".join(errors)[:2000], figures=base)
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
            return self._record("concurrency", bench, "wrong", "; ".join(wrong[:5]), verified=False, figures=figures)
        return self._record("concurrency", bench, "ok", verified=True, samples_ns=[round(elapsed * 1e9)],
                            rows=queries, figures=figures)

    def _mix_processes(self, proc: EngineProcess, clients: int, timeout: float,
                       msg: dict[str, Any]) -> list[dict[str, Any]]:
        """Clients as worker processes over the primary's store. For an embedded engine the
        primary closes its own connection first (a store opened read-only by several processes
        cannot also be open for writing) and reopens it afterwards; a server engine's primary
        keeps its server running, and each client process connects to it."""
        embedded = self.info.kind != "server"
        if embedded:
            proc.call(self.protocol.load_timeout_s, op="stop")
        procs = [EngineProcess(self.info.name, self.workdir / "engine", self.ds.root, self.params)
                 for _ in range(clients)]
        try:
            for p in procs:
                p.call(self.protocol.load_timeout_s, op="start_shared")
            start_at = time.time() + 0.5
            with ThreadPoolExecutor(clients) as pool:
                futures = [pool.submit(p.call, timeout, op="mix", clients=1, own=True, first_client=i,
                                       start_at=start_at, **msg) for i, p in enumerate(procs)]
                return [f.result()["clients"][0] for f in futures]
        finally:
            for p in procs:
                p.close()
            if embedded:
                proc.call(self.protocol.load_timeout_s, op="start")

    # -- durability --------------------------------------------------------------------------

    def _durability(self, todo: list[str]) -> None:
        durability_cells.run_suite(self, todo)

    # -- scaling -----------------------------------------------------------------------------

    def _scaling(self, todo: list[str]) -> None:
        procs: list[tuple[Dataset, EngineProcess]] = []
        try:
            for i, ds in enumerate(self.scaled.datasets):
                proc = self._process(f"scale{i}", ds)
                procs.append((ds, proc))
                self._started(proc, load=True)
        except Failure as exc:
            for _, p in procs:
                p.kill()
            return self._all_failed("scaling", todo, exc)
        try:
            for qid in QUERY_IDS:
                bench = scaling_id(qid)
                if bench not in todo:
                    continue
                if qid in self.info.unsupported:
                    self.on_record(self._record("scaling", bench, "unsupported", self.info.unsupported[qid]))
                    continue
                self.on_record(self._scaling_cell(bench, qid, procs))
        finally:
            for _, p in procs:
                p.close()

    def _scaling_cell(self, bench: str, qid: str, procs: list[tuple[Dataset, EngineProcess]]) -> Record:
        points: list[dict[str, Any]] = []
        proto = self.protocol
        for ds, proc in procs:
            for span in self.opts.scaling_spans:
                sp = span_params(self.params, span, self.seed)
                point: dict[str, Any] = {"scale": ds.manifest.scale, "span": span, "days": len(sp.span_days),
                                         "rows_read": rows_read(ds, qid, sp)}
                try:
                    proc.call(proto.timeout_s, op="params", params=sp.as_dict())
                    expected = reference.answer(qid, ds, sp)
                    first = proc.call(proto.timeout_s, op="query", qid=qid, answer=True)
                    verdict = verify.compare(verify.normalize(pl.from_arrow(first["answer"]), expected),  # type: ignore[arg-type]
                                             expected)
                    if not verdict.ok:
                        return self._record("scaling", bench, "wrong", f"scale {ds.manifest.scale:g}, {span}: "
                                            f"{verdict.reason}", verified=False, figures={"points": points})
                    samples = [proc.call(proto.timeout_s, op="query", qid=qid, answer=False)["ns"]
                               for _ in range(proto.repetitions)]
                except Failure as exc:
                    proc.kill()
                    try:
                        self._started(proc, load=True)
                    except Failure:
                        proc.kill()
                    status = "timeout" if isinstance(exc, CellTimeout) else "error"
                    return self._record("scaling", bench, status, f"scale {ds.manifest.scale:g}, {span}: {exc}",
                                        figures={"points": points})
                point.update(rows=expected.height, samples_ns=samples, median_ms=statistics.median(samples) / 1e6)
                points.append(point)
        slope = loglog_slope([(p["rows_read"], p["median_ms"]) for p in points])
        by_scale = {}
        for scale in sorted({p["scale"] for p in points}):
            pts = [(p["rows_read"], p["median_ms"]) for p in points if p["scale"] == scale]
            by_scale[f"{scale:g}"] = loglog_slope(pts)
        figures = {"points": points, "slope": slope, "slope_by_scale": by_scale, "note": self.scaled.note}
        samples = [s for p in points for s in p["samples_ns"]]
        return self._record("scaling", bench, "ok", verified=True, samples_ns=samples, stats=Stats.of(samples),
                            figures=figures)


def _std(xs: list[float]) -> float:
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def scaled_datasets(ds: Dataset, factor: float, jobs: int = 2) -> ScaledData:
    """The run's dataset and the one at ``factor`` × its scale, generated beside it (reused
    when already there). An imported dataset has no generator scale: only its own."""
    m = ds.manifest
    if m.source != "generated" or factor == 1:
        return ScaledData([ds], note=f"dataset {m.source}: one scale factor only")
    from tickbench.data.dataset import DatasetError, generate

    scale = m.scale * factor
    name = f"sf{scale:g}-seed{m.seed}" + (f"-sym{m.symbols}" if m.symbols else "")
    out = ds.root.resolve().parent / name
    try:
        generate(out, scale, m.seed, m.symbols, jobs)
    except DatasetError as exc:  # e.g. a scale past the maximum: the spans still give a slope
        return ScaledData([ds], note=f"scale ×{factor:g} not generated: {exc}")
    return ScaledData([ds, Dataset.open(out)], note=f"scales {m.scale:g} and {scale:g} (×{factor:g})")
