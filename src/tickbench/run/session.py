"""One ``tickbench run``: dataset, engines, suite, results and reports."""

from __future__ import annotations

import datetime as dt
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tickbench.data.dataset import Dataset
from tickbench.engines.registry import availability, engine_infos
from tickbench.results import Dataset as DatasetInfo
from tickbench.results import Record, Results
from tickbench.run import environment
from tickbench.run.published import EngineRun, Protocol, ReferenceAnswers
from tickbench.suites.published import BENCHMARKS, BY_ID, query_params

SUITES = ("published", "tick-latency", "stream", "concurrency", "scaling", "durability", "all")
IMPLEMENTED_SUITES = ("published",)


class RunError(Exception):
    """A run that cannot start: the message names the bad input and what to do."""


@dataclass
class RunConfig:
    engines: list[str]
    data: Path
    out: Path
    seed: int
    suite: str = "published"
    protocol: Protocol = field(default_factory=Protocol)
    verify_dataset: bool = True


Progress = Callable[[str, int, int], None]  # (label, done, total)


def check_engines(names: list[str]) -> None:
    known = engine_infos()
    bad = [n for n in names if n not in known]
    if bad:
        raise RunError(f"--engines: unknown engine {', '.join(bad)}; known: {', '.join(known)} "
                       "(see `tickbench engines`)")
    if not names:
        raise RunError("--engines: no engine named")


def check_suite(suite: str) -> None:
    if suite not in SUITES:
        raise RunError(f"--suite {suite}: unknown; choose one of {', '.join(SUITES)}")
    if suite not in IMPLEMENTED_SUITES and suite != "all":
        raise RunError(f"--suite {suite}: not implemented yet in this tickbench version; "
                       f"implemented: {', '.join(IMPLEMENTED_SUITES)}")


def run(cfg: RunConfig, progress: Progress | None = None) -> Results:
    """Run the suite on every engine and write ``results.json`` after every cell."""
    check_engines(cfg.engines)
    check_suite(cfg.suite)
    ds = Dataset.open(cfg.data, verify_content=cfg.verify_dataset)
    params = query_params(ds.params, cfg.seed)
    m = ds.manifest
    results = Results(
        run_id=uuid.uuid4().hex[:12],
        created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        suite=cfg.suite, seed=cfg.seed,
        repetitions=cfg.protocol.repetitions, timeout_s=cfg.protocol.timeout_s,
        dataset=DatasetInfo(root=str(ds.root), content_hash=m.content_hash, scale=m.scale,
                            seed=m.seed, symbols=m.symbols, source=m.source,
                            generator_version=m.generator_version),
        params=params.as_dict(),
        environment=environment.capture(),
    )
    cfg.out.mkdir(parents=True, exist_ok=True)
    results_path = cfg.out / "results.json"
    results.write(results_path)
    protocol = cfg.protocol
    if protocol.save_answers is not None:
        protocol = Protocol(**{**protocol.__dict__, "save_answers": cfg.out / "answers"})
    refs = ReferenceAnswers(ds, params)
    infos = engine_infos()
    cells_per_engine = len(BENCHMARKS)

    for name in cfg.engines:
        done = 0

        def on_record(rec: Record, name: str = name) -> None:
            nonlocal done
            results.records.append(rec)
            results.write(results_path)
            done += 1
            if progress:
                progress(f"{name}: {rec.benchmark}", done, cells_per_engine)

        avail = availability(name)
        if not avail.available:
            for b in BENCHMARKS:
                on_record(Record(engine=name, benchmark=b.id, category=BY_ID[b.id].category,
                                 status="unavailable", reason=avail.reason))
            results.environment.engines[name] = {"available": False, "reason": avail.reason}
            continue
        workdir = cfg.out / "work" / name
        if workdir.exists():
            shutil.rmtree(workdir)
        meta = EngineRun(infos[name], ds, params, refs, workdir, protocol, on_record).run()
        results.environment.engines[name] = {"available": True, **meta}
        results.write(results_path)
        shutil.rmtree(workdir, ignore_errors=True)
    return results
