"""The scaling suite's table and chart (median latency against rows read, log-log, with the
least-squares fit and its slope)."""

from __future__ import annotations

from html import escape
from typing import Any

from tickbench.datasets.paper.spec import QUERY_IDS
from tickbench.report.widgets import (
    DASHES,
    LINE_COLORS,
    SYMBOLS,
    Row,
    Table,
    chart_title,
    fit_line,
    fmt_ms,
    log_ticks,
    markdown_table,
    ok,
    point_xy,
    section_html,
)
from tickbench.results import Record
from tickbench.suites.base import AddChart

DESCRIPTION = ("Each query over a day, a week and a month at two scale factors: median latency against the "
               "rows the query reads.")


def scaling_query(r: Record) -> str:
    return r.benchmark.split("/", 1)[1]


def _slope_text(slope: float | None, points: list[dict[str, Any]]) -> str:
    if slope is not None:
        return f"{slope:.2f}"
    if len({p["rows_read"] for p in points}) == 1:
        # O-NBBO reads the multi-exchange day at every span: only a second scale moves its x.
        return "– (the same rows read at every point: needs a second scale factor)"
    return "–"


def table(records: list[Record]) -> Table:
    rows = []
    for r in records:
        row = Row(r, [r.engine, scaling_query(r)])
        if r.status == "ok":
            slope = r.figures.get("slope")
            pts = [f"{p['scale']:g} {p['span']}: {p['rows_read']:,} → {p['median_ms']:.2f}"
                   for p in r.figures.get("points", [])]
            row.values = [_slope_text(slope, r.figures.get("points", [])), pts]
        rows.append(row)
    return Table("scaling", ["engine", "query", "log-log slope", "points (scale, span: rows read → median ms)"], 2,
                 rows, notes=["Slope 1: latency grows in proportion to the rows read; 0: independent of them."],
                 text_columns=frozenset({1}))


def markdown(records: list[Record]) -> list[str]:
    return markdown_table(table(records))


def html(records: list[Record], add: AddChart) -> str:
    return section_html(table(records), charts(records, add), records, DESCRIPTION)


def charts(records: list[Record], add: AddChart) -> list[str]:
    good = [r for r in ok(records) if any(point_xy(p) for p in r.figures.get("points", []))]
    if not good:
        return []
    engines = list(dict.fromkeys(r.engine for r in good))
    queries = list(dict.fromkeys([*(q for q in QUERY_IDS), *(scaling_query(r) for r in good)]))
    data: list[dict[str, Any]] = []
    xs: list[float | None] = []
    ys: list[float | None] = []
    for r in good:
        q = scaling_query(r)
        e = engines.index(r.engine)
        color = LINE_COLORS[queries.index(q) % len(LINE_COLORS)]
        pts = sorted((xy, p) for p in r.figures["points"] if (xy := point_xy(p)))
        xs += [x for (x, _), _p in pts]
        ys += [y for (_, y), _p in pts]
        slope = r.figures.get("slope")
        slope_text = "slope –" if slope is None else f"slope {slope:.2f}"
        name = escape(f"{r.engine} · {q} · {slope_text}" if len(engines) > 1 else f"{q} · {slope_text}")
        group = escape(f"{r.engine} · {q}")
        hover = [escape(f"{r.engine} · {q} · scale {p['scale']:g}, {p['span']}") + f"<br>{x:,.0f} rows read → "
                 f"{fmt_ms(y)} ms" for (x, y), p in pts]
        data.append({"type": "scatter", "mode": "markers", "name": name, "legendgroup": group,
                     "x": [x for (x, _), _p in pts], "y": [y for (_, y), _p in pts],
                     "marker": {"color": color, "size": 8, "symbol": SYMBOLS[e % len(SYMBOLS)]},
                     "hovertext": hover, "hoverinfo": "text"})
        fit = fit_line([xy for xy, _ in pts])
        if fit is not None and slope is not None:
            (x0, y0), (x1, y1) = fit
            data.append({"type": "scatter", "mode": "lines", "name": name, "legendgroup": group,
                         "showlegend": False, "x": [x0, x1], "y": [y0, y1], "hoverinfo": "skip",
                         "line": {"color": color, "dash": DASHES[e % len(DASHES)], "width": 1.5}})
    layout = {
        "height": 460, "margin": {"l": 70, "r": 20, "t": 36, "b": 50}, "font": {"size": 12},
        "legend": {"orientation": "h", "x": 0, "y": -0.16, "yanchor": "top"}, "hovermode": "closest",
        "xaxis": {"type": "log", "title": {"text": "rows read · log scale"}, **log_ticks(xs, si=True)},
        "yaxis": {"type": "log", "title": {"text": "median latency, ms · log scale"}, "automargin": True,
                  **log_ticks(ys)},
        "annotations": [chart_title("median latency against rows read; lines: least-squares fit in log-log")],
    }
    return [add("chart-beyond-scaling", data, layout)]

