"""The command line: thin commands over the library (SPEC §4 keeps them stable)."""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import importlib
import inspect
import os
import signal
import subprocess
import sys
import tempfile
import time
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.status import Status
from rich.table import Table

from tickbench.data.dataset import (
    DEFAULT_KIND,
    DatasetError,
    GenerationStopped,
    check_scale,
    check_seed,
    forget_stop,
    raise_if_stopped,
    request_stop,
)
from tickbench.datasets.base import generate, kind, kinds, open_dataset
from tickbench.datasets.market.calendar import DEFAULT_UNIVERSE
from tickbench.engines.base import Engine, EngineConfigError, EngineUnavailable, kind_of
from tickbench.engines.registry import adapter_class, availability, engine_infos
from tickbench.report import compare, html, markdown, site
from tickbench.report.summary import merge
from tickbench.report.terminal import print_summary
from tickbench.results import Results, ResultsError
from tickbench.run.cell import Protocol, free_bytes
from tickbench.run.endpoints import EndpointError, merge_endpoints, parse_endpoint, read_config
from tickbench.run.session import (
    RunConfig,
    RunError,
    RunInterrupted,
    check_endpoints,
    check_engines,
    check_out,
    check_protocol,
    disk_shortfall,
    run,
)
from tickbench.signals import unprinted_when_lost
from tickbench.suites.base import OptionError
from tickbench.suites.registry import V1, chosen, read_results, resume_config, suite_names
from tickbench.suites.registry import suites as all_suites

DEFAULT_SCALE = 0.05
DEFAULT_SEED = 7

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="tickbench: benchmark time-series databases on market data.")
console = Console(emoji=False)
err = Console(stderr=True, emoji=False)  # error text such as 'local:x' is not an emoji code


def fail(message: str) -> typer.Exit:
    # escape(): a reason may hold brackets (an engine's error, ``tickbench[kdb]``), not markup.
    # One line: a library's message may hold line breaks.
    err.print(f"[red]error:[/red] {escape(' '.join(message.split()))}", highlight=False, soft_wrap=True)
    return typer.Exit(2)


@app.callback()
def _check_engine_folders() -> None:
    # Every command reads the engine folders (a plug-in's too): a bad engine.toml (queries_from
    # naming no engine, a cycle) is one line naming the file, not a traceback later.
    try:
        engine_infos()
    except EngineConfigError as exc:
        raise fail(str(exc)) from None


class LineProgress:
    """Progress as plain lines, for a log file or CI, where a live bar shows nothing until the end.

    The subset of rich's Progress that tickbench uses: one line when the description changes, at
    the last step, and otherwise at most every ``every_s`` seconds.
    """

    def __init__(self, label: str, every_s: float = 10.0) -> None:
        self.label, self.every_s = label, every_s
        self.started = self.last = time.monotonic()
        self.tasks: dict[TaskID, dict[str, Any]] = {}

    def add_task(self, description: str, total: float | None = None) -> TaskID:
        task = TaskID(len(self.tasks))
        self.tasks[task] = {"description": description, "completed": 0, "total": total}
        return task

    def update(self, task: TaskID, *, description: str | None = None, completed: float | None = None,
               total: float | None = None) -> None:
        state = self.tasks[task]
        changed = description is not None and description != state["description"]
        for key, value in (("description", description), ("completed", completed), ("total", total)):
            if value is not None:
                state[key] = value
        now = time.monotonic()
        last_step = state["total"] is not None and state["completed"] >= state["total"]
        if changed or last_step or now - self.last >= self.every_s:
            self.last = now
            elapsed = dt.timedelta(seconds=round(now - self.started))
            of = f"/{state['total']:g}" if state["total"] is not None else ""
            err.print(f"{self.label}: {state['description']}  {state['completed']:g}{of}  {elapsed}",
                      highlight=False, markup=False, soft_wrap=True)


@contextmanager
def progress_bar(label: str) -> Iterator[Progress | LineProgress]:
    if not err.is_terminal:
        yield LineProgress(label)
        return
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=False) as bar:
        yield bar


def default_data_dir(scale: float, seed: int, symbols: int, dataset: str = DEFAULT_KIND,
                     universe: int | None = None) -> Path:
    return kind(dataset).default_dir(scale, seed, symbols, universe)


def _generate(out: Path, scale: float, seed: int, symbols: int, jobs: int, cluster: str | None = None,
              dataset: str = DEFAULT_KIND, universe: int | None = None) -> str:
    with progress_bar("generate") as bar:
        task = bar.add_task(f"generating {out}", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        def waiting(holder: str) -> None:
            err.print(f"note: {out} is being written by another tickbench ({holder}); waiting for it, then "
                      "using its dataset", highlight=False, markup=False, soft_wrap=True)

        try:
            manifest = generate(out, scale, seed, symbols, jobs, progress, cluster=cluster, dataset=dataset,
                                universe=universe, on_wait=waiting)
        except GenerationStopped as stop:
            err.print(f"interrupted by {stop.signame} while generating {out}: its workers were stopped and "
                      "nothing was kept", highlight=False, markup=False, soft_wrap=True)
            raise typer.Exit(130) from None
    console.print(f"dataset {out}: {kind(manifest.kind).describe(manifest)}")
    dataset_notes(manifest.kind, manifest.universe)
    return manifest.content_hash


@app.command("generate")
def generate_cmd(
    out: Annotated[Path | None, typer.Option(help="dataset directory (default data/sf<scale>-seed<seed>)")] = None,
    scale: Annotated[float, typer.Option(help="scale factor SF (1 = the published row counts)")] = DEFAULT_SCALE,
    seed: Annotated[int, typer.Option(help="random seed")] = DEFAULT_SEED,
    symbols: Annotated[int, typer.Option(help="paper dataset: extra synthetic instruments (Zipf activity)")] = 0,
    jobs: Annotated[int, typer.Option(help="worker processes")] = 1,
    cluster: Annotated[str | None, typer.Option(
        help="run the partitions on a Dask cluster: its scheduler (tcp://HOST:8786) or local:N worker "
             "processes; --out must be on a filesystem every worker sees")] = None,
    dataset: Annotated[str, typer.Option(
        help="; ".join(f"{k.name}: {k.title}" for k in kinds().values()))] = DEFAULT_KIND,
    universe: Annotated[int | None, typer.Option(
        help=f"market dataset: how many instruments (default {DEFAULT_UNIVERSE:,})")] = None,
) -> None:
    """Write the Parquet dataset (and the bulk-load day as CSV) and print its content hash."""
    try:
        check_scale(scale)
        symbols, universe = kind(dataset).check_options(symbols, universe)
        out = out or default_data_dir(scale, seed, symbols, dataset, universe)
        content_hash = _generate(out, scale, seed, symbols, jobs, cluster, dataset, universe)
    except DatasetError as exc:
        raise fail(str(exc)) from None
    print(content_hash)


def dataset_notes(kind: str, universe: int | None) -> None:
    """Say on standard error what the suites of a dataset's kind will not apply to its universe."""
    if universe is None:
        return
    for suite in all_suites().values():
        if suite.dataset_kind == kind:
            for line in suite.dataset_notes(universe):
                err.print(f"note: --suite {suite.name} on {universe:,} instruments: {line}", highlight=False,
                          soft_wrap=True)


def default_engines() -> list[str]:
    """Every embedded engine that is available here."""
    return [n for n in engine_infos() if kind_of(adapter_class(n)) != "server" and availability(n).available]


def run_cmd(
    engines: Annotated[
        str | None, typer.Option(help="comma-separated engines, or all (default: the embedded ones available here)")
    ] = None,
    suite: Annotated[str, typer.Option(help="|".join(suite_names()))] = "published",
    scale: Annotated[float, typer.Option(help="scale factor when generating")] = DEFAULT_SCALE,
    seed: Annotated[int, typer.Option(help="seed of the data (when generating) and of the probe times")] = DEFAULT_SEED,
    data: Annotated[Path | None, typer.Option(help="use this dataset (checked against its manifest)")] = None,
    out: Annotated[Path | None, typer.Option(help="output directory (default results/<time>)")] = None,
    repetitions: Annotated[int, typer.Option(help="timed repetitions per query")] = 10,
    warmup: Annotated[int, typer.Option(
        envvar="TICKBENCH_WARMUP",
        help="untimed runs of a query before its timed repetitions, at most (the first is verified)")] = 10,
    warmup_seconds: Annotated[float, typer.Option(
        envvar="TICKBENCH_WARMUP_SECONDS",
        help="the warm-up stops after this many seconds, even short of --warmup runs (at least one runs)")] = 1.0,
    timeout: Annotated[float, typer.Option(help="seconds per query repetition before it is a timeout")] = 300.0,
    load_timeout: Annotated[float, typer.Option(
        help="seconds an engine's load (and each W load, SE's store) may take before its cells are a timeout")
    ] = 3600.0,
    cold: Annotated[
        bool, typer.Option(help="restart the engine and drop the page cache before each repetition")
    ] = False,
    cell_budget: Annotated[float, typer.Option(
        help="seconds a cell may take beyond its warm-up: past it, the cell stops and records what it measured")
    ] = 60.0,
    save_answers: Annotated[bool, typer.Option(help="write answers/<engine>/<ID>.parquet")] = False,
    jobs: Annotated[int, typer.Option(help="generator worker processes")] = 2,
    universe: Annotated[int, typer.Option(
        help="instruments of the market dataset when the market suite generates it")] = DEFAULT_UNIVERSE,
    resume: Annotated[
        Path | None, typer.Option(help="continue the interrupted run in this directory (its settings are reused)")
    ] = None,
    redo: Annotated[str | None, typer.Option(
        help="with --resume: run these engines (comma-separated) again from the start, replacing their "
             "records, e.g. once what failed their cells (a full disk) is fixed")] = None,
    endpoint: Annotated[list[str] | None, typer.Option(
        help="ENGINE=HOST:PORT: run ENGINE against a server you run (repeatable, or comma-separated); "
             "no install, start or stop; credentials from the environment only (README: Your own deployment)",
        rich_help_panel="Your own deployment")] = None,
    config: Annotated[Path | None, typer.Option(
        help="a TOML file of [endpoints.<engine>] tables (host, port, user, database, password_env, namespace)",
        rich_help_panel="Your own deployment")] = None,
    keep: Annotated[bool, typer.Option(
        help="leave tickbench's tables on the endpoints after the run (default: dropped)",
        rich_help_panel="Your own deployment")] = False,
    **suite_opts: Any,
) -> None:
    """Generate (or open) the dataset, load each engine, run, verify, write results and reports.

    Each suite's own options follow, grouped under the suite's title."""
    try:
        redo_engines = [e.strip() for e in (redo or "").split(",") if e.strip()]
        if redo is not None and resume is None:
            raise RunError(f"--redo {redo}: applies to a run you continue; add --resume DIR")
        if resume is not None:
            cfg = resume_config(resume, redo_engines)
            _run_and_report(cfg)
            return
        endpoints = merge_endpoints(read_config(config, keep) if config else [],
                          [e for text in endpoint or [] for e in parse_endpoint(text, keep)])
        if engines == "all":
            names = list(engine_infos())
        elif engines:
            names = [e.strip() for e in engines.split(",") if e.strip()]
        else:  # the endpoints' engines when any are given, else the embedded ones available here
            names = list(endpoints) or default_engines()
        check_engines(names)
        if suite not in suite_names():
            raise RunError(f"--suite {suite}: unknown; choose one of {', '.join(suite_names())}")
        picked = chosen(suite)
        check_seed(seed)
        # before any data is generated or loaded
        check_endpoints(names, suite, picked, cold, endpoints, list(all_suites().values()))
        _check_available([n for n in names if n not in endpoints])
        check_protocol(repetitions, timeout, load_timeout, cell_budget, warmup=warmup, warmup_s=warmup_seconds)
        try:
            options = {s.name: {o.name: o.value(suite_opts[o.name]) if o.name in suite_opts else o.default
                                for o in s.options} for s in picked}
        except OptionError as exc:
            raise RunError(str(exc)) from None
        if out is not None:
            check_out(out, resume=False)  # before a dataset is generated for it
        if data is None:  # the dataset of the suites' kind, generated (or reused) at the given scale
            check_scale(scale)
            wanted = {s.dataset_kind for s in picked}
            k = kind(wanted.pop() if len(wanted) == 1 else DEFAULT_KIND)
            size = universe if "universe" in k.options else None
            data = default_data_dir(scale, seed, 0, k.name, size)
            _generate(data, scale, seed, 0, jobs, dataset=k.name, universe=size)
        out = out or Path("results") / dt.datetime.now().strftime("run-%Y%m%d-%H%M%S")
        cfg = RunConfig(
            engines=names, data=data, out=out, seed=seed, suites=picked, suite=suite,
            protocol=Protocol(repetitions=repetitions, warmup=warmup, warmup_s=warmup_seconds, timeout_s=timeout,
                              load_timeout_s=load_timeout, cold=cold,
                              save_answers=out / "answers" if save_answers else None, cell_budget_s=cell_budget),
            options=options, endpoints=endpoints, v1=V1,
        )
        _run_and_report(cfg)
    except (DatasetError, RunError, ResultsError, EndpointError) as exc:
        raise fail(str(exc)) from None


def _with_suite_options(func: Any) -> Any:
    """``func`` with one keyword option per suite option (from the suites' declarations, so a
    new suite's options appear without editing this file), grouped by suite in ``--help``."""
    sig = inspect.signature(func)
    hints = typing.get_type_hints(func, include_extras=True)  # the annotations are strings here
    params = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in sig.parameters.values()
              if p.kind is not inspect.Parameter.VAR_KEYWORD]
    kinds: dict[str, type] = {"int": int, "float": float, "text": str}
    for s in all_suites().values():
        for o in s.options:
            default = o.text_default if o.kind == "text" else o.default
            option = typer.Option(o.flag, help=o.help, rich_help_panel=f"{s.name}: {s.title}")
            params.append(inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                            annotation=Annotated[kinds[o.kind], option]))
    func.__signature__ = sig.replace(parameters=params)
    return func


app.command("run")(_with_suite_options(run_cmd))


def _check_available(names: list[str]) -> None:
    """An engine that cannot run here is recorded as unavailable in each of its cells; say so
    now, and refuse a run in which no engine can run at all."""
    if not names:  # every engine runs against an external endpoint
        return
    down = [a for a in map(availability, names) if not a.available]
    if len(down) == len(names):
        raise RunError("; ".join(f"--engines {a.name}: {a.reason}" for a in down))
    for a in down:
        err.print(f"[yellow]note:[/yellow] {escape(a.name)} is not available here and is recorded as such: "
                  f"{escape(a.reason)}", highlight=False, soft_wrap=True)


def _run_and_report(cfg: RunConfig) -> None:
    if (short := disk_shortfall(cfg)) is not None:
        err.print(f"[yellow]note:[/yellow] {escape(short)}", highlight=False, soft_wrap=True)
    with progress_bar("run") as bar:
        task = bar.add_task("starting", total=None)

        def progress(label: str, done: int, total: int) -> None:
            bar.update(task, description=label, completed=done, total=total)

        try:
            results = run(cfg, progress)
        except RunInterrupted as stop:
            err.print(f"interrupted by {stop.signame}: the engine under way was stopped, {stop.interrupted} "
                      f"cell(s) recorded as interrupted; {cfg.out / 'results.json'} is valid; "
                      f"`tickbench run --resume {cfg.out}` runs the rest", highlight=False, soft_wrap=True)
            raise typer.Exit(130) from None
    write_reports(results, cfg.out)
    print_summary(results, all_suites().values(), console)
    out = cfg.out
    console.print(f"results: {out / 'results.json'}  report: {out / 'report.html'}, {out / 'report.md'}")
    if any(r.status == "wrong" for r in results.records):
        raise typer.Exit(1)


def write_reports(results: Results | list[Results], out: Path) -> None:
    """``report.md`` and ``report.html`` of one run (or several side by side) into ``out``, each
    written whole or not at all (a full disk leaves the earlier file, or none, never half a one):
    :class:`RunError` naming the disk or the directory when it cannot be written."""
    known = all_suites().values()
    for name, text in (("report.md", markdown.render(results, known)), ("report.html", html.render(results, known))):
        try:
            write_whole(out / name, text)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise RunError(f"the disk under {out} is full ({free_bytes(out) / 1e9:.1f} GB free): {name} could not "
                               f"be written (nothing half-written was left); free space there, then `tickbench "
                               f"report {out / 'results.json'}`") from None
            raise RunError(f"{out / name}: cannot be written ({exc.strerror}); choose another directory with "
                           "`tickbench report RESULTS --out DIR`") from None


def write_whole(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory, renamed over
    it once complete: a reader (or a full disk) never sees a truncated file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@app.command("report")
def report_cmd(
    results_files: Annotated[list[Path], typer.Argument(help="one or several results.json (several: side by side)")],
    out: Annotated[Path | None, typer.Option(
        help="directory for report.html/report.md (default: beside the results.json; several: results/merged-<ids>)")
    ] = None,
) -> None:
    """Rebuild report.html and report.md from saved results.json files."""
    try:
        runs = [read_results(f) for f in results_files]
    except ResultsError as exc:
        raise fail(str(exc)) from None
    if out is not None:
        target = out
    elif len(runs) == 1:
        target = results_files[0].parent
    else:
        target = Path("results") / ("merged-" + "-".join(r.run_id for r in runs))
    try:
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunError(f"--out {target}: cannot be made ({exc.strerror}); choose another directory") from None
        write_reports(runs, target)
    except RunError as exc:
        raise fail(str(exc)) from None
    print_summary(merge(runs).results, all_suites().values(), console)
    console.print(f"report: {target / 'report.html'}, {target / 'report.md'}")


@app.command("site")
def site_cmd(
    results_files: Annotated[list[Path], typer.Argument(help="results.json files: the reference runs, each shown "
                                                         "with the conditions.txt beside it when there is one")],
    out: Annotated[Path, typer.Option(help="directory for index.html, data.js and plotly.min.js (nothing else "
                                           "in it is touched)")] = Path("results/site"),
) -> None:
    """A static results site of saved runs: one index.html and its data; open it from disk or any static host."""
    if out.exists() and not out.is_dir():
        raise fail(f"--out {out}: not a directory; choose a directory for the site")
    try:
        sources = [site.Source(read_results(f), f"{f.parent.name}/{f.name}", site.conditions_of(f))
                   for f in results_files]
    except ResultsError as exc:
        raise fail(str(exc)) from None
    except OSError as exc:
        raise fail(f"{exc.filename}: {exc.strerror}; check the file") from None
    try:
        page = site.write(site.build(sources, all_suites().values()), out)
    except OSError as exc:
        raise fail(f"--out {out}: cannot write the site ({exc.strerror}); "
                   "free space or choose another directory") from None
    console.print(f"site: {page} ({len(sources)} results file(s))")


@app.command("compare")
def compare_cmd(
    a: Annotated[Path, typer.Argument(help="the baseline run's results.json")],
    b: Annotated[Path, typer.Argument(help="the run to compare with it (ratios are B/A)")],
    min_ratio: Annotated[float, typer.Option(help="never flag a ratio within [1/x, x]")] = compare.DEFAULT_MIN_RATIO,
    skip_changed: Annotated[bool, typer.Option(help="compare the other cells when some query text differs")] = False,
) -> None:
    """Per-cell ratios of two runs; flags differences beyond the runs' own spread (exit 1), refuses
    cells whose query text or dataset differ (exit 2). The rule: tickbench.report.compare."""
    try:
        runs = read_results(a), read_results(b)
    except ResultsError as exc:
        raise fail(str(exc)) from None
    raise typer.Exit(compare.main(*runs, all_suites().values(), console, err, min_ratio, skip_changed))


@app.command("validate")
def validate_cmd(
    directory: Annotated[Path, typer.Argument(help="a dataset directory (generated or imported)")],
    show: Annotated[int, typer.Option(help="how many violations to list")] = 20,
) -> None:
    """Check a dataset against SPEC §1's invariants (§1.3's for a market dataset); exit 1 when a row
    breaks one, 2 when unreadable."""
    from tickbench.datasets.base import validate

    try:
        with console.status(f"validating {directory}…"):
            report = validate(directory, max_samples=show)
    except DatasetError as exc:
        raise fail(str(exc)) from None
    console.print(f"{directory}: {report.files} partition files, {report.rows:,} rows checked")
    if report.ok:
        console.print(f"[green]valid:[/green] every invariant of {report.spec} holds")
        manifest = open_dataset(directory, verify_content=False).manifest
        dataset_notes(manifest.kind, manifest.universe)
        return
    table = Table(title="violations")
    table.add_column("reason")
    table.add_column("rows", justify="right")
    for reason, n in report.counts.most_common():
        table.add_row(reason, f"{n:,}")
    console.print(table)
    for v in report.samples:
        console.print(f"  {v.describe()}", highlight=False, soft_wrap=True)
    raise typer.Exit(1)


class _Signalled(KeyboardInterrupt):
    """SIGINT or SIGTERM during an import, raised where the import is, so it unwinds (and
    removes its staging directory) as Ctrl-C does."""

    def __init__(self, signame: str) -> None:
        super().__init__(signame)
        self.signame = signame


@contextmanager
def _stopped_by_signals() -> Iterator[None]:
    # Recorded as well as raised: a raise that lands in a weakref callback or a __del__ is lost
    # (tickbench.signals), and then the import's next progress report or its publishing step stops it.
    def stop(signum: int, _frame: object) -> None:
        signame = signal.Signals(signum).name
        request_stop(signame)
        raise _Signalled(signame)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with unprinted_when_lost(_Signalled):
            yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        forget_stop()


@app.command("import")
def import_cmd(
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help="tardis | cryptofeed | lobster | taq")],
    paths: Annotated[list[Path], typer.Argument(
        help="input files (.csv, .csv.gz; cryptofeed also .parquet; taq: Daily TAQ BBO and TRADE files, as named)")],
    out: Annotated[Path, typer.Option(help="the dataset directory to create")],
    policy: Annotated[str, typer.Option(help="fail: stop at the first bad row; drop: drop, count")] = "fail",
    sample: Annotated[
        int | None, typer.Option(help="one book snapshot per N updates (default 40 rebuilt books, 1 snapshots)")
    ] = None,
    memory_limit: Annotated[int, typer.Option(help="MB of memory the conversion may use for its buffers")] = 512,
    clock: Annotated[str, typer.Option(help="exchange: exchange timestamps; local: arrival timestamps")] = "exchange",
    trade_ids: Annotated[str, typer.Option(help="native: the feed's integer ids; sequence: 1, 2, …")] = "native",
) -> None:
    """Convert Tardis.dev, cryptofeed or LOBSTER files into a dataset (SPEC §1 schema), or Daily TAQ or
    Tardis.dev quotes and trades files into a market dataset (SPEC §1.3), and print its hash."""
    from tickbench.datasets.base import import_dataset

    try:
        with progress_bar("import") as bar, _stopped_by_signals():
            task = bar.add_task("importing", total=None)

            def progress(name: str, done: int, total: int) -> None:
                raise_if_stopped()
                bar.update(task, description=name, completed=done, total=total)

            result = import_dataset(fmt, paths, out, policy=policy, sample=sample, memory_limit_mb=memory_limit,
                                    clock=clock, trade_ids=trade_ids, progress=progress)
    except DatasetError as exc:
        raise fail(str(exc)) from None
    except (KeyboardInterrupt, GenerationStopped) as stop:  # its staging directory is gone (import_dataset's finally)
        err.print(f"interrupted by {getattr(stop, 'signame', 'SIGINT')}: the import into {out} was stopped and "
                  "nothing was kept; run it again", highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(130) from None
    m = result.manifest
    rows = sum(p["rows"] for p in m.partitions)
    console.print(f"dataset {out}: {rows:,} rows in {len(m.partitions)} partitions from "
                  + ", ".join(f"{n:,} {t} rows read" for t, n in sorted(result.rows_read.items())))
    for reason, n in sorted(result.dropped.items()):
        console.print(f"  dropped {n:,} rows: {reason}", highlight=False)
    console.print("parameters: " + ", ".join(f"{k}={v}" for k, v in m.params.items()), highlight=False)
    dataset_notes(m.kind, m.universe)
    print(m.content_hash)


@app.command("engines")
def engines_cmd() -> None:
    """List the engines, whether each is available here, and how to install the missing ones."""
    table = Table(title="tickbench engines")
    for col in ("engine", "kind", "available", "version / why not and how to enable"):
        table.add_column(col)
    for name, info in engine_infos().items():
        a = availability(name)
        table.add_row(name, info.kind, "[green]yes[/green]" if a.available else "[red]no[/red]",
                      escape(a.version if a.available else a.reason))
    console.print(table)
    for name, info in engine_infos().items():
        if info.publishing:
            console.print(f"[yellow]{escape(name)}:[/yellow] {escape(info.publishing)}", highlight=False,
                          soft_wrap=True)


def _adapter_installing_client(name: str, progress: Callable[[str], None]) -> type[Engine]:
    """Engine ``name``'s adapter class, its client packages (engine.toml's ``pip``) installed
    into this Python first when the adapter cannot be imported without them."""
    try:
        return adapter_class(name)
    except ImportError:
        pip = engine_infos()[name].pip
        if not pip:
            raise
    progress(f"pip install {' '.join(pip)}")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *pip], capture_output=True, text=True)
    if done.returncode != 0:
        raise EngineUnavailable(f"pip install {' '.join(pip)} failed: {done.stderr.strip()[-500:]}")
    importlib.invalidate_caches()
    return adapter_class(name)


def registry_servers() -> list[str]:
    """The server engines that install from the package registries: ``kind = "server"`` in their
    ``engine.toml`` and an installer that takes no source release. From the engine folders, so a
    new server engine needs no edit of the Makefile or CI."""
    return [n for n, info in engine_infos().items() if info.kind == "server"
            and "source" not in inspect.signature(adapter_class(n).install).parameters]


@app.command("install")
def install_cmd(
    names: Annotated[list[str] | None, typer.Argument(
        help="engines to install (a server, or an engine's client packages)")] = None,
    source: Annotated[Path | None, typer.Option(
        help="a source release to build from, for an engine built from source (timescaledb)")] = None,
    servers: Annotated[bool, typer.Option(
        help="every server engine that installs from the package registries (engine.toml kind = server; "
             "those built from a source release need --source and a name of their own)")] = False,
) -> None:
    """Install engines from the package registries into tickbench's tools directory."""
    names = list(names or [])
    if servers:
        names += [n for n in registry_servers() if n not in names]
    if not names:
        raise fail("install: name the engines to install, or --servers")
    try:
        check_engines(names)
    except RunError as exc:
        raise fail(str(exc)) from None
    if source is not None:
        takes = [n for n in names if "source" in inspect.signature(adapter_class(n).install).parameters]
        if takes != names:
            raise fail("--source applies to engines built from source only (timescaledb), "
                       f"not {', '.join(n for n in names if n not in takes)}")
    for name in names:
        with console.status(f"installing {name}…") as status:

            def progress(step: str, name: str = name, status: Status = status) -> None:
                status.update(f"{name}: {step}")
                console.print(f"  {name}: {step}", highlight=False)  # a line per step, for logs too

            try:
                kwargs = {"source": source} if source is not None else {}
                version = _adapter_installing_client(name, progress).install(progress, **kwargs)
            except (EngineUnavailable, OSError) as exc:
                raise fail(f"install {name}: {exc}") from None
        console.print(f"{name}: {version}")


if __name__ == "__main__":  # pragma: no cover
    app()
