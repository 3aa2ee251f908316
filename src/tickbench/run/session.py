"""One ``tickbench run``: dataset, engines, the suites given to it, and the results.

The run knows suites only through :class:`~tickbench.run.cell.RunnableSuite`: the caller (the
command line, or a test) picks them from the suite registry and hands them over in
:class:`RunConfig`."""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tickbench.data.dataset import Dataset, shown
from tickbench.data.locks import LockBusy, LockRefused, exclusive
from tickbench.datasets.base import ReferenceAnswers, RunParams, open_dataset, params_for
from tickbench.engines.base import ENDPOINTS_ENV, Endpoint, EngineUnavailable, Server
from tickbench.engines.registry import adapter, adapter_class, availability, engine_infos
from tickbench.engines.server import SHARED_TMP, reachable_work_root, stop_leftovers
from tickbench.results import DatasetInfo, Record, Results, RunSettings, V1Names, read_results
from tickbench.run import engine_process, environment
from tickbench.run.cell import CellContext, Options, PhaseClock, Protocol, RunnableSuite, free_bytes
from tickbench.run.memory import own_peak_rss
from tickbench.signals import unprinted_when_lost


def options_json(options: dict[str, Options]) -> dict[str, dict[str, Any]]:
    """Option values as JSON (tuples as lists)."""
    def plain(v: Any) -> Any:
        return [plain(x) for x in v] if isinstance(v, tuple | list) else v
    return {suite: {k: plain(v) for k, v in opts.items()} for suite, opts in options.items()}


class RunError(Exception):
    """A run that cannot start: the message names the bad input and what to do."""


@dataclass
class RunConfig:
    """One run, as asked for: its engines, dataset, output, the suites it records (in order)
    and their options, the measurement protocol, and whether it continues an earlier run."""

    engines: list[str]
    data: Path
    out: Path
    seed: int
    #: The suites the run records, in report order (``--suite all``: every suite).
    suites: tuple[RunnableSuite, ...]
    #: The ``--suite`` value as given (recorded, and what ``--resume`` picks the suites by).
    suite: str
    protocol: Protocol = field(default_factory=Protocol)
    verify_dataset: bool = True
    resume: bool = False
    #: With ``resume``: engines run again from the start, their earlier records dropped.
    redo: list[str] = field(default_factory=list)
    options: dict[str, Options] = field(default_factory=dict)  # by suite, then option
    #: External endpoints by engine: servers the user runs, used as they are (no start/stop).
    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    #: How a version-1 results file being resumed is migrated (from the suite registry).
    v1: V1Names | None = None

    def opts(self, suite: RunnableSuite) -> Options:
        """``suite``'s option values: its defaults, with the run's in place."""
        return {**suite.defaults(), **self.options.get(suite.name, {})}


Progress = Callable[[str, int, int], None]  # (label, done, total)


def check_engines(names: list[str]) -> None:
    known = engine_infos()
    bad = [n for n in names if n not in known]
    if bad:
        raise RunError(f"--engines: unknown engine {', '.join(bad)}; known: {', '.join(known)} "
                       "(see `tickbench engines`)")
    if not names:
        raise RunError("--engines: no engine named")


COLD_REFUSED = ("--cold restarts the engine's server and drops the OS page cache before each repetition, "
                "and tickbench never restarts a server it does not run; run warm against an endpoint")


def check_endpoints(engines: list[str], suite: str, suites: Sequence[RunnableSuite], cold: bool,
                    endpoints: dict[str, Endpoint], allowed: Sequence[RunnableSuite] = ()) -> None:
    """Refuse, before anything is generated or loaded, a run that would restart, kill or
    reconfigure a server the user runs, or an endpoint for an engine that cannot use one.

    ``allowed``: every suite the caller knows, for the hint of a refusal (those of them that
    may run against an endpoint are named)."""
    if not endpoints:
        return
    for name, endpoint in endpoints.items():
        where = f"--endpoint {name}={endpoint.address}"
        if name not in engine_infos():
            raise RunError(f"{where}: unknown engine {name}; known: {', '.join(engine_infos())}")
        if not adapter_class(name).external_endpoint:
            able = [n for n in engine_infos() if adapter_class(n).external_endpoint]
            raise RunError(f"{where}: the {name} engine cannot run against an external endpoint; "
                           f"these can: {', '.join(able)}")
        if name not in engines:
            raise RunError(f"{where}: {name} is not among --engines {','.join(engines)}; add it there")
    named = ", ".join(f"{n}={e.address}" for n, e in endpoints.items())
    if cold:
        raise RunError(f"--cold with --endpoint {named}: refused: {COLD_REFUSED}")
    refused = [s for s in suites if s.endpoint_refusal is not None]
    if refused:
        reasons = "; ".join(f"{s.name}: {s.endpoint_refusal}" for s in refused)
        able = [s.name for s in allowed if s.endpoint_refusal is None]
        hint = (f"run --suite {' or '.join(able)} against it" if able
                else "run a suite that allows an external endpoint against it")
        raise RunError(f"--suite {suite} with --endpoint {named}: refused for an external endpoint ({reasons}); "
                       + hint)


@contextlib.contextmanager
def endpoints_env(endpoints: dict[str, Endpoint]) -> Iterator[None]:
    """``$TICKBENCH_ENDPOINTS`` for the engine processes of the run (no credentials in it)."""
    before = os.environ.get(ENDPOINTS_ENV)
    if endpoints:
        os.environ[ENDPOINTS_ENV] = json.dumps({n: e.as_json() | {"user": e.user} for n, e in endpoints.items()})
    else:
        os.environ.pop(ENDPOINTS_ENV, None)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENDPOINTS_ENV, None)
        else:
            os.environ[ENDPOINTS_ENV] = before


def preflight_endpoints(cfg: RunConfig, ds: Dataset, params: RunParams) -> None:
    """Each external endpoint answers and holds no table of tickbench's names that tickbench did
    not create; refused (naming the engine, the endpoint and the table) before anything loads."""
    for name in cfg.endpoints:
        with tempfile.TemporaryDirectory(prefix="tickbench-preflight-") as tmp:
            try:
                adapter(name, Path(tmp), ds, params).check_endpoint_only()
            except EngineUnavailable as exc:
                raise RunError(f"--engines {name}: {exc}") from None


def check_protocol(repetitions: object, timeout_s: object, load_timeout_s: object, cell_budget_s: object,
                   where: str = "", warmup: object = 1, warmup_s: object = 0.0) -> None:
    """Refuse measurement settings a run cannot use, the same on the command line and in a
    results file being resumed (``where`` names it): at least one repetition and one warm-up
    run; every time limit a finite number of seconds above zero (``nan`` or ``inf`` would make
    results.json unreadable, or a cell unbounded), the warm-up's seconds finite and not below
    zero."""
    for flag, count in (("--repetitions", repetitions), ("--warmup", warmup)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise RunError(f"{where}{flag} {count}: must be at least 1")
    if isinstance(warmup_s, bool) or not isinstance(warmup_s, int | float) or not math.isfinite(warmup_s) \
            or warmup_s < 0:
        raise RunError(f"{where}--warmup-seconds {warmup_s}: must be a finite number of seconds, 0 or more")
    for flag, value in (("--timeout", timeout_s), ("--load-timeout", load_timeout_s),
                        ("--cell-budget", cell_budget_s)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            raise RunError(f"{where}{flag} {value}: must be a finite, positive number of seconds")


def settings_of(cfg: RunConfig) -> RunSettings:
    """What the results record of the run's configuration (what ``--resume`` reads back)."""
    p = cfg.protocol
    return RunSettings(engines=cfg.engines, data=str(cfg.data.resolve()), seed=cfg.seed, suite=cfg.suite,
                       repetitions=p.repetitions, warmup=p.warmup,
                       warmup_s=None if math.isinf(p.warmup_s) else p.warmup_s, timeout_s=p.timeout_s,
                       load_timeout_s=p.load_timeout_s, load_repetitions=p.load_repetitions, cold=p.cold,
                       save_answers=p.save_answers is not None, cell_budget_s=p.cell_budget_s,
                       options=options_json({s.name: cfg.opts(s) for s in cfg.suites}),
                       endpoints={n: e.as_json() for n, e in cfg.endpoints.items()})


#: The largest engine working directory measured, as a multiple of the dataset's size on disk:
#: PostgreSQL's at SF 1, 60 GB beside the 9.3 GB dataset (the month uncompressed, then W's and SE's
#: databases of their own).
WORKDIR_PER_DATASET = 6.5


def disk_shortfall(cfg: RunConfig) -> str | None:
    """A warning when the disk under ``cfg.out`` may be too small for the run's server engines
    (``None`` when it has room): a full disk fails cells late in a long run."""
    servers = [n for n in cfg.engines if n not in cfg.endpoints and issubclass(adapter_class(n), Server)]
    if not servers or not Path(cfg.data).is_dir():
        return None
    data_bytes = sum(p.stat().st_size for p in Path(cfg.data).rglob("*") if p.is_file())
    need = WORKDIR_PER_DATASET * data_bytes
    free = free_bytes(cfg.out)
    if free >= need:
        return None
    return (f"{free / 1e9:.1f} GB free under {cfg.out}, and a server engine's working directory can take "
            f"{WORKDIR_PER_DATASET:g}× the dataset ({need / 1e9:.1f} GB here; PostgreSQL's did at SF 1): "
            f"{', '.join(servers)} may run out of disk. A cell that does says so; free space and run it again "
            f"with `tickbench run --resume {cfg.out} --redo ENGINE`")


def resume_config(out: Path, known: Mapping[str, RunnableSuite], redo: list[str] | None = None,
                  v1: V1Names | None = None) -> RunConfig:
    """The configuration of the interrupted run in ``out``, to continue it, with its suites
    picked from ``known`` (every suite, by name); the engines in ``redo`` are run again from the
    start (e.g. after a full disk failed some of their cells)."""
    path = out / "results.json"
    if not path.is_file():
        raise RunError(f"--resume {out}: no results.json there; nothing to resume")
    c = read_results(path, v1).config
    if c is None:
        raise RunError(f"--resume {out}: its results.json records no run configuration")
    where = f"--resume {out}: its results.json records "
    try:
        check_engines(list(c.engines))
    except RunError as exc:
        raise RunError(where + str(exc)) from None
    # protocol 1's files record no warm-up seconds: their warm-up was ``warmup`` runs, unbounded
    warmup_s = math.inf if c.warmup_s is None else c.warmup_s
    check_protocol(c.repetitions, c.timeout_s, c.load_timeout_s, c.cell_budget_s, where, warmup=c.warmup,
                   warmup_s=c.warmup_s or 0.0)
    if isinstance(c.seed, bool) or not isinstance(c.seed, int) or not 0 <= c.seed < 2**63:
        raise RunError(f"{where}--seed {c.seed}: must be an integer in [0, 2**63)")
    unknown = [e for e in redo or [] if e not in c.engines]
    if unknown:
        raise RunError(f"--redo {','.join(unknown)}: not an engine of the run in {out} "
                       f"({','.join(c.engines)})")
    if c.suite != "all" and c.suite not in known:
        raise RunError(f"--resume {out}: the run's suite {c.suite} is not one this tickbench has "
                       f"({', '.join(known)})")
    suites = tuple(known.values()) if c.suite == "all" else (known[c.suite],)
    return RunConfig(
        engines=list(c.engines), data=Path(c.data), out=out, seed=c.seed, suites=suites, suite=c.suite,
        protocol=Protocol(repetitions=c.repetitions, warmup=c.warmup, warmup_s=warmup_s, timeout_s=c.timeout_s,
                          load_timeout_s=c.load_timeout_s, load_repetitions=c.load_repetitions,
                          cold=c.cold, save_answers=out / "answers" if c.save_answers else None,
                          cell_budget_s=c.cell_budget_s),
        resume=True,
        redo=list(redo or []),
        options=_options_from_json(suites, c.options, where),
        # The user name is not recorded: it comes from the engine's usual variables (PGUSER …).
        endpoints={n: Endpoint.from_json(e) for n, e in c.endpoints.items()},
        v1=v1,
    )


def _options_from_json(suites: Sequence[RunnableSuite], raw: Mapping[str, Any], where: str) -> dict[str, Options]:
    """The suites' options as a results file records them, each checked as its flag is on the
    command line (a refusal names the flag and ``where``)."""
    if not isinstance(raw, Mapping) or not all(isinstance(v, Mapping) for v in raw.values()):
        raise RunError(f"{where}options that are not a table of tables")
    try:
        return {s.name: s.options_from_json(dict(raw.get(s.name, {}))) for s in suites}
    except ValueError as exc:  # OptionError, a ValueError, names the flag
        raise RunError(where + str(exc)) from None


class RunInterrupted(BaseException):
    """The run was asked to stop (SIGINT, SIGTERM or SIGHUP): the current engine was stopped,
    its unfinished cells recorded as ``interrupted`` (``--resume`` runs them), and
    ``results.json`` left valid. A ``BaseException``, so no cell's error handling takes it."""

    def __init__(self, signame: str, interrupted: int = 0) -> None:
        super().__init__(signame)
        self.signame = signame
        self.interrupted = interrupted


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_INTERRUPTED: list[str] = []  # the signal stopping the run under way, if one is


def raise_if_interrupted() -> None:
    """Raise :class:`RunInterrupted` if a signal is stopping the run. The handler's own raise is
    lost when it lands in a weakref callback or a ``__del__`` (Python prints it and goes on); the
    next cell's record then stops the run instead of being kept."""
    if _INTERRUPTED:
        raise RunInterrupted(_INTERRUPTED[0])


@contextlib.contextmanager
def stopping_on_signals() -> Iterator[None]:
    """While the run goes on, the first SIGINT, SIGTERM or SIGHUP stops it: every engine process
    (and its servers) is killed and :class:`RunInterrupted` raised in the runner; a further
    signal changes nothing. Outside the main thread (no handlers there) this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        if _INTERRUPTED:
            return
        _INTERRUPTED.append(signal.Signals(signum).name)
        engine_process.stop_all()
        raise RunInterrupted(_INTERRUPTED[0])

    before = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        with unprinted_when_lost(RunInterrupted):  # a lost raise: the next record stops the run
            yield
    finally:
        for sig, old in before.items():
            signal.signal(sig, old)
        _INTERRUPTED.clear()
        engine_process.resume_normal()


LOCK_FILE = ".tickbench-run.lock"  # in --out, held for the life of a run


def check_out(out: Path, resume: bool) -> None:
    """Refuse an ``--out`` a run must not write into: a file, or (for a new run) a directory
    that holds something but no ``results.json`` (files tickbench did not make, which a run
    would otherwise take for its own: a lock, a work root, a server's pid record)."""
    if out.is_symlink() and not out.exists():
        raise RunError(f"--out {out}: a symbolic link to nothing; choose a directory")
    if out.exists() and not out.is_dir():
        raise RunError(f"--out {out}: is a file, not a directory; choose a new or empty directory")
    if resume or not out.is_dir() or (out / "results.json").exists():
        return
    try:
        entries = sorted(p.name for p in out.iterdir())
    except OSError as exc:
        raise RunError(f"--out {out}: cannot be read ({exc.strerror}); choose a directory you can write") from None
    if entries:
        shown = ", ".join(entries[:3]) + (f" and {len(entries) - 3} more" if len(entries) > 3 else "")
        raise RunError(f"--out {out}: not empty ({shown}) and holds no results.json; a run writes into a new or "
                       "empty directory, or continues its own with --resume: choose another --out")


@contextlib.contextmanager
def locked(out: Path) -> Iterator[None]:
    """An exclusive lock on ``out`` for the life of a run: a second run into the same directory
    (a second ``--resume``) is refused, naming the one that holds it. The lock is a regular file
    the run creates (never a link followed). A disk too full to hold even the lock, or one that
    cannot be written, ends the run before it starts, naming it."""
    path = out / LOCK_FILE
    held = contextlib.ExitStack()
    try:
        out.mkdir(parents=True, exist_ok=True)
        held.enter_context(exclusive(path, f"pid {os.getpid()}"))
    except LockBusy as busy:
        raise RunError(f"--out {out}: another tickbench run ({busy.holder}) is using it; wait for it to end, "
                       "or choose another --out") from None
    except LockRefused as exc:
        raise RunError(f"--out {out}: {exc}") from None
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise RunError(f"the disk under {out} is full ({free_bytes(out) / 1e9:.1f} GB free): {out} could not "
                           "be made; free space there, or choose an --out on another disk") from None
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EEXIST):
            raise RunError(f"--out {out}: cannot be written ({exc.strerror}); choose a directory you can "
                           "write") from None
        raise
    with held:
        yield


def check_dataset_kind(cfg: RunConfig, ds: Dataset) -> None:
    """Refuse, before anything loads, suites that do not run on the dataset's kind (the published
    suite on a market dataset, the market suite on the paper's)."""
    wrong = [s for s in cfg.suites if s.dataset_kind != ds.kind]
    if wrong and cfg.suite == "all":  # --suite all: the suites of the dataset's kind
        cfg.suites = tuple(s for s in cfg.suites if s.dataset_kind == ds.kind)
        wrong = []
    if wrong or not cfg.suites:
        names = ", ".join(s.name for s in wrong) or cfg.suite
        kinds = ", ".join(sorted({s.dataset_kind for s in wrong})) or "another kind of"
        raise RunError(f"--suite {names} runs on the {kinds} dataset, and {cfg.data} holds a {ds.kind} dataset; "
                       f"generate one with `tickbench generate --dataset {kinds}` or choose a suite of the "
                       f"{ds.kind} dataset")


def run(cfg: RunConfig, progress: Progress | None = None) -> Results:
    """Run the suite on every engine and write ``results.json`` after every cell.

    With ``cfg.resume`` the run continues the one recorded in ``cfg.out``: cells already
    recorded are kept as they are and not run again (an ``interrupted`` cell is run again).
    A signal stops the run (:class:`RunInterrupted`), leaving ``results.json`` valid."""
    check_engines(cfg.engines)
    if not cfg.suites:
        raise RunError("no suite to run")
    check_endpoints(cfg.engines, cfg.suite, cfg.suites, cfg.protocol.cold, cfg.endpoints)
    ds = open_dataset(cfg.data, verify_content=cfg.verify_dataset)
    check_dataset_kind(cfg, ds)
    params = params_for(ds, cfg.seed)
    with endpoints_env(cfg.endpoints):
        preflight_endpoints(cfg, ds, params)
        if cfg.resume and not (cfg.out / "results.json").is_file():
            raise RunError(f"--resume {cfg.out}: no results.json there; nothing to resume")
        check_out(cfg.out, cfg.resume)
        with locked(cfg.out), stopping_on_signals():
            return _run(cfg, ds, params, progress)


def _run(cfg: RunConfig, ds: Dataset, params: RunParams, progress: Progress | None) -> Results:
    m = ds.manifest
    results_path = cfg.out / "results.json"
    if cfg.resume:
        results = read_results(results_path, cfg.v1)
        if results.dataset.content_hash != m.content_hash:
            raise RunError(f"--resume {cfg.out}: the run used dataset {results.dataset.content_hash}, "
                           f"{cfg.data} holds {m.content_hash}")
        if cfg.redo:  # dropped only now that the run is known to continue: a refused resume keeps them
            results.records = [r for r in results.records if r.engine not in cfg.redo]
            for name in cfg.redo:
                results.environment.engines.pop(name, None)
        results.records = [r for r in results.records if r.status != "interrupted"]  # run again
    elif results_path.exists():
        raise RunError(f"--out {cfg.out}: already holds results.json; choose another directory, "
                       f"or continue that run with `tickbench run --resume {cfg.out}`")
    else:
        results = _new_results(cfg, ds, params)
    if cfg.resume:  # what a killed run of this directory left: its servers, its working directories
        for earlier in _earlier_work_roots(cfg.out, results.run_id):
            stop_leftovers(earlier)
            if earlier != cfg.out / "work":  # this run makes its own; --out/work it reuses
                shutil.rmtree(earlier, ignore_errors=True)
    work = _work_root(cfg, results.run_id)
    done_cells = {(r.engine, r.benchmark) for r in results.records}
    _write(results, results_path, work)
    protocol = cfg.protocol
    if protocol.save_answers is not None:
        protocol = Protocol(**{**protocol.__dict__, "save_answers": cfg.out / "answers"})
    refs = ReferenceAnswers(ds, params)
    infos = engine_infos()
    shared: dict[str, Any] = {}  # run-wide artefacts of the suites, shared by every engine

    for name in cfg.engines:
        cls = adapter_class(name)
        cells = engine_cells(name, cfg)
        todo_all = [(s, b) for s, b in cells if (name, b) not in done_cells]
        if not todo_all:
            continue
        done = len(cells) - len(todo_all)
        recorded: set[str] = set()
        workdir = work / name
        meta: dict[str, Any] = {}

        def announce(what: str, name: str = name, total: int = len(cells)) -> None:
            if progress:
                progress(f"{name}: {what}", done, total)  # noqa: B023 -- this engine's live count, as on_record's

        clock = PhaseClock(meta, announce)

        def on_record(rec: Record, name: str = name, total: int = len(cells), clock: PhaseClock = clock,
                      recorded: set[str] = recorded, workdir: Path = workdir) -> None:
            nonlocal done
            if rec.status != "interrupted":  # those are what a stopped run records
                raise_if_interrupted()
            clock.lap(rec.benchmark)
            results.records.append(rec)
            recorded.add(rec.benchmark)
            _write(results, results_path, workdir)
            done += 1
            if progress:
                progress(f"{name}: {rec.benchmark}", done, total)

        # An external endpoint needs no local install: the preflight found it answering.
        avail = availability(name) if name not in cfg.endpoints else None
        if avail is not None and not avail.available:
            for suite, bid in todo_all:
                on_record(Record(engine=name, benchmark=bid, suite=suite.name, category=suite.category(bid),
                                 status="unavailable", reason=avail.reason))
            results.environment.engines[name] = {"available": False, "kind": infos[name].kind, "reason": avail.reason}
            continue
        if workdir.exists():
            shutil.rmtree(workdir)
        try:
            for suite in cfg.suites:
                todo = [b for s, b in todo_all if s is suite]
                if name in cfg.endpoints:
                    for bench in [b for b in todo if b in suite.endpoint_unmeasured]:
                        todo.remove(bench)
                        on_record(Record(engine=name, benchmark=bench, suite=suite.name,
                                         category=suite.category(bench), status="unsupported",
                                         reason=suite.endpoint_unmeasured[bench]))
                if not todo:
                    continue
                ctx = CellContext(suite=suite, info=infos[name], engine=cls, ds=ds, params=params, refs=refs,
                                  workdir=workdir / suite.name, protocol=protocol, opts=cfg.opts(suite),
                                  seed=cfg.seed, on_record=on_record, shared=shared.setdefault(suite.name, {}),
                                  meta=meta, clock=clock)
                reason = suite.refusal(cls, infos[name])
                if reason is not None:
                    for bench in todo:
                        ctx.record(bench, "unsupported", reason)
                    continue
                suite.run(ctx, todo)
        except RunInterrupted as stop:
            engine_process.stop_all()
            stop_leftovers(workdir)
            why = (f"interrupted by {stop.signame} before it finished; `tickbench run --resume {cfg.out}` runs it")
            left = [(s, b) for s, b in todo_all if b not in recorded]
            for suite, bench in left:
                on_record(Record(engine=name, benchmark=bench, suite=suite.name, category=suite.category(bench),
                                 status="interrupted", reason=why))
            results.environment.engines[name] = {"available": True, "kind": infos[name].kind, **meta,
                                                 "interrupted": stop.signame}
            _write(results, results_path, workdir)
            _remove_work_root(cfg.out, work)
            raise RunInterrupted(stop.signame, len(left)) from None
        if "version" not in meta:
            meta.update(_engine_meta(name))
        results.environment.engines[name] = {"available": True, "kind": infos[name].kind, **meta}
        results.environment.runner_peak_rss_bytes = own_peak_rss()
        _write(results, results_path, workdir)
        shutil.rmtree(workdir, ignore_errors=True)
    _remove_work_root(cfg.out, work)
    return results


WORK_ROOT_FILE = ".work-root"  # in --out: where the engines' working directories are, when not in --out/work
WORK_MARK = ".tickbench-run"  # in a work root: the id of the run that made it


def _work_root(cfg: RunConfig, run_id: str) -> Path:
    """The root of the engines' working directories: ``--out/work``, or, when a server engine of
    the run could not reach it (a private ``--out``), a directory of its own that it can
    (:func:`tickbench.engines.server.reachable_work_root`), recorded in ``--out`` so that a
    resumed run finds what a killed one left there. Either is marked with the run's id: only a
    root so marked is ever searched for leftover servers or removed by a later ``--resume``."""
    wanted = cfg.out / "work"
    servers = [n for n in cfg.engines if n not in cfg.endpoints and issubclass(adapter_class(n), Server)]
    root, note = reachable_work_root(wanted) if servers else (wanted, "")
    root.mkdir(parents=True, exist_ok=True)
    try:
        (root / WORK_MARK).write_text(run_id + "\n")
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        shutil.rmtree(root, ignore_errors=True)  # made (or marked, on --resume) by this run alone
        raise RunError(f"the disk under {cfg.out} is full ({free_bytes(cfg.out) / 1e9:.1f} GB free): the run's "
                       f"working directory {root} could not be marked; free space there, then "
                       f"`tickbench run --resume {cfg.out}`") from None
    if root != wanted:
        (cfg.out / WORK_ROOT_FILE).write_text(str(root))
        print_note(note)
    return root


def _made_by(root: Path, run_id: str) -> bool:
    """Whether ``root`` is a real directory (no link) that the run ``run_id`` made (its mark)."""
    mark = root / WORK_MARK
    try:
        return (not root.is_symlink() and root.is_dir() and not mark.is_symlink() and mark.is_file()
                and mark.read_text().strip() == run_id)
    except OSError:
        return False


def _earlier_work_roots(out: Path, run_id: str) -> list[Path]:
    """The working-directory roots an earlier, killed run of ``out`` (run ``run_id``) made and
    left: ``--out/work`` and the root its ``.work-root`` names, each only when it bears that
    run's mark. Anything else there (a directory the run did not make, a link, a root outside
    the machine's shared temporary directory) is refused, never searched, followed or removed."""
    found: list[Path] = []
    work = out / "work"
    if work.is_symlink() or work.exists():
        if not _made_by(work, run_id):
            raise RunError(f"--resume {out}: {work} is not a working directory a run of {out} made (no mark of "
                           f"run {run_id} in it{', a symbolic link' if work.is_symlink() else ''}); tickbench "
                           "acts on nothing it did not make: remove it, then resume")
        found.append(work)
    record = out / WORK_ROOT_FILE
    if record.is_symlink() or record.exists():
        try:
            text = record.read_text().strip() if not record.is_symlink() else ""
        except (OSError, UnicodeDecodeError):
            text = ""
        root = Path(text)
        if root.is_symlink() or root.exists():
            shared = Path(SHARED_TMP).resolve()
            if not (text and root.is_absolute() and root.parent.resolve() == shared
                    and root.name.startswith("tickbench-work-") and _made_by(root, run_id)):
                raise RunError(f"--resume {out}: its {WORK_ROOT_FILE} names {shown(text, 400)}, not a working "
                               f"directory a run of {out} made (one under {SHARED_TMP} marked with run {run_id}); "
                               f"tickbench acts on nothing it did not make: remove {record}, then resume")
            found.append(root)
    return found


def _remove_work_root(out: Path, work: Path) -> None:
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(out / "work", ignore_errors=True)
    (out / WORK_ROOT_FILE).unlink(missing_ok=True)


def print_note(text: str) -> None:
    """A note for the user on standard error (the run goes on)."""
    print(f"note: {text}", file=sys.stderr)


def _write(results: Results, path: Path, workdir: Path) -> None:
    """Write ``results.json``; on a full disk, remove the engine's working directory (what filled
    it) and try once more, and when that fails too, stop the run naming the disk."""
    try:
        results.write(path)
        return
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
    stop_leftovers(workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    try:
        results.write(path)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        raise RunError(f"the disk under {path.parent} is full ({free_bytes(path.parent) / 1e9:.1f} GB free even "
                       f"after removing {workdir}): {path.name} could not be written; free space there, then "
                       f"`tickbench run --resume {path.parent}`") from None


def engine_cells(name: str, cfg: RunConfig) -> list[tuple[RunnableSuite, str]]:
    """Every (suite, benchmark id) the run records for engine ``name``, in run order."""
    cls = adapter_class(name)
    return [(s, b) for s in cfg.suites for b in s.cell_ids(cfg.opts(s), cls)]


def _engine_meta(name: str) -> dict[str, Any]:
    """The version of an engine whose suites did not record it (a suite that starts the
    engine reports the version it ran)."""
    try:
        return {"version": adapter_class(name).probe()}
    except Exception as exc:  # recorded, not fatal: the cells carry their own status
        return {"version": None, "probe_error": str(exc)}


def _new_results(cfg: RunConfig, ds: Dataset, params: RunParams) -> Results:
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
        config=settings_of(cfg),
    )
