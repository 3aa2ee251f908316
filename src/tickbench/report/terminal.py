"""The terminal tables printed at the end of a run: the published suite's benchmarks ×
engines, and one line per cell of the suites beyond the paper."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from tickbench.report.cells import MARK, matrix
from tickbench.report.sections import headline
from tickbench.results import Results
from tickbench.suites.published import BY_ID


def print_summary(results: Results, console: Console) -> None:
    title = f"tickbench {results.suite} · scale {results.dataset.scale:g} · dataset {results.dataset.content_hash[:12]}"
    if any(r.benchmark in BY_ID for r in results.records):
        engines, rows = matrix(results)
        table = Table(title=title)
        table.add_column("benchmark", style="bold")
        for e in engines:
            table.add_column(e, justify="right")
        for bid, cells in rows:
            styled = [f"[red]{c}[/red]" if ("✘" in c or "⏱" in c) else c for c in cells]
            table.add_row(bid, *styled)
        console.print(table)
    beyond = [r for r in results.records if r.benchmark not in BY_ID]
    if beyond:
        table = Table(title=title if len(beyond) == len(results.records) else None)
        for col in ("engine", "cell", "", "figures"):
            table.add_column(col)
        for r in beyond:
            mark = MARK[r.status]
            table.add_row(r.engine, r.benchmark, f"[red]{mark}[/red]" if r.status in ("wrong", "error", "timeout")
                          else mark, headline(r))
        console.print(table)
