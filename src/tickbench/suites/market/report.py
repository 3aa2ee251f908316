"""The market suite's section of the reports: every cell (queries × engines, with the verified
mark), a chart of each query's median latency per engine, the timings, M-W and M-SE. Every table
is built once as data (:class:`~tickbench.report.widgets.Grid`) for both reports.

As in the published suite's section, an in-memory engine (Polars) is the in-memory reference:
its column comes last, labelled so, and its bars are grey and labelled, never among the
contenders; an engine not available where the run ran is a line under the table, not a column
(:func:`columns`)."""

from __future__ import annotations

import dataclasses
from html import escape
from typing import Any

from tickbench.report.cells import cell_text as generic
from tickbench.report.cells import harness_ms, server_median_ms, transport_bound
from tickbench.report.summary import in_memory
from tickbench.report.widgets import Grid, Item, SuiteView, html_grid, markdown_grid, memory_text
from tickbench.results import Record
from tickbench.suites.market import LOADS, QUERIES
from tickbench.suites.market import users_report as users
from tickbench.suites.market.during_ingest import headline as ingest_headline
from tickbench.suites.market.during_ingest import parse_ingest_id
from tickbench.suites.market.users import parse_id

BAD = ("wrong", "error", "timeout")
REFERENCE = "in-memory reference"
REFERENCE_COLOR = "#9e9e9e"
REFERENCE_NOTE = ("{refs}: the in-memory reference, shown apart and never ranked (it holds the columns the queries "
                  "read in memory, with no storage, M-W, M-SE or durability: a lower bound, not a contender).")


def columns(view: SuiteView) -> SuiteView:
    """``view`` with its engines in the columns' order: the contenders, then the in-memory
    references; an engine not available where the run ran has no column (:func:`unavailable_note`)."""
    gone = view.results.unavailable()
    shown = [e for e in view.engines if e not in gone]
    refs = [e for e in shown if in_memory(view.results, e)]
    return dataclasses.replace(view, engines=[e for e in shown if e not in refs] + refs,
                               records=[r for r in view.records if r.engine not in gone])


def label(view: SuiteView, engine: str) -> str:
    """An engine's column heading: its name, and the in-memory reference said as such."""
    return f"{engine} ({REFERENCE})" if in_memory(view.results, engine) else engine


def notes(view: SuiteView) -> list[str]:
    """The lines under a market table: the in-memory references, the engines not available."""
    out = []
    refs = [e for e in view.engines if in_memory(view.results, e)]
    if refs:
        out.append(REFERENCE_NOTE.format(refs=", ".join(refs)))
    out += [f"Not available here: {e} ({why})" for e, why in sorted(view.results.unavailable().items())]
    return out
INTRO = ("The market dataset: a universe of instruments of very unequal activity quoted on eight venues over 20 "
         "trading days (SPEC §1.3); the questions of SPEC §2.3, each answer checked against the reference "
         "implementation. Median client-side latency (the engine's own time in brackets where it reports one).")


def cell_text(rec: Record | None) -> str:
    """A market cell's text: a query's timing, M-W's seconds and MB/s, M-SE's share of the CSV."""
    if rec is None or rec.status != "ok":
        return generic(rec)
    if parse_id(rec.benchmark) is not None:
        return users.headline(rec)
    if parse_ingest_id(rec.benchmark) is not None:
        return ingest_headline(rec)
    if rec.benchmark == "M-W":
        csv = rec.figures.get("csv", {})
        return f"{csv.get('seconds', 0):.2f} s · {csv.get('mb_per_s', 0):.0f} MB/s ✔"
    if rec.benchmark == "M-SE":
        pct = rec.figures.get("pct_of_csv")
        return f"{pct:.1f} % of CSV" if pct is not None else "?"
    return generic(rec)


def _style(r: Record | None) -> str:
    if r is None:
        return "na"
    return "num bad" if r.status in BAD else "num" if r.status == "ok" else "num na"


def cells(view: SuiteView) -> Grid:
    g = Grid(["query", *(label(view, e) for e in view.engines)])
    for bench, what in [*((q.id, q.category) for q in QUERIES), *((b, "write/storage") for b in LOADS)]:
        if any(r.benchmark == bench for r in view.records):
            row: list[Item | str] = [Item(bench, why=what)]
            for e in view.engines:
                rec = view.record(e, bench)
                row.append(Item(cell_text(rec), _style(rec), rec.reason[:200] if rec and rec.status != "ok" else ""))
            g.rows.append(row)
    g.notes.append("✔ = the answer equals the reference implementation's; ⚠ transport-bound: the client time exceeds "
                   "the engine's own by more than max(20 %, 5 ms).")
    g.notes += notes(view)
    return g


def timings(view: SuiteView, qid: str) -> Grid:
    g = Grid(["engine", "median ms", "min", "max", "n", "server median", "harness share", "rows", "memory"])
    for e in view.engines:
        r = view.record(e, qid)
        if r is None:
            continue
        if r.status == "ok" and r.stats is not None:
            s, server, gap = r.stats, server_median_ms(r), harness_ms(r)
            share = "—" if gap is None else f"{gap:,.2f}" + (" ⚠" if transport_bound(r) else "")
            g.add(label(view, e), *(Item(f"{v:,.2f}", "num") for v in (s.median_ms, s.min_ms, s.max_ms)),
                  Item(str(s.n), "num"),
                  Item("—" if server is None else f"{server:,.2f}", "num"), Item(share, "num"),
                  Item("" if r.rows is None else f"{r.rows:,}", "num"), Item(memory_text(r), "num", r.notes))
        else:
            g.add(label(view, e), Item(cell_text(r), _style(r), r.reason, span=8))
    return g


def chart(view: SuiteView, qid: str) -> str:
    """A bar per engine of ``qid``'s median latency (bars min–max), or "" when none is ok."""
    if view.add is None:
        return ""
    ok = [(e, r) for e in view.engines if (r := view.record(e, qid)) is not None and r.status == "ok" and r.stats]
    if not ok:
        return ""
    med = [r.stats.median_ms for _, r in ok if r.stats]
    lo = [r.stats.min_ms for _, r in ok if r.stats]
    hi = [r.stats.max_ms for _, r in ok if r.stats]
    colors = [REFERENCE_COLOR if in_memory(view.results, e) else view.colors[e] for e, _ in ok]
    data: list[dict[str, Any]] = [{
        "type": "bar", "x": [label(view, e) for e, _ in ok], "y": med, "marker": {"color": colors},
        "error_y": {"type": "data", "symmetric": False, "array": [h - m for h, m in zip(hi, med, strict=True)],
                    "arrayminus": [m - low for m, low in zip(med, lo, strict=True)], "color": "#333"},
        "hovertemplate": "%{x}: %{y:,.3g} ms<extra></extra>"}]
    spread = max(hi) / min(lo) if min(lo) > 0 else 1.0
    layout = {"height": 300, "margin": {"l": 70, "r": 20, "t": 20, "b": 40},
              "yaxis": {"title": {"text": "ms (median; bars min–max)"}, "type": "log" if spread > 20 else "linear"},
              "xaxis": {"type": "category"}}
    return view.add(f"chart-market-{qid}", data, layout)


def loads(view: SuiteView) -> Grid:
    g = Grid(["engine", "cell", "figure", "detail"])
    for bench in LOADS:
        for e in view.engines:
            r = view.record(e, bench)
            if r is None:
                continue
            detail = ""
            if r.status == "ok" and bench == "M-W":
                f = r.figures
                detail = "; ".join(
                    f"{fmt}: {f[fmt]['seconds']:.2f} s, own path {f[fmt].get('baseline_seconds', 0):.2f} s"
                    for fmt in ("csv", "parquet") if isinstance(f.get(fmt), dict))
            elif r.status == "ok":
                f = r.figures
                detail = f"{f.get('engine_bytes', 0):,} bytes ({f.get('measured', '')})"
                if f.get("data_bytes") is not None:  # the split, on records since it was made
                    detail += (f": data {f['data_bytes']:,}, index {f.get('index_bytes', 0):,}; "
                               f"log {f.get('log_bytes', 0):,} beside it")
            g.add(label(view, e), bench, Item(cell_text(r), _style(r), r.reason if r.status != "ok" else ""), detail)
    return g


def page_markdown(view: SuiteView) -> list[str]:
    view = columns(view)
    out = ["## The market suite", "", INTRO, "", *markdown_grid(cells(view)), ""]
    for q in QUERIES:
        if any(r.benchmark == q.id for r in view.records):
            out += [f"### {q.id}", "", q.description, "", *markdown_grid(timings(view, q.id)), ""]
    if users.records(view):
        out += ["### Users", "", users.INTRO, "", *markdown_grid(users.table(view)), "",
                "Each user:", "", *markdown_grid(users.per_user(view)), ""]
    if users.ingest_records(view):
        out += ["### During ingest", "", users.INGEST_INTRO, "", *markdown_grid(users.ingest_table(view)), ""]
    if any(r.benchmark in LOADS for r in view.records):
        out += ["### M-W and M-SE", "", *markdown_grid(loads(view)), ""]
    return out


def page_html(view: SuiteView) -> str:
    view = columns(view)
    parts = [f'<h2 id="market">The market suite</h2><p class="muted">{escape(INTRO)}</p>',
             html_grid(cells(view), "table-market")]
    for q in QUERIES:
        if any(r.benchmark == q.id for r in view.records):
            drawn = chart(view, q.id)
            parts.append(f'<div class="chartbox"><h4>{escape(q.id)}</h4><p class="desc">{escape(q.description)}</p>'
                         f"{drawn or '<p class=muted>no engine produced a verified figure</p>'}"
                         f"<details><summary>numbers</summary>{html_grid(timings(view, q.id))}</details></div>")
    if users.records(view):
        drawn = users.charts(view)
        parts.append(f'<h3>Users</h3><p class="muted">{escape(users.INTRO)}</p>'
                     f"{f'<div class=chartbox>{drawn}</div>' if drawn else ''}{html_grid(users.table(view))}"
                     f"<details><summary>each user</summary>{html_grid(users.per_user(view))}</details>")
    if users.ingest_records(view):
        parts.append(f'<h3>During ingest</h3><p class="muted">{escape(users.INGEST_INTRO)}</p>'
                     f"{html_grid(users.ingest_table(view))}")
    if any(r.benchmark in LOADS for r in view.records):
        parts.append(f"<h3>M-W and M-SE</h3>{html_grid(loads(view))}")
    return "".join(parts)
