"""One ``tickbench run``: dataset, engines, suite, results and reports."""

from __future__ import annotations

import datetime as dt
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tickbench.data.dataset import Dataset
from tickbench.engines.registry import adapter_class, availability, engine_infos
from tickbench.results import Dataset as DatasetInfo
from tickbench.results import Record, Results, read_results
from tickbench.run import environment
from tickbench.run.beyond import BeyondRun, ScaledData, scaled_datasets
from tickbench.run.published import EngineRun, Protocol, ReferenceAnswers
from tickbench.suites.beyond import BEYOND_SUITES, BeyondOptions, cell_ids
from tickbench.suites.published import BENCHMARKS, BY_ID, QueryParams, query_params

SUITES = ("published", *BEYOND_SUITES, "all")
IMPLEMENTED_SUITES = ("published", *BEYOND_SUITES)


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
    resume: bool = False
    beyond: BeyondOptions = field(default_factory=BeyondOptions)

    def suites(self) -> list[str]:
        """The suites the run records: ``all`` is the published suite and those beyond it."""
        return ["published", *BEYOND_SUITES] if self.suite == "all" else [self.suite]


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


def config_of(cfg: RunConfig) -> dict[str, Any]:
    p = cfg.protocol
    return {"engines": cfg.engines, "data": str(cfg.data.resolve()), "seed": cfg.seed, "suite": cfg.suite,
            "repetitions": p.repetitions, "warmup": p.warmup, "timeout_s": p.timeout_s,
            "load_timeout_s": p.load_timeout_s, "load_repetitions": p.load_repetitions, "cold": p.cold,
            "save_answers": p.save_answers is not None, "beyond": cfg.beyond.as_dict()}


def resume_config(out: Path) -> RunConfig:
    """The configuration of the interrupted run in ``out``, to continue it."""
    path = out / "results.json"
    if not path.is_file():
        raise RunError(f"--resume {out}: no results.json there; nothing to resume")
    c = read_results(path).config
    if not c:
        raise RunError(f"--resume {out}: its results.json records no run configuration")
    return RunConfig(
        engines=list(c["engines"]), data=Path(c["data"]), out=out, seed=int(c["seed"]), suite=c["suite"],
        protocol=Protocol(repetitions=c["repetitions"], warmup=c["warmup"], timeout_s=c["timeout_s"],
                          load_timeout_s=c["load_timeout_s"], load_repetitions=c["load_repetitions"],
                          cold=c["cold"], save_answers=out / "answers" if c["save_answers"] else None),
        resume=True, beyond=BeyondOptions.from_dict(c.get("beyond", {})),
    )


def run(cfg: RunConfig, progress: Progress | None = None) -> Results:
    """Run the suite on every engine and write ``results.json`` after every cell.

    With ``cfg.resume`` the run continues the one recorded in ``cfg.out``: cells already
    recorded are kept as they are and not run again."""
    check_engines(cfg.engines)
    check_suite(cfg.suite)
    ds = Dataset.open(cfg.data, verify_content=cfg.verify_dataset)
    params = query_params(ds.params, cfg.seed)
    m = ds.manifest
    results_path = cfg.out / "results.json"
    if cfg.resume:
        results = read_results(results_path)
        if results.dataset.content_hash != m.content_hash:
            raise RunError(f"--resume {cfg.out}: the run used dataset {results.dataset.content_hash}, "
                           f"{cfg.data} holds {m.content_hash}")
    elif results_path.exists():
        raise RunError(f"--out {cfg.out}: already holds results.json; choose another directory, "
                       f"or continue that run with `tickbench run --resume {cfg.out}`")
    else:
        results = _new_results(cfg, ds, params)
    done_cells = {(r.engine, r.benchmark) for r in results.records}
    cfg.out.mkdir(parents=True, exist_ok=True)
    results.write(results_path)
    protocol = cfg.protocol
    if protocol.save_answers is not None:
        protocol = Protocol(**{**protocol.__dict__, "save_answers": cfg.out / "answers"})
    refs = ReferenceAnswers(ds, params)
    infos = engine_infos()
    suites = cfg.suites()
    scaled: ScaledData | None = None

    for name in cfg.engines:
        cells = engine_cells(name, suites, cfg.beyond)
        cells_per_engine = len(cells)
        todo = [b for b in cells if (name, b) not in done_cells]
        if not todo:
            continue
        done = cells_per_engine - len(todo)

        def on_record(rec: Record, name: str = name, total: int = cells_per_engine) -> None:
            nonlocal done
            results.records.append(rec)
            results.write(results_path)
            done += 1
            if progress:
                progress(f"{name}: {rec.benchmark}", done, total)

        avail = availability(name)
        if not avail.available:
            for bid in todo:
                category = BY_ID[bid].category if bid in BY_ID else bid.split("/")[0]
                on_record(Record(engine=name, benchmark=bid, category=category,
                                 status="unavailable", reason=avail.reason))
            results.environment.engines[name] = {"available": False, "reason": avail.reason}
            continue
        workdir = cfg.out / "work" / name
        if workdir.exists():
            shutil.rmtree(workdir)
        def already_done(bid: str, name: str = name) -> bool:
            return (name, bid) in done_cells

        meta: dict[str, Any] = {}
        if "published" in suites:
            meta = EngineRun(infos[name], ds, params, refs, workdir, protocol, on_record, skip=already_done).run()
        for suite in suites:
            if suite == "published":
                continue
            if suite == "scaling" and scaled is None:
                scaled = scaled_datasets(ds, cfg.beyond.scaling_factor)
            BeyondRun(infos[name], ds, params, refs, workdir / suite, protocol, cfg.beyond, cfg.seed,
                      on_record, skip=already_done, scaled=scaled).run(suite)
        if "published" not in suites:
            meta = _engine_meta(name)
        results.environment.engines[name] = {"available": True, **meta}
        results.write(results_path)
        shutil.rmtree(workdir, ignore_errors=True)
    shutil.rmtree(cfg.out / "work", ignore_errors=True)
    return results


def engine_cells(name: str, suites: list[str], opts: BeyondOptions) -> list[str]:
    """Every benchmark id the run records for engine ``name``, in run order."""
    settings = tuple(adapter_class(name).ingest_durability)
    return [b for s in suites
            for b in ([b.id for b in BENCHMARKS] if s == "published" else cell_ids(s, opts, settings))]


def _engine_meta(name: str) -> dict[str, Any]:
    """The version of an engine the published suite did not start (it reports it itself)."""
    try:
        return {"version": adapter_class(name).probe()}
    except Exception as exc:  # recorded, not fatal: the cells carry their own status
        return {"version": None, "probe_error": str(exc)}


def _new_results(cfg: RunConfig, ds: Dataset, params: QueryParams) -> Results:
    m = ds.manifest
    return Results(
        run_id=uuid.uuid4().hex[:12],
        created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        suite=cfg.suite, seed=cfg.seed,
        repetitions=cfg.protocol.repetitions, timeout_s=cfg.protocol.timeout_s,
        dataset=DatasetInfo(root=str(ds.root), content_hash=m.content_hash, scale=m.scale,
                            seed=m.seed, symbols=m.symbols, source=m.source,
                            generator_version=m.generator_version),
        params=params.as_dict(),
        environment=environment.capture(),
        config=config_of(cfg),
    )
