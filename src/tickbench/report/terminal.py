"""The terminal table printed at the end of a run."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from tickbench.report.cells import matrix
from tickbench.results import Results


def print_summary(results: Results, console: Console) -> None:
    engines, rows = matrix(results)
    table = Table(title=f"tickbench {results.suite} · scale {results.dataset.scale:g} · "
                        f"dataset {results.dataset.content_hash[:12]}")
    table.add_column("benchmark", style="bold")
    for e in engines:
        table.add_column(e, justify="right")
    for bid, cells in rows:
        styled = [f"[red]{c}[/red]" if ("✘" in c or "⏱" in c) else c for c in cells]
        table.add_row(bid, *styled)
    console.print(table)
