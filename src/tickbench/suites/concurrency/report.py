"""The concurrency suite's table and chart (queries/s and p99 against the number of clients)."""

from __future__ import annotations

import math
from html import escape
from typing import Any

from tickbench.report.widgets import (
    LINE_COLORS,
    Row,
    Table,
    chart_title,
    log_ticks,
    markdown_table,
    ok,
    pcts,
    section_html,
)
from tickbench.results import Record
from tickbench.suites.base import AddChart

DESCRIPTION = "The published query mix (answers verified beforehand) run by n clients at once."


def clients_of(r: Record) -> int:
    return int(r.benchmark.split("=")[1])


def table(records: list[Record]) -> Table:
    rows = []
    for r in records:
        f = r.figures
        row = Row(r, [r.engine, str(clients_of(r)), str(f.get("model", ""))])
        if r.status == "ok":
            row.values = [f"{f['qps']:,.1f}", *pcts(f.get("latency"))]
        rows.append(row)
    return Table("concurrency", ["engine", "clients", "model", "queries/s", "p50", "p99", "p99.9", "max"], 3, rows,
                 groups=[("", 4), ("query latency, all clients", 4)])


def markdown(records: list[Record]) -> list[str]:
    return markdown_table(table(records))


def html(records: list[Record], add: AddChart) -> str:
    return section_html(table(records), charts(records, add), records, DESCRIPTION)


def charts(records: list[Record], add: AddChart) -> list[str]:
    by_engine: dict[str, list[Record]] = {}
    for r in ok(records):
        if isinstance(r.figures.get("qps"), int | float):
            by_engine.setdefault(r.engine, []).append(r)
    if not by_engine:
        return []
    data: list[dict[str, Any]] = []
    all_clients: set[int] = set()
    all_p99: list[float | None] = []
    for i, (engine, recs) in enumerate(by_engine.items()):
        recs = sorted(recs, key=clients_of)
        cs = [clients_of(r) for r in recs]
        all_clients.update(cs)
        color = LINE_COLORS[i % len(LINE_COLORS)]
        lat = [r.figures.get("latency") or {} for r in recs]
        p99 = [(s["p99_us"] / 1e3) if s.get("count") else None for s in lat]
        all_p99 += p99
        hover = [f"{escape(engine)} · {c} client{'' if c == 1 else 's'}<br>{r.figures['qps']:,.1f} queries/s"
                 + (f"<br>p50 {s['p50_us'] / 1e3:,.2f} ms · p99 {s['p99_us'] / 1e3:,.2f} ms · "
                    f"p99.9 {s['p99_9_us'] / 1e3:,.2f} ms" if s.get("count") else "")
                 for c, r, s in zip(cs, recs, lat, strict=True)]
        common = {"type": "scatter", "mode": "lines+markers", "legendgroup": escape(engine),
                  "line": {"color": color}, "marker": {"color": color, "size": 8}, "hovertext": hover,
                  "hoverinfo": "text", "name": escape(engine)}
        data.append({**common, "x": cs, "y": [r.figures["qps"] for r in recs]})
        data.append({**common, "x": cs, "y": p99, "xaxis": "x2", "yaxis": "y2", "showlegend": False})
    ticks = sorted(all_clients)
    xaxis = {"type": "log", "tickvals": ticks, "ticktext": [str(c) for c in ticks],
             "title": {"text": "clients (log₂ axis)"}}
    span = [math.log10(min(ticks)) - 0.1, math.log10(max(ticks)) + 0.1]
    layout = {
        "height": 360, "margin": {"l": 70, "r": 20, "t": 36, "b": 50}, "font": {"size": 12},
        "legend": {"orientation": "h", "x": 0, "y": -0.22, "yanchor": "top"}, "hovermode": "closest",
        "xaxis": {**xaxis, "domain": [0, 0.44], "range": span},
        "yaxis": {"title": {"text": "queries/s"}, "rangemode": "tozero", "automargin": True},
        "xaxis2": {**xaxis, "domain": [0.56, 1], "anchor": "y2", "range": span},
        "yaxis2": {"anchor": "x2", "type": "log", "title": {"text": "p99 latency, ms · log scale"},
                   "automargin": True, **log_ticks(all_p99)},
        "annotations": [chart_title("throughput"), chart_title("p99 query latency", "x2 domain")],
    }
    return [add("chart-beyond-concurrency", data, layout)]

