"""The tick-latency suite's table and its chart (percentile spectra of the write latency)."""

from __future__ import annotations

from tickbench.report.widgets import (
    Row,
    Table,
    hdr,
    markdown_table,
    ok,
    pcts,
    section_html,
    spectra_chart,
)
from tickbench.results import Record
from tickbench.suites.base import AddChart

DESCRIPTION = ("X tickers × Y records each, written one event per write or in batches; a fresh store per "
               "repetition, every row read back and checked.")


def tick_parts(bench: str) -> tuple[str, str, str]:
    """``tick-latency/X=2,Y=500/batch`` → ``("2", "500", "batch")``."""
    _, xy, mode = bench.split("/")
    x, y = (part.split("=")[1] for part in xy.split(","))
    return x, y, mode


def tick_mode_label(r: Record) -> str:
    f = r.figures
    mode = f.get("mode", tick_parts(r.benchmark)[2])
    if mode == "batch":
        return f"batch of {f['batch']}" if "batch" in f else "batch"
    return "one per write" if mode == "single" else str(mode)


def table(records: list[Record]) -> Table:
    rows = []
    for r in records:
        x, y, _ = tick_parts(r.benchmark)
        row = Row(r, [r.engine, x, y, tick_mode_label(r)])
        if r.status == "ok":
            f = r.figures
            row.values = [f"{f['write_s_mean']:.3f} ± {f['write_s_std']:.3f}",
                          f"{f['read_s_mean']:.3f} ± {f['read_s_std']:.3f}", f"{f['events_per_s']:,.0f}",
                          *pcts(f.get("latency"))]
        rows.append(row)
    return Table("tick-latency", ["engine", "X", "Y", "mode", "total write s (mean ± std)", "read s (mean ± std)",
                                  "events/s", "p50", "p99", "p99.9", "max"], 4, rows,
                 groups=[("", 7), ("write latency per event", 4)])


def markdown(records: list[Record]) -> list[str]:
    return markdown_table(table(records))


def html(records: list[Record], add: AddChart) -> str:
    lines = []
    for r in ok(records):
        x, y, _ = tick_parts(r.benchmark)
        lines.append((f"{r.engine} · X={x} Y={y} · {tick_mode_label(r)}", [("", hdr(r, "latency"), "solid")]))
    chart = spectra_chart(add, "chart-beyond-tick-latency", "write latency per event (its write's "
                          "acknowledgement)", lines)
    return section_html(table(records), [chart] if chart else [], records, DESCRIPTION)
