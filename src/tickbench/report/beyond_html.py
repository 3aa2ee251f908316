"""The suites beyond the paper in ``report.html``: per suite an HTML table and plotly charts.

The tables are :func:`tickbench.report.beyond.suite_table`'s (the same rows as ``report.md``);
a cell whose status is not ``ok`` shows its status and reason there and is left out of the
charts, and a suite with no ok cell has no chart. The charts are plain plotly JSON handed to the
page's ``add`` (which registers the spec and returns the chart's ``<div>``):

- tick-latency and stream: percentile spectra decoded from the HDR histograms of the figures
  (x: the percentile on a "number of nines" axis, 0, 90, 99, 99.9 …; y: latency, log), one
  line per engine and cell;
- concurrency: queries/s and p99 latency against the number of clients (log₂ axis), one line
  per engine;
- scaling: median latency against the rows read, log-log, per engine and query, with the
  least-squares fit drawn and its slope in the legend (and the table).

Durability (whose Markdown is :mod:`tickbench.report.durability`) is shown as its Markdown
tables converted to HTML.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Sequence
from html import escape
from typing import Any

from tickbench.report.beyond import (
    RENDERERS,
    SUITE_TITLES,
    TABLES,
    Table,
    clients_of,
    records_of,
    scaling_query,
    stream_parts,
    tick_mode_label,
    tick_parts,
)
from tickbench.results import Record, Results
from tickbench.run import latency
from tickbench.suites.published import QUERY_IDS

AddChart = Callable[[str, list[dict[str, Any]], dict[str, Any]], str]

LINE_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
               "#bcbd22", "#7f7f7f", "#393b79", "#637939", "#e6550d", "#31a354", "#756bb1", "#843c39",
               "#3182bd", "#d6616b", "#8c6d31", "#636363")  # 20: the scaling chart colors each query
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "cross", "star", "hexagon")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
NINES_STEP = 0.05  # spacing of the spectrum's points, in nines
MAX_NINES = 7.0  # the spectrum stops at 99.99999 % (beyond it only a histogram of >10 M samples says more)
BAD = ("wrong", "error", "timeout")

DESCRIPTIONS = {
    "tick-latency": "X tickers × Y records each, written one event per write or in batches; a fresh store "
                    "per repetition, every row read back and checked.",
    "stream": "Events replayed at a target rate by n writers; latency runs from each event's intended send "
              "time (no coordinated omission); visibility is acknowledged → counted by a polling query; the "
              "snapshot query reads the latest book row per symbol during and after the ingest.",
    "concurrency": "The published query mix (answers verified beforehand) run by n clients at once.",
    "scaling": "Each query over a day, a week and a month at two scale factors: median latency against the "
               "rows the query reads.",
}


# -- percentile spectra ---------------------------------------------------------------------

def nines(percentile: float) -> float:
    """90 → 1, 99 → 2, 99.9 → 3: the x position of a percentile on the spectrum's axis."""
    return -math.log10(1 - percentile / 100) if percentile < 100 else math.inf


def percentile_label(x: float) -> str:
    """The percentile at ``x`` nines, as text: 0, 90, 99, 99.9, 99.99 …"""
    p = 100 * (1 - 10 ** -x)
    return f"{p:.{max(0, math.ceil(x - 2 + 1e-9) + 1)}f}".rstrip("0").rstrip(".") if x > 0 else "0"


def spectrum(hdr: str) -> tuple[list[float], list[float], list[str]] | None:
    """(x in nines, latency in ms, percentile labels) of an encoded histogram, from p0 (the
    minimum) every :data:`NINES_STEP` nines up to the maximum, which ends the line at percentile
    100·(1 − 1/n), the last sample's; ``None`` for an empty histogram. Values as HdrHistogram's
    ``get_value_at_percentile`` gives them (highest equivalent value), in one pass."""
    h = latency.decode(hdr)
    n = h.get_total_count()
    if n == 0:
        return None
    values, cumulative = [], []
    total = 0
    for item in h.get_recorded_iterator():
        total += item.count_at_value_iterated_to
        values.append(item.value_iterated_to)
        cumulative.append(total)
    top = min(math.log10(n), MAX_NINES)
    steps = int(top / NINES_STEP + 1e-9)
    xs = [i * NINES_STEP for i in range(steps + 1)]
    ys = []
    for x in xs:
        if x == 0:
            ys.append(h.get_lowest_equivalent_value(values[0]) / 1e6)
            continue
        target = max(int((100 * (1 - 10 ** -x)) * n / 100 + 0.5), 1)
        ys.append(values[min(bisect.bisect_left(cumulative, target), len(values) - 1)] / 1e6)
    if top > xs[-1] + 1e-9:
        xs.append(top)
        ys.append(0.0)
    ys[-1] = values[-1] / 1e6  # the last point is the maximum, at the last sample's percentile
    labels = [percentile_label(x) for x in xs]
    if top > 0:
        labels[-1] = f"{labels[-1]} (max)"
    return xs, ys, labels


def _fmt_ms(v: float) -> str:
    return f"{v:,.1f}" if v >= 10 else f"{v:,.2f}" if v >= 1 else f"{v:,.3g}"


def _spectrum_trace(name: str, hdr: str, color: str, dash: str = "solid",
                    group: str | None = None) -> dict[str, Any] | None:
    spec = spectrum(hdr)
    if spec is None:
        return None
    xs, ys, labels = spec
    hover = [f"{escape(name)}<br>p{lab}: {_fmt_ms(y)} ms" for lab, y in zip(labels, ys, strict=True)]
    return {"type": "scatter", "mode": "lines" if len(xs) > 1 else "markers", "name": escape(name), "x": xs, "y": ys,
            "line": {"color": color, "dash": dash, "width": 2}, "marker": {"color": color, "size": 6},
            "legendgroup": escape(group or name), "hovertext": hover, "hoverinfo": "text"}


def _spectrum_layout(title: str, traces: list[dict[str, Any]]) -> dict[str, Any]:
    top = max((max(t["x"]) for t in traces), default=1.0)
    ticks = list(range(math.ceil(top - 1e-9) + 1)) if top > 0 else [0, 1]
    return {
        "height": 380, "margin": {"l": 70, "r": 20, "t": 36, "b": 50}, "font": {"size": 12},
        "legend": {"orientation": "h", "x": 0, "y": -0.28, "yanchor": "top"}, "hovermode": "closest",
        "xaxis": {"type": "linear", "tickvals": ticks, "ticktext": [percentile_label(t) for t in ticks],
                  "range": [0, max(ticks[-1], top) + 0.05],
                  "title": {"text": "percentile (axis: number of nines)"}, "zeroline": False},
        "yaxis": {"type": "log", "title": {"text": "latency, ms · log scale"}, "automargin": True,
                  **log_ticks([y for t in traces for y in t["y"]])},
        "annotations": [_title(title)],
    }


def _title(text: str, xref: str = "x domain") -> dict[str, Any]:
    return {"text": f"<b>{escape(text)}</b>", "xref": xref, "yref": "paper", "x": 0, "y": 1.09,
            "showarrow": False, "xanchor": "left"}


def log_ticks(values: Sequence[float | None], si: bool = False) -> dict[str, Any]:
    """Explicit ticks for a log axis over ``values``: 1, 2, 5 per decade (only the powers of ten
    past four decades), labelled in full ("0.5", "20", "1,000"; with ``si``: "20k", "1M"), where
    plotly's own log ticks label 20 and 50 as "2" and "5"."""
    pos = [v for v in values if v is not None and v > 0]
    if not pos:
        return {}
    lo, hi = math.floor(math.log10(min(pos))), math.ceil(math.log10(max(pos)))
    steps = (1,) if hi - lo > 4 else (1, 2, 5)
    ticks = [m * 10.0 ** d for d in range(lo, hi + 1) for m in steps if m * 10.0 ** d <= 10.0 ** hi]
    return {"tickvals": ticks, "ticktext": [_tick_label(t, si) for t in ticks]}


def _tick_label(v: float, si: bool) -> str:
    if si:
        for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if v >= div:
                return f"{v / div:g}{suffix}"
    return f"{v:,.0f}" if v >= 1 else f"{v:.10f}".rstrip("0").rstrip(".")


# -- the page section -----------------------------------------------------------------------

class _Section:
    def __init__(self, results: Results, add: AddChart) -> None:
        self.results = results
        self.add = add

    def _spectra_chart(self, div_id: str, title: str, lines: Sequence[tuple[str, list[tuple[str, str, str]]]]
                       ) -> str | None:
        """One chart of spectra: per line (name, [(suffix, hdr, dash)]), one color per line."""
        traces = []
        for i, (name, parts) in enumerate(lines):
            color = LINE_COLORS[i % len(LINE_COLORS)]
            for suffix, hdr, dash in parts:
                t = _spectrum_trace(name + suffix, hdr, color, dash, group=name)
                if t is not None:
                    traces.append(t)
        if not traces:
            return None
        return self.add(div_id, traces, _spectrum_layout(title, traces))

    def tick_charts(self, records: list[Record]) -> list[str]:
        lines = []
        for r in _ok(records):
            x, y, _ = tick_parts(r.benchmark)
            lines.append((f"{r.engine} · X={x} Y={y} · {tick_mode_label(r)}", [("", _hdr(r, "latency"), "solid")]))
        chart = self._spectra_chart("chart-beyond-tick-latency", "write latency per event (its write's "
                                    "acknowledgement)", lines)
        return [chart] if chart else []

    def stream_charts(self, records: list[Record]) -> list[str]:
        names = []
        for r in _ok(records):
            p = stream_parts(r.benchmark)
            rate = p.get("rate", "?")
            names.append((r, f"{r.engine} · {rate if rate == 'max' else rate + '/s'} · {p.get('writers', '?')} "
                             f"writer{'' if p.get('writers') == '1' else 's'}"))
        out = []
        for div_id, title, parts in (
            ("chart-beyond-stream-latency", "submit→ack from the intended send time (solid) and the write "
             "call's own service time (dotted)", (("", "latency", "solid"), (" · service", "service", "dot"))),
            ("chart-beyond-stream-visibility", "update visibility: acknowledged → counted",
             (("", "visibility", "solid"),)),
            ("chart-beyond-stream-snapshot", "market snapshot query during the ingest (solid) and after it "
             "(dotted)", ((" · during", "snapshot_during", "solid"), (" · after", "snapshot_after", "dot"))),
        ):
            lines = [(name, [(suffix, _hdr(r, key), dash) for suffix, key, dash in parts]) for r, name in names]
            chart = self._spectra_chart(div_id, title, lines)
            if chart:
                out.append(chart)
        return out

    def concurrency_charts(self, records: list[Record]) -> list[str]:
        by_engine: dict[str, list[Record]] = {}
        for r in _ok(records):
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
            "annotations": [_title("throughput"), _title("p99 query latency", "x2 domain")],
        }
        return [self.add("chart-beyond-concurrency", data, layout)]

    def scaling_charts(self, records: list[Record]) -> list[str]:
        ok = [r for r in _ok(records) if any(_point_xy(p) for p in r.figures.get("points", []))]
        if not ok:
            return []
        engines = list(dict.fromkeys(r.engine for r in ok))
        queries = list(dict.fromkeys([*(q for q in QUERY_IDS), *(scaling_query(r) for r in ok)]))
        data: list[dict[str, Any]] = []
        xs: list[float | None] = []
        ys: list[float | None] = []
        for r in ok:
            q = scaling_query(r)
            e = engines.index(r.engine)
            color = LINE_COLORS[queries.index(q) % len(LINE_COLORS)]
            pts = sorted((xy, p) for p in r.figures["points"] if (xy := _point_xy(p)))
            xs += [x for (x, _), _p in pts]
            ys += [y for (_, y), _p in pts]
            slope = r.figures.get("slope")
            slope_text = "slope –" if slope is None else f"slope {slope:.2f}"
            name = escape(f"{r.engine} · {q} · {slope_text}" if len(engines) > 1 else f"{q} · {slope_text}")
            group = escape(f"{r.engine} · {q}")
            hover = [escape(f"{r.engine} · {q} · scale {p['scale']:g}, {p['span']}") + f"<br>{x:,.0f} rows read → "
                     f"{_fmt_ms(y)} ms" for (x, y), p in pts]
            data.append({"type": "scatter", "mode": "markers", "name": name, "legendgroup": group,
                         "x": [x for (x, _), _p in pts], "y": [y for (_, y), _p in pts],
                         "marker": {"color": color, "size": 8, "symbol": SYMBOLS[e % len(SYMBOLS)]},
                         "hovertext": hover, "hoverinfo": "text"})
            fit = _fit([xy for xy, _ in pts])
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
            "annotations": [_title("median latency against rows read; lines: least-squares fit in log-log")],
        }
        return [self.add("chart-beyond-scaling", data, layout)]

    def durability_chart(self, records: list[Record]) -> str | None:
        """The trade-off: each (engine, setting)'s write rate, its bar red where acknowledged
        rows were lost, labelled with how many."""
        rows = [r for r in records if r.status in ("ok", "wrong") and "acknowledged" in r.figures]
        if not rows:
            return None
        names = [escape(f"{r.engine} · {r.figures['setting']}") for r in rows]
        lost = [int(r.figures["lost"]) for r in rows]
        data = [{
            "type": "bar", "orientation": "h", "y": names, "x": [r.figures["throughput"] for r in rows],
            "marker": {"color": ["#d62728" if n else "#2ca02c" for n in lost]},
            "text": [f"lost {n:,} of {r.figures['acknowledged']:,}" for n, r in zip(lost, rows, strict=True)],
            "textposition": "auto", "hoverinfo": "x+text", "showlegend": False,
        }]
        layout = {
            "height": 120 + 34 * len(rows), "margin": {"l": 20, "r": 20, "t": 36, "b": 50}, "font": {"size": 12},
            "xaxis": {"title": {"text": "acknowledged writes/s, one event per write"}, "rangemode": "tozero"},
            "yaxis": {"automargin": True, "autorange": "reversed"},
            "annotations": [_title("write rate per durability setting; red: acknowledged rows lost to kill -9")],
        }
        return self.add("chart-beyond-durability", data, layout)

    def suite(self, suite: str) -> str:
        records = records_of(self.results, suite)
        if not records:
            return ""
        title = f'<h3 id="beyond-{suite}">{escape(SUITE_TITLES[suite])}</h3>'
        if suite not in TABLES:  # durability: its Markdown, as HTML, under its trade-off chart
            chart = self.durability_chart(records)
            box = f'<div class="chartbox">{chart}</div>' if chart else ""
            return title + box + markdown_to_html(RENDERERS[suite](records))
        table = TABLES[suite](records)
        charts = {"tick-latency": self.tick_charts, "stream": self.stream_charts,
                  "concurrency": self.concurrency_charts, "scaling": self.scaling_charts}[suite](records)
        ok = sum(r.status == "ok" for r in records)
        if charts:
            boxes = "".join(f'<div class="chartbox">{c}</div>' for c in charts)
        else:
            boxes = (f"<p class='muted'>No chart: {'no cell finished ok' if not ok else 'no figure to draw'}"
                     f" ({len(records) - ok} of {len(records)} cells not ok, see the table).</p>")
        desc = f"<p class='muted'>{escape(DESCRIPTIONS[suite])}</p>"
        return title + desc + boxes + html_table(table)


def _ok(records: list[Record]) -> list[Record]:
    return [r for r in records if r.status == "ok"]


def _hdr(r: Record, key: str) -> str:
    s = r.figures.get(key)
    return str(s.get("hdr") or "") if isinstance(s, dict) else ""


def _point_xy(p: Any) -> tuple[float, float] | None:
    """(rows read, median ms) of a scaling point that can sit on log-log axes."""
    if not isinstance(p, dict):
        return None
    x, y = p.get("rows_read"), p.get("median_ms")
    if isinstance(x, int | float) and isinstance(y, int | float) and x > 0 and y > 0:
        return float(x), float(y)
    return None


def _fit(points: list[tuple[float, float]]) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """The ends of the least-squares line of log10(y) on log10(x), over the points' x range."""
    if len({x for x, _ in points}) < 2:
        return None
    lx = [math.log10(x) for x, _ in points]
    ly = [math.log10(y) for _, y in points]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    slope = sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sum((a - mx) ** 2 for a in lx)
    lo, hi = min(lx), max(lx)
    return (10 ** lo, 10 ** (my + slope * (lo - mx))), (10 ** hi, 10 ** (my + slope * (hi - mx)))


# -- tables ---------------------------------------------------------------------------------

def _cls(r: Record) -> str:
    return "bad" if r.status in BAD else "na"


def _cell(value: str | list[str]) -> str:
    return "<br>".join(escape(v) for v in value) if isinstance(value, list) else escape(value)


def html_table(t: Table) -> str:
    """``t`` as an HTML table; a row that is not ok spans its figures' columns with its status
    and reason."""
    head = ""
    if t.groups:
        head = "<tr>" + "".join(f"<th colspan='{n}'>{escape(label)}</th>" for label, n in t.groups) + "</tr>"
    head += "<tr>" + "".join(f"<th>{escape(c)}</th>" for c in t.columns) + "</tr>"
    body = []
    for row in t.rows:
        r = row.record
        keys = [escape(k) for k in row.key]
        if r.notes:
            keys[-1] += f"<span class='why'>{escape(r.notes)}</span>"
        tds = "".join(f"<td>{k}</td>" for k in keys)
        if row.ok:
            tds += "".join(f"<td{'' if i in t.text_columns else ' class=num'}>{_cell(v)}</td>"
                           for i, v in enumerate(row.values))
        else:
            why = f"<span class='why'>{escape(r.reason)}</span>" if r.reason else ""
            tds += (f"<td colspan='{len(t.columns) - t.n_key}' class='{_cls(r)}'>{escape(r.status)}{why}</td>")
        body.append(f"<tr class='{'ok' if row.ok else 'notok'}'>{tds}</tr>")
    notes = "".join(f"<p class='muted'>{escape(n)}</p>" for n in t.notes)
    return (f"<table class='beyond' id='table-beyond-{escape(t.suite)}'>{head}{''.join(body)}</table>{notes}")


_MD_SPLIT = re.compile(r"(?<!\\)\|")


def _md_inline(text: str) -> str:
    """Markdown ``**bold**`` and ```code``` in ``text``, everything else escaped."""
    out = escape(text.replace("\\|", "|"))
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])", r"<i>\1</i>", out)


def markdown_to_html(lines: list[str]) -> str:
    """The Markdown a suite renderer writes (pipe tables, ``- `` lists, paragraphs) as HTML."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("|"):
            block = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                block.append([c.strip() for c in _MD_SPLIT.split(lines[i].strip().strip("|"))])
                i += 1
            rows = [b for b in block if not all(re.fullmatch(r":?-+:?", c) for c in b if c)]
            if rows:
                width = len(rows[0])
                head = "".join(f"<th>{_md_inline(c)}</th>" for c in rows[0])
                body = "".join("<tr>" + "".join(f"<td>{_md_inline(c)}</td>" for c in (row + [""] * width)[:width])
                               + "</tr>" for row in rows[1:])
                out.append(f"<table class='beyond'><tr>{head}</tr>{body}</table>")
            continue
        if line.startswith("- "):
            items = []
            while i < len(lines) and lines[i].strip().startswith("- "):
                items.append(f"<li>{_md_inline(lines[i].strip()[2:])}</li>")
                i += 1
            out.append(f"<ul>{''.join(items)}</ul>")
            continue
        if line:
            out.append(f"<p class='muted'>{_md_inline(line)}</p>")
        i += 1
    return "".join(out)


def render_beyond_html(results: Results, add: AddChart) -> str:
    """The section "Suites beyond the paper", or "" when the run has none of their records."""
    section = _Section(results, add)
    parts = [section.suite(s) for s in RENDERERS]
    if not any(parts):
        return ""
    intro = ("<p class='muted'>Suites that measure what the paper does not (SPEC §2.2; protocols in "
             "METHODOLOGY.md). Latency distributions are the HDR histograms saved in results.json; a cell that "
             "is not ok is in its table with its status and reason, and not in the charts.</p>")
    return f'<h2 id="beyond">Suites beyond the paper</h2>{intro}{"".join(parts)}'

