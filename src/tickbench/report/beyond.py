"""The tables of the suites beyond the paper (tick-latency, stream, concurrency, scaling).

Each suite's table is built once as data (:func:`suite_table`: columns and one :class:`Row` per
record) and written out by two renderers: :func:`render_beyond`, the Markdown of ``report.md``,
and :mod:`tickbench.report.beyond_html`, the HTML tables of ``report.html``, so both reports
show the same figures. ``render_beyond(results)`` returns "" when the run holds none of their
records, so a report can always call it. Latencies are from the HDR histograms in each
record's figures. The durability suite has its own Markdown renderer
(:mod:`tickbench.report.durability`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tickbench.report.durability import TITLE as DURABILITY_TITLE
from tickbench.report.durability import render_durability
from tickbench.results import Record, Results

SUITE_TITLES = {
    "tick-latency": "Tick latency (after KungfuDB, table 1)",
    "stream": "Streaming ingest (after STAC-M3)",
    "concurrency": "Concurrent clients",
    "scaling": "Scaling with data read",
    "durability": DURABILITY_TITLE,
}

Cell = str | list[str]  # a list: several lines in one cell ("; " in Markdown, line breaks in HTML)


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


def records_of(results: Results, suite: str) -> list[Record]:
    """The records of ``suite`` in run order."""
    return [r for r in results.records if r.benchmark.startswith(suite + "/")]


def _pcts(summary: dict[str, Any] | None) -> list[Cell]:
    return [us_text(summary, k) for k in ("p50_us", "p99_us", "p99_9_us", "max_us")]


# -- tick-latency ---------------------------------------------------------------------------

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


def _tick(records: list[Record]) -> Table:
    rows = []
    for r in records:
        x, y, _ = tick_parts(r.benchmark)
        row = Row(r, [r.engine, x, y, tick_mode_label(r)])
        if r.status == "ok":
            f = r.figures
            row.values = [f"{f['write_s_mean']:.3f} ± {f['write_s_std']:.3f}",
                          f"{f['read_s_mean']:.3f} ± {f['read_s_std']:.3f}", f"{f['events_per_s']:,.0f}",
                          *_pcts(f.get("latency"))]
        rows.append(row)
    return Table("tick-latency", ["engine", "X", "Y", "mode", "total write s (mean ± std)", "read s (mean ± std)",
                                  "events/s", "p50", "p99", "p99.9", "max"], 4, rows,
                 groups=[("", 7), ("write latency per event", 4)])


# -- stream ---------------------------------------------------------------------------------

def stream_parts(bench: str) -> dict[str, str]:
    """``stream/rate=2000/writers=1`` → ``{"rate": "2000", "writers": "1"}``."""
    return dict(p.split("=", 1) for p in bench.split("/")[1:])


def _stream(records: list[Record]) -> Table:
    rows = []
    for r in records:
        parts = stream_parts(r.benchmark)
        row = Row(r, [r.engine, parts.get("rate", ""), parts.get("writers", "")])
        if r.status == "ok":
            f = r.figures
            vis = f.get("visibility")
            row.values = [f"{f['written']:,}", f"{f['throughput']:,.0f}", *_pcts(f.get("latency")),
                          us_text(vis, "p50_us"), us_text(vis, "p99_us"),
                          us_text(f.get("snapshot_during"), "p50_us"), us_text(f.get("snapshot_after"), "p50_us")]
        rows.append(row)
    return Table("stream", ["engine", "target rate", "writers", "events", "achieved events/s", "submit→ack p50",
                            "p99", "p99.9", "max", "visibility p50", "p99", "snapshot during p50", "after p50"],
                 3, rows,
                 notes=["Latency is from each event's intended send time (no coordinated omission); visibility "
                        "is acknowledged → counted by a polling query."],
                 groups=[("", 5), ("submit→ack, from the intended send time", 4), ("visibility", 2),
                         ("snapshot query", 2)])


# -- concurrency ----------------------------------------------------------------------------

def clients_of(r: Record) -> int:
    return int(r.benchmark.split("=")[1])


def _concurrency(records: list[Record]) -> Table:
    rows = []
    for r in records:
        f = r.figures
        row = Row(r, [r.engine, str(clients_of(r)), str(f.get("model", ""))])
        if r.status == "ok":
            row.values = [f"{f['qps']:,.1f}", *_pcts(f.get("latency"))]
        rows.append(row)
    return Table("concurrency", ["engine", "clients", "model", "queries/s", "p50", "p99", "p99.9", "max"], 3, rows,
                 groups=[("", 4), ("query latency, all clients", 4)])


# -- scaling --------------------------------------------------------------------------------

def scaling_query(r: Record) -> str:
    return r.benchmark.split("/", 1)[1]


def _scaling(records: list[Record]) -> Table:
    rows = []
    for r in records:
        row = Row(r, [r.engine, scaling_query(r)])
        if r.status == "ok":
            slope = r.figures.get("slope")
            pts = [f"{p['scale']:g} {p['span']}: {p['rows_read']:,} → {p['median_ms']:.2f}"
                   for p in r.figures.get("points", [])]
            row.values = ["–" if slope is None else f"{slope:.2f}", pts]
        rows.append(row)
    return Table("scaling", ["engine", "query", "log-log slope", "points (scale, span: rows read → median ms)"], 2,
                 rows, notes=["Slope 1: latency grows in proportion to the rows read; 0: independent of them."],
                 text_columns=frozenset({1}))


TABLES: dict[str, Callable[[list[Record]], Table]] = {
    "tick-latency": _tick, "stream": _stream, "concurrency": _concurrency, "scaling": _scaling}


def suite_table(results: Results, suite: str) -> Table | None:
    """The table of ``suite`` (one of :data:`TABLES`), or ``None`` when the run has no record of it."""
    records = records_of(results, suite)
    return TABLES[suite](records) if records else None


# -- Markdown -------------------------------------------------------------------------------

def _md(cell: Cell) -> str:
    text = "; ".join(cell) if isinstance(cell, list) else cell
    return text.replace("|", "\\|").replace("\n", " ")  # a value must not break the table row


def markdown_table(t: Table) -> list[str]:
    out = ["| " + " | ".join(t.columns) + " |", "|" + "---|" * len(t.columns)]
    for row in t.rows:
        cells: list[Cell] = [*row.key, *row.values] if row.ok else [*row.key, status_text(row.record)]
        cells += [""] * (len(t.columns) - len(cells))
        out.append("| " + " | ".join(_md(c) for c in cells) + " |")
    if t.notes:
        out += ["", *t.notes]
    return out


def _markdown_lines(suite: str) -> Callable[[list[Record]], list[str]]:
    return lambda records: markdown_table(TABLES[suite](records))


RENDERERS: dict[str, Callable[[list[Record]], list[str]]] = {
    **{suite: _markdown_lines(suite) for suite in TABLES}, "durability": render_durability}


def render_beyond(results: Results) -> str:
    """Markdown sections (``##``) for every suite beyond the paper that the run recorded."""
    out: list[str] = []
    for suite, render in RENDERERS.items():
        records = records_of(results, suite)
        if records:
            out += [f"## {SUITE_TITLES[suite]}", "", *render(records), ""]
    return "\n".join(out)
