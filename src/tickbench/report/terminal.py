"""The terminal tables printed at the end of a run: for a suite with sections of its own (the
published suite), its benchmarks × engines; for every other suite, one line per cell."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.table import Table

from tickbench.report.cells import MARK
from tickbench.report.sections import ReportSuite
from tickbench.results import Results

BAD = ("wrong", "error", "timeout")


def print_summary(results: Results, suites: Iterable[ReportSuite], console: Console) -> None:
    title: str | None = (f"tickbench {results.suite} · scale {results.dataset.scale:g} · "
                         f"dataset {results.dataset.content_hash[:12]}")
    engines = results.engines()
    for suite in suites:
        records = [r for r in results.records if r.suite == suite.name]
        if not records:
            continue
        table = Table(title=title)
        title = None
        if suite.own_sections:
            table.add_column("benchmark", style="bold")
            for e in engines:
                table.add_column(e, justify="right")
            for bench in dict.fromkeys(r.benchmark for r in records):
                cells = []
                for e in engines:
                    rec = results.record(e, bench)
                    text = suite.cell_text(rec) if rec is not None else ""
                    cells.append(f"[red]{text}[/red]" if rec is not None and rec.status in BAD else text)
                table.add_row(bench, *cells)
        else:
            for col in ("engine", "cell", "", "figures"):
                table.add_column(col)
            for r in records:
                mark = MARK[r.status]
                figure = suite.headline(r) if r.status == "ok" else f"{r.status}: {r.reason}"[:160]
                table.add_row(r.engine, r.benchmark, f"[red]{mark}[/red]" if r.status in BAD else mark, figure)
        console.print(table)
