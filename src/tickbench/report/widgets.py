"""Shared widgets of the reports: what a suite's report is given (:class:`SuiteView`), tables
as data (:class:`Table`, one row per record; :class:`Grid`, any table) and their two renderings
(Markdown for ``report.md``, HTML for ``report.html``, so both show the same figures), latency
text, percentile spectra of HDR histograms, log-axis ticks, and chart helpers.

Suites build their report sections from these (``suites/<name>/report.py``); the page shells
are :mod:`tickbench.report.markdown` and :mod:`tickbench.report.html`.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any, Generic, TypeVar

from tickbench import latency
from tickbench.report.summary import Merged
from tickbench.results import Record, Results

Cell = str | list[str]  # a list: several lines in one cell ("; " in Markdown, line breaks in HTML)
#: Adds one chart to the HTML page: (div id, traces, layout) -> the chart's HTML.
AddChart = Callable[[str, list[dict[str, Any]], dict[str, Any]], str]

LINE_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
               "#bcbd22", "#7f7f7f", "#393b79", "#637939", "#e6550d", "#31a354", "#756bb1", "#843c39",
               "#3182bd", "#d6616b", "#8c6d31", "#636363")  # 20: the scaling chart colors each query
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "cross", "star", "hexagon")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
NINES_STEP = 0.05  # spacing of the spectrum's points, in nines
MAX_NINES = 7.0  # the spectrum stops at 99.99999 % (beyond it only a histogram of >10 M samples says more)
BAD = ("wrong", "error", "timeout")
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#bcbd22", "#7f7f7f", "#393b79", "#637939")  # an engine's color on the page, in column order
P = TypeVar("P")


# -- the page ---------------------------------------------------------------------------------

class ChartPage:
    """One HTML page being written: the merged runs, the engines in column order with their
    colors, and the charts its sections add (:meth:`add`), in the order they are added."""

    def __init__(self, merged: Merged) -> None:
        self.m = merged
        self.results: Results = merged.results
        self.engines = merged.results.engines()
        self.colors = {e: PALETTE[i % len(PALETTE)] for i, e in enumerate(self.engines)}
        self.charts: dict[str, dict[str, Any]] = {}

    def add(self, div_id: str, data: list[dict[str, Any]], layout: dict[str, Any]) -> str:
        """Add a chart (plotly traces and layout); its ``<div>`` for the page (an :data:`AddChart`)."""
        self.charts[div_id] = {"data": data, "layout": layout}
        height = layout.get("height", 340)
        style = "" if height == 340 else f' style="height:{int(height)}px"'
        return f'<div class="chart" id="{escape(div_id)}"{style}></div>'


@dataclass
class SuiteView:
    """What one suite's report is given: its records (engine names unique across the merged
    runs), the whole merged run (every record, the environment), the engines in column order
    with their colors, and, for the HTML page, the page's :data:`AddChart` (``None`` in
    Markdown)."""

    records: list[Record]
    merged: Merged
    engines: list[str]
    colors: dict[str, str]
    add: AddChart | None = None

    @property
    def results(self) -> Results:
        return self.merged.results

    def record(self, engine: str, benchmark: str) -> Record | None:
        """The suite's record of ``benchmark`` on ``engine``, if any."""
        return next((r for r in self.records if r.engine == engine and r.benchmark == benchmark), None)

    def engine_meta(self, engine: str) -> dict[str, Any]:
        """What the results record of ``engine`` (its version, kind, phases, peak memory)."""
        return dict(self.results.environment.engines.get(engine, {}))


@dataclass(frozen=True)
class Section:
    """One HTML section of a page: its anchor, its label in the navigation, its HTML."""

    anchor: str
    label: str
    html: str


@dataclass
class PageParts(Generic[P]):
    """The main suite's part of a page, in three places the shell puts around its own sections:
    what was measured, the comparison with the reference paper, and the appendix."""

    results: P
    reference: P
    appendix: P


def mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


# Characters that could start Markdown or HTML in report.md: each is written with a backslash,
# which CommonMark (and GitHub) read as the character itself.
# ``<`` only where it could open a tag, ``&`` only where it could open an entity: "a < b" stays.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~]|<(?=[A-Za-z/!?])|&(?=#?\w+;))")


def md_text(text: str) -> str:
    """``text`` (a name, a reason: anything from data or results.json) as literal Markdown on
    one line: no character of it can open a code span, emphasis, a link or raw HTML."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(str(text).splitlines()))


def md_code(text: str) -> str:
    """``text`` as one Markdown code span whatever it holds: fenced by one backtick more than its
    longest run of them (so a backtick in it cannot close the span early), on one line."""
    body = " ".join(str(text).splitlines())
    fence = "`" * (max((len(r) for r in re.findall(r"`+", body)), default=0) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def md_fence(text: str, info: str = "") -> list[str]:
    """``text`` as a fenced code block whose fence is longer than any run of backticks in it."""
    fence = "`" * max(3, max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    return [fence + info, text, fence]


def md_cell(text: str) -> str:
    """Text safe inside a Markdown table cell: literal (:func:`md_text`), its pipes escaped."""
    return md_text(text)


@dataclass
class Row:
    """One record's row: the cells that say which cell it is (``key``), then its figures
    (``values``, empty unless the record is ok: the table shows its status and reason)."""

    record: Record
    key: list[str]
    values: list[Cell] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.record.status == "ok"


@dataclass
class Table:
    """A suite's table: ``columns`` (the key columns first), an optional first header row of
    ``groups`` (label, columns spanned), the rows, and notes printed under it."""

    suite: str
    columns: list[str]
    n_key: int
    rows: list[Row]
    notes: list[str] = field(default_factory=list)
    groups: list[tuple[str, int]] = field(default_factory=list)
    text_columns: frozenset[int] = frozenset()  # value columns that are text, not numbers


def us_text(summary: dict[str, Any] | None, key: str) -> str:
    """A latency from a histogram summary (µs) as text: µs below 10 ms, else ms; "–" when none."""
    if not summary or summary.get("count", 0) == 0 or summary.get(key) is None:
        return "–"
    v = float(summary[key])
    return f"{v / 1e3:,.1f} ms" if v >= 10_000 else f"{v:,.0f} µs"


def status_text(r: Record) -> str:
    return f"{r.status}: {r.reason}" if r.reason else r.status


def pcts(summary: dict[str, Any] | None) -> list[Cell]:
    """p50, p99, p99.9 and max of a histogram summary, as text."""
    return [us_text(summary, k) for k in ("p50_us", "p99_us", "p99_9_us", "max_us")]


def ok(records: list[Record]) -> list[Record]:
    return [r for r in records if r.status == "ok"]


def hdr(r: Record, key: str) -> str:
    """The encoded histogram of figure ``key`` of ``r`` ("" when it has none)."""
    s = r.figures.get(key)
    return str(s.get("hdr") or "") if isinstance(s, dict) else ""


# -- Markdown -------------------------------------------------------------------------------

def _md(cell: Cell) -> str:
    text = "; ".join(cell) if isinstance(cell, list) else cell
    return md_text(text)  # a value must not break the table row, nor open markup


def markdown_table(t: Table) -> list[str]:
    out = ["| " + " | ".join(t.columns) + " |", "|" + "---|" * len(t.columns)]
    for row in t.rows:
        cells: list[Cell] = [*row.key, *row.values] if row.ok else [*row.key, status_text(row.record)]
        cells += [""] * (len(t.columns) - len(cells))
        out.append("| " + " | ".join(_md(c) for c in cells) + " |")
    if t.notes:
        out += ["", *t.notes]
    return out


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


def fmt_ms(v: float) -> str:
    return f"{v:,.1f}" if v >= 10 else f"{v:,.2f}" if v >= 1 else f"{v:,.3g}"


def spectrum_trace(name: str, hdr: str, color: str, dash: str = "solid",
                    group: str | None = None) -> dict[str, Any] | None:
    spec = spectrum(hdr)
    if spec is None:
        return None
    xs, ys, labels = spec
    hover = [f"{escape(name)}<br>p{lab}: {fmt_ms(y)} ms" for lab, y in zip(labels, ys, strict=True)]
    return {"type": "scatter", "mode": "lines" if len(xs) > 1 else "markers", "name": escape(name), "x": xs, "y": ys,
            "line": {"color": color, "dash": dash, "width": 2}, "marker": {"color": color, "size": 6},
            "legendgroup": escape(group or name), "hovertext": hover, "hoverinfo": "text"}


def spectrum_layout(title: str, traces: list[dict[str, Any]]) -> dict[str, Any]:
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
        "annotations": [chart_title(title)],
    }


def chart_title(text: str, xref: str = "x domain") -> dict[str, Any]:
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


def spectra_chart(add: AddChart, div_id: str, title: str,
              lines: Sequence[tuple[str, list[tuple[str, str, str]]]]) -> str | None:
    """One chart of spectra: per line (name, [(suffix, hdr, dash)]), one color per line."""
    traces = []
    for i, (name, parts) in enumerate(lines):
        color = LINE_COLORS[i % len(LINE_COLORS)]
        for suffix, hdr, dash in parts:
            t = spectrum_trace(name + suffix, hdr, color, dash, group=name)
            if t is not None:
                traces.append(t)
    if not traces:
        return None
    return add(div_id, traces, spectrum_layout(title, traces))


def point_xy(p: Any) -> tuple[float, float] | None:
    """(rows read, median ms) of a scaling point that can sit on log-log axes."""
    if not isinstance(p, dict):
        return None
    x, y = p.get("rows_read"), p.get("median_ms")
    if isinstance(x, int | float) and isinstance(y, int | float) and x > 0 and y > 0:
        return float(x), float(y)
    return None


def fit_line(points: list[tuple[float, float]]) -> tuple[tuple[float, float], tuple[float, float]] | None:
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

@dataclass(frozen=True)
class Item:
    """One cell of a :class:`Grid`: its text, its style (``num``, ``ok``, ``bad``, ``na``, ``best``,
    space-separated), a reason shown under it (HTML) or after it (Markdown), and the columns it
    spans."""

    text: Cell
    cls: str = ""
    why: str = ""
    span: int = 1


@dataclass
class Grid:
    """A table as data, built once and rendered the same in both reports (:func:`markdown_grid`,
    :func:`html_grid`): its columns, its rows of cells (text or :class:`Item`), notes under it."""

    columns: list[str]
    rows: list[list[Item | str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: Item | str) -> None:
        self.rows.append(list(cells))


def _item(cell: Item | str) -> Item:
    return cell if isinstance(cell, Item) else Item(cell)


def markdown_grid(g: Grid) -> list[str]:
    """``g`` as a Markdown table, with its notes."""
    out = ["| " + " | ".join(md_cell(c) for c in g.columns) + " |", "|" + "---|" * len(g.columns)]
    for row in g.rows:
        cells: list[str] = []
        for item in map(_item, row):
            text = "; ".join(item.text) if isinstance(item.text, list) else item.text
            if item.why:
                text = f"{text} ({item.why})" if text else item.why
            cells += [md_cell(text)] + [""] * (item.span - 1)
        out.append("| " + " | ".join(cells) + " |")
    return out + [x for n in g.notes for x in ("", n)]


def html_grid(g: Grid, table_id: str = "") -> str:
    """``g`` as an HTML table, with its notes."""
    head = "<tr>" + "".join(f"<th>{escape(c)}</th>" for c in g.columns) + "</tr>"
    body = []
    for row in g.rows:
        tds = []
        for item in map(_item, row):
            attrs = (f" class='{escape(item.cls)}'" if item.cls else "") + (
                f" colspan='{item.span}'" if item.span > 1 else "")
            why = f"<span class='why'>{escape(item.why)}</span>" if item.why else ""
            tds.append(f"<td{attrs}>{_cell(item.text)}{why}</td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    notes = "".join(f"<p class='muted'>{escape(n)}</p>" for n in g.notes)
    ident = f" id='{escape(table_id)}'" if table_id else ""
    return f"<table{ident}>{head}{''.join(body)}</table>{notes}"


def memory_text(rec: Record) -> str:
    """A query's memory figure as MiB."""
    if rec.memory is None:
        return "—"
    return f"{rec.memory.bytes / 2**20:,.2f} MiB"


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
    """Markdown ``**bold**`` and ```code``` in ``text``, everything else escaped; a character
    :func:`md_text` escaped with a backslash is that character, never markup."""
    kept: list[str] = []

    def keep(m: re.Match[str]) -> str:
        kept.append(m.group(1))
        return f"\ue000{len(kept) - 1}\ue001"

    out = escape(re.sub(r"\\([\\`*_\[\]<&|~])", keep, text))
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])", r"<i>\1</i>", out)
    return re.sub("\ue000(\\d+)\ue001", lambda m: escape(kept[int(m.group(1))]), out)


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


def section_html(table: Table, charts: list[str], records: list[Record], description: str) -> str:
    """A suite's HTML section body: its description, its charts (or why there is none) and
    its table."""
    n_ok = sum(r.status == "ok" for r in records)
    if charts:
        boxes = "".join(f'<div class="chartbox">{c}</div>' for c in charts)
    else:
        boxes = (f"<p class='muted'>No chart: {'no cell finished ok' if not n_ok else 'no figure to draw'}"
                 f" ({len(records) - n_ok} of {len(records)} cells not ok, see the table).</p>")
    return f"<p class='muted'>{escape(description)}</p>" + boxes + html_table(table)
