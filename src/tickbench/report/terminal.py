"""The terminal tables printed at the end of a run: the published suite's benchmarks ×
engines, and one line per cell of the suites beyond the paper."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from tickbench.report.cells import MARK, matrix
from tickbench.results import Record, Results
from tickbench.suites.published import BY_ID


def headline(r: Record) -> str:
    """The one figure that sums up a cell of a suite beyond the paper."""
    f = r.figures
    if r.status != "ok":
        return f"{r.status}: {r.reason}"[:160]
    suite = r.benchmark.split("/")[0]
    if suite == "tick-latency":
        return f"{f['events_per_s']:,.0f} events/s · p99 {f['latency'].get('p99_us', 0):,.0f} µs"
    if suite == "stream":
        return f"{f['throughput']:,.0f} events/s · p99 {f['latency'].get('p99_us', 0) / 1e3:,.1f} ms"
    if suite == "concurrency":
        return f"{f['qps']:,.1f} queries/s · p99 {f['latency'].get('p99_us', 0) / 1e3:,.1f} ms"
    if suite == "scaling":
        slope = f.get("slope")
        return "slope –" if slope is None else f"log-log slope {slope:.2f}"
    if suite == "durability":
        return (f"{f['acknowledged']:,} acknowledged · {f['lost']:,} lost · recovery {f['recovery_s']:.2f} s · "
                f"{f['throughput']:,.0f} writes/s")
    return ""


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
