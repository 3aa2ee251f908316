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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from tickbench import reference, verify
from tickbench.data.dataset import Dataset
from tickbench.engines.base import EngineInfo
from tickbench.results import Memory, QueryText, Record, Stats
from tickbench.run.environment import drop_page_cache
from tickbench.run.worker import CellTimeout, EngineError, EngineProcess, WorkerDied
from tickbench.suites.published import BY_ID, QUERY_IDS, QueryParams

CellDone = Callable[[Record], None]
Skip = Callable[[str], bool]


@dataclass(frozen=True)
class Protocol:
    """How each cell is measured."""

    repetitions: int = 10
    warmup: int = 1
    timeout_s: float = 300.0
    load_timeout_s: float = 3600.0
    load_repetitions: int = 3  # W: each path this many times, interleaved; the median is reported
    cold: bool = False
    save_answers: Path | None = None  # directory for answers/<engine>/<ID>.parquet


class ReferenceAnswers:
    """Reference answers, computed once per run and shared by every engine."""

    def __init__(self, ds: Dataset, params: QueryParams) -> None:
        self.ds = ds
        self.params = params
        self.cache: dict[str, pl.DataFrame] = {}

    def __getitem__(self, qid: str) -> pl.DataFrame:
        if qid not in self.cache:
            self.cache[qid] = reference.answer(qid, self.ds, self.params)
        return self.cache[qid]


def _query_text(info: EngineInfo, qid: str) -> QueryText | None:
    path = info.query_file(qid)
    if not path.is_file():
        return None
    text = path.read_text()
    return QueryText(file=f"engines/{info.name}/queries/{path.name}", text=text,
                     sha256=hashlib.sha256(text.encode()).hexdigest())


class EngineRun:
    """Runs the published suite on one engine in its worker process."""

    def __init__(
        self,
        info: EngineInfo,
        ds: Dataset,
        params: QueryParams,
        refs: ReferenceAnswers,
        workdir: Path,
        protocol: Protocol,
        on_record: CellDone,
        skip: Skip = lambda benchmark: False,
    ) -> None:
        self.info = info
        self.ds = ds
        self.params = params
        self.refs = refs
        self.workdir = workdir
        self.protocol = protocol
        self.on_record = on_record
        self.skip = skip
        self.proc = EngineProcess(info.name, workdir / "engine", ds.root, params)
        self.meta: dict[str, Any] = {}
        self.down: str | None = None  # why the engine is not running after a failed restart

    # -- lifecycle -------------------------------------------------------------------------

    def _start(self, load: bool) -> None:
        self.proc.call(self.protocol.load_timeout_s, op="start")
        if load:
            reply = self.proc.call(self.protocol.load_timeout_s, op="load")
            self.meta["load_seconds"] = reply["ns"] / 1e9
            self.meta["load_rows"] = reply["rows"]

    def _restart(self) -> None:
        """After a kill: a fresh worker reopens the engine's stored data (an in-memory engine
        has none and loads again)."""
        self.proc.kill()
        self._start(load=self.info.kind == "in-memory")

    def run(self) -> dict[str, Any]:
        """Run every cell not skipped; return the engine's version, settings and load figures."""
        try:
            self._start(load=True)
            self.meta.update(self.proc.call(60, op="info"))
        except (CellTimeout, WorkerDied, EngineError) as exc:
            self.proc.kill()
            for bench in (*QUERY_IDS, "W", "SE"):
                if not self.skip(bench):
                    self.on_record(self._failed(bench, "error", f"engine did not start or load: {exc}"))
            return self.meta
        try:
            for qid in QUERY_IDS:
                if not self.skip(qid):
                    self.on_record(self.query_cell(qid))
            if not self.skip("W"):
                self.on_record(self.w_cell())
            if not self.skip("SE"):
                self.on_record(self.se_cell())
        finally:
            self.proc.close()
        return self.meta

    def _failed(self, bench: str, status: str, reason: str, **extra: Any) -> Record:
        return Record(engine=self.info.name, benchmark=bench, category=BY_ID[bench].category,
                      status=status, reason=reason, **extra)  # type: ignore[arg-type]

    # -- cells -----------------------------------------------------------------------------

    def query_cell(self, qid: str) -> Record:
        info, proto = self.info, self.protocol
        query = _query_text(info, qid)
        mode = "cold" if proto.cold else "warm"
        if qid in info.unsupported:
            return self._failed(qid, "unsupported", info.unsupported[qid], query=query, mode=mode)
        expected = self.refs[qid]
        if (down := self._revive()) is not None:
            return self._failed(qid, "error", down, query=query, mode=mode)
        try:
            first: dict[str, Any] = {}
            for _ in range(max(1, proto.warmup)):
                first = self.proc.call(proto.timeout_s, op="query", qid=qid, answer=True)
            answer = verify.normalize(pl.from_arrow(first["answer"]), expected)  # type: ignore[arg-type]
            if proto.save_answers is not None:
                dest = proto.save_answers / info.name / f"{qid}.parquet"
                dest.parent.mkdir(parents=True, exist_ok=True)
                answer.write_parquet(dest)
            verdict = verify.compare(answer, expected)
            if not verdict.ok:
                return self._failed(qid, "wrong", verdict.reason, verified=False, query=query,
                                    mode=mode, rows=answer.height)
            samples: list[int] = []
            memories: list[int] = []
            engine_memories: list[int] = []
            notes = first.get("notes", "")
            cold_note = ""
            for _ in range(proto.repetitions):
                if proto.cold:
                    cold_note = self._cold_restart()
                r = self.proc.call(proto.timeout_s, op="query", qid=qid, answer=False)
                if r["rows"] != expected.height:
                    return self._failed(qid, "wrong", f"a timed repetition returned {r['rows']} rows, "
                                        f"expected {expected.height}", verified=False, query=query)
                samples.append(r["ns"])
                if r["memory"] is not None:
                    memories.append(r["memory"])
                if r["engine_memory"] is not None:
                    engine_memories.append(r["engine_memory"])
            memory = None
            if engine_memories:
                memory = Memory(bytes=max(engine_memories), kind="engine-reported peak")
            elif memories:
                memory = Memory(bytes=max(memories), kind=first["memory_kind"])
            return Record(
                engine=info.name, benchmark=qid, category=BY_ID[qid].category, status="ok",
                verified=True, mode=mode, cold_note=cold_note, samples_ns=samples,
                stats=Stats.of(samples), memory=memory, rows=expected.height, query=query,
                notes=notes,
            )
        except CellTimeout as exc:
            self._recover()
            return self._failed(qid, "timeout", str(exc), query=query, mode=mode)
        except WorkerDied as exc:
            self._recover()
            return self._failed(qid, "error", f"engine crashed: {exc}", query=query, mode=mode)
        except EngineError as exc:
            return self._failed(qid, "error", self._after_error(exc), query=query, mode=mode)

    def _cold_restart(self) -> str:
        self.proc.call(self.protocol.load_timeout_s, op="stop")
        dropped = drop_page_cache()
        self.proc.call(self.protocol.load_timeout_s, op="start")
        if self.info.kind == "in-memory":
            self.proc.call(self.protocol.load_timeout_s, op="load")
            return "in-memory engine: data reloaded before each repetition" + (
                "; OS page cache dropped" if dropped else "; OS page cache not dropped (not permitted)")
        return "engine restarted; " + (
            "OS page cache dropped" if dropped else "OS page cache not dropped (not permitted)")

    def _after_error(self, exc: EngineError) -> str:
        """The cell's reason for an engine error; when the engine's server died under it,
        the engine is restarted for the next cell."""
        if self.proc.servers_alive():
            return str(exc)
        self._recover()
        return f"engine crashed: its server process ended; restarted for the next cell ({exc})"

    def _recover(self) -> None:
        try:
            self._restart()
            self.down = None
        except (CellTimeout, WorkerDied, EngineError) as exc:
            self.proc.kill()  # the next cell will try again from a fresh worker
            self.down = str(exc)

    def _revive(self) -> str | None:
        """Start the engine again if an earlier restart failed; the reason if it still fails."""
        if self.down is None:
            return None
        self._recover()
        return None if self.down is None else f"the engine could not be restarted after a failure: {self.down}"

    def _load_figures(self, fmt: str, baseline: bool) -> dict[str, Any]:
        scratch = self.workdir / "w" / ("baseline" if baseline else "tickbench") / fmt
        r = self.proc.call(self.protocol.load_timeout_s, op="bulk", fmt=fmt, baseline=baseline,
                           scratch=str(scratch))
        seconds = r["ns"] / 1e9
        return {"seconds": seconds, "rows": r["rows"], "input_bytes": r["input_bytes"],
                "rows_per_s": r["rows"] / seconds, "mb_per_s": r["input_bytes"] / 1e6 / seconds,
                "detail": r["detail"]}

    def w_cell(self) -> Record:
        if "W" in self.info.unsupported:
            return self._failed("W", "not_applicable", self.info.unsupported["W"])
        figures: dict[str, Any] = {}
        expected_rows = sum(self.ds.manifest.csv[t]["rows"] for t in self.ds.manifest.csv)
        if (down := self._revive()) is not None:
            return self._failed("W", "error", down)
        try:
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
                        return self._failed("W", "wrong", f"{fmt}: {mine['rows']} rows committed, "
                                            f"expected {expected_rows}", figures=figures)
                mine = sorted((m for m, _ in runs), key=lambda f: f["seconds"])[len(runs) // 2]
                base_s = statistics.median(b["seconds"] for _, b in runs)
                mine["samples_s"] = [m["seconds"] for m, _ in runs]
                mine["baseline_samples_s"] = [b["seconds"] for _, b in runs]
                mine["baseline_seconds"] = base_s
                mine["ratio_to_baseline"] = mine["seconds"] / base_s
                figures[fmt] = mine
        except CellTimeout as exc:
            self._recover()
            return self._failed("W", "timeout", str(exc), figures=figures)
        except WorkerDied as exc:
            self._recover()
            return self._failed("W", "error", f"engine crashed: {exc}", figures=figures)
        except EngineError as exc:
            return self._failed("W", "error", self._after_error(exc), figures=figures)
        csv = figures["csv"]
        return Record(engine=self.info.name, benchmark="W", category="write/storage", status="ok",
                      verified=True, samples_ns=[round(csv["seconds"] * 1e9)], figures=figures)

    def se_cell(self) -> Record:
        if "SE" in self.info.unsupported:
            return self._failed("SE", "not_applicable", self.info.unsupported["SE"])
        if (down := self._revive()) is not None:
            return self._failed("SE", "error", down)
        try:
            r = self.proc.call(self.protocol.load_timeout_s, op="storage")
        except CellTimeout as exc:
            self._recover()
            return self._failed("SE", "timeout", str(exc))
        except WorkerDied as exc:
            self._recover()
            return self._failed("SE", "error", f"engine crashed: {exc}")
        except EngineError as exc:
            return self._failed("SE", "error", self._after_error(exc))
        measured: dict[str, int] = r["bytes"]
        primary_key = next(iter(measured))
        sizes = self.ds.sizes(self.params.days("month"))
        primary = measured[primary_key]
        figures = {
            "bytes": measured, "measured": primary_key, "engine_bytes": primary,
            "csv_bytes": sizes["csv_bytes"], "parquet_bytes": sizes["parquet_bytes"],
            "rows": sizes["rows"],
            "pct_of_csv": 100.0 * primary / sizes["csv_bytes"] if sizes["csv_bytes"] else None,
            "pct_of_parquet": 100.0 * primary / sizes["parquet_bytes"],
        }
        return Record(engine=self.info.name, benchmark="SE", category="write/storage", status="ok",
                      verified=True, figures=figures)
