"""The published suite's sections of the reports (SPEC §2.1): who is fastest per category, every
cell, the latency charts and timings, W and SE, verification, memory per query, the reference
paper side by side, and the native query text.

Every table is built once, as data (:class:`~tickbench.report.widgets.Grid`), and rendered the
same in ``report.md`` and ``report.html``; the HTML page adds the charts. ``markdown(view)`` and
``html(view)`` give the sections in three parts (:class:`~tickbench.report.widgets.PageParts`):
the results, the reference paper, the appendix; the page shells place them around the
environment and the other suites' sections. Unlike the other suites' sections, these draw on
the whole run (every engine's column, the merged runs), not on a list of records.

An in-memory engine (Polars) is the in-memory reference: its cells are shown, apart, and it is
never ranked among the fastest (:mod:`tickbench.suites.published.summary`). A query cell whose
client time exceeds the engine's own time by more than max(20 %, 5 ms) is marked
transport-bound (:func:`tickbench.report.cells.transport_bound`).

The reference paper's figures are drawn as a separate series on their own axis, labelled as
theirs, and compared with ours only by rank (:mod:`tickbench.suites.published.paper`).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from tickbench.report.cells import MARK, harness_ms, server_median_ms, transport_bound
from tickbench.report.cells import cell_text as generic
from tickbench.report.widgets import (
    AddChart,
    Grid,
    Item,
    PageParts,
    Section,
    SuiteView,
    html_grid,
    markdown_grid,
    md_fence,
    memory_text,
)
from tickbench.results import Record
from tickbench.suites.published import BENCHMARKS, Benchmark
from tickbench.suites.published import paper as paper_mod
from tickbench.suites.published.summary import (
    CATEGORIES,
    category_sentence,
    contenders,
    fastest,
    headlines,
    references,
    standings,
)

LOG_SPREAD = 20.0  # a value axis turns logarithmic when max/min of what it shows exceeds this
PAPER_COLOR = "#9e9e9e"
BAD = ("wrong", "error", "timeout")


def cell_text(rec: Record | None) -> str:
    """A published cell's text: a query's median (and server median) with ✔ and a mark when it
    is transport-bound; W in seconds and MB/s; SE in %; otherwise its status."""
    if rec is None or rec.status != "ok":
        return generic(rec)
    if rec.benchmark == "W":
        csv = rec.figures.get("csv", {})
        return f"{csv.get('seconds', 0):.2f} s · {csv.get('mb_per_s', 0):.0f} MB/s ✔"
    if rec.benchmark == "SE":
        pct = rec.figures.get("pct_of_csv")
        if pct is not None:
            return f"{pct:.1f} % of CSV"
        pq = rec.figures.get("pct_of_parquet")
        return f"{pq:.1f} % of Parquet" if pq is not None else "?"
    return generic(rec)


def _fmt_ms(v: float) -> str:
    return f"{v:,.1f}" if v >= 10 else f"{v:,.2f}" if v >= 1 else f"{v:,.3f}"


def _style(r: Record | None) -> str:
    if r is None:
        return "na"
    return {"ok": "ok", "wrong": "bad", "error": "bad", "timeout": "bad"}.get(r.status, "na")


def _verdict(r: Record | None) -> Item:
    """The verification matrix cell: ✔ / ✘ / ⏱ / not supported, with the reason."""
    if r is None:
        return Item("not run", "na")
    if r.status == "ok":
        return Item("✔", "ok") if r.verified is not False else Item("✔", "ok", "not verifiable")
    label = {"wrong": "✘ wrong answer", "error": "✘ error", "timeout": "⏱ timeout",
             "unsupported": "not supported", "not_applicable": "not applicable",
             "unavailable": "engine unavailable", "interrupted": "⏸ interrupted"}[r.status]
    return Item(label, _style(r), r.reason)


class _Tables:
    """The suite's tables over one view, as data."""

    def __init__(self, view: SuiteView) -> None:
        self.view = view
        self.results = view.results
        self.engines = view.engines
        self.refs = set(references(self.results))
        self.paper = paper_mod.load()

    def column(self, engine: str) -> str:
        return f"{engine} (in-memory reference)" if engine in self.refs else engine

    def standings(self) -> Grid:
        g = Grid(["category", "engine", "fastest in", "verified", "× best (geo-mean)"])
        st = standings(self.results)
        for c in CATEGORIES:
            for sd in st[c]:
                gm = f"{sd.geomean_vs_best:.2f}×" if sd.geomean_vs_best is not None else "—"
                g.add(c, sd.engine, Item(f"{sd.wins}/{sd.total}", "num"), Item(f"{sd.covered}/{sd.total}", "num"),
                      Item(gm, "num"))
        if self.refs:
            g.notes.append(f"Ranked apart as the in-memory reference: {', '.join(sorted(self.refs))} (it holds the "
                           "columns the queries read in memory, with no storage, W, SE or durability: a lower "
                           "bound, not a contender).")
        return g

    def cells(self) -> Grid:
        g = Grid(["benchmark", *(self.column(e) for e in self.engines)])
        for b in BENCHMARKS:
            best = set(fastest(self.results, b.id))
            row: list[Item | str] = [Item(b.id, why=b.category)]
            for e in self.engines:
                rec = self.view.record(e, b.id)
                cls = "num"
                if rec is not None and rec.status in BAD:
                    cls += " bad"
                elif rec is not None and rec.status != "ok":
                    cls += " na"
                elif e in best and len(contenders(self.results)) > 1:
                    cls += " best"
                row.append(Item(cell_text(rec), cls))
            g.rows.append(row)
        g.notes.append("Median client-side latency (the engine's own time in brackets where it reports one); ✔ = "
                       "the answer equals the reference implementation's; best per benchmark highlighted; "
                       "⚠ transport-bound: the client time exceeds the engine's own by more than max(20 %, 5 ms), "
                       "the gap shown.")
        return g

    def timings(self, bid: str) -> Grid:
        g = Grid(["engine", "", "median ms", "min", "max", "mean", "std", "n", "server median", "harness share",
                  "rows", "memory", "mode"])
        for e in self.engines:
            r = self.view.record(e, bid)
            if r is None:
                continue
            if r.status == "ok" and r.stats is not None:
                s = r.stats
                server = server_median_ms(r)
                gap = harness_ms(r)
                share = "—" if gap is None else f"{gap:,.2f}" + (" ⚠ transport-bound" if transport_bound(r) else "")
                note = " ".join(x for x in (r.cold_note, r.notes) if x)
                g.add(e, Item("✔", "ok"), *(Item(_fmt_ms(v), "num") for v in (s.median_ms, s.min_ms, s.max_ms,
                                                                                s.mean_ms, s.std_ms)),
                      Item(str(s.n), "num"), Item("—" if server is None else _fmt_ms(server), "num"),
                      Item(share, "num"), Item("" if r.rows is None else f"{r.rows:,}", "num"),
                      Item(memory_text(r), "num"), Item(r.mode, why=note))
            else:
                g.add(e, Item(cell_text(r), _style(r), r.reason, span=12))
        return g

    def loads(self) -> Grid:
        g = Grid(["engine", "input", "seconds (median)", "MB/s", "rows/s", "input MB", "engine's own path (s)",
                  "ratio to own path", "n"])
        for e in self.engines:
            r = self.view.record(e, "W")
            if r is None:
                continue
            if r.status != "ok":
                g.add(e, Item(cell_text(r), _style(r), r.reason, span=8))
                continue
            for fmt, f in r.figures.items():
                if not isinstance(f, dict) or "seconds" not in f:
                    continue
                g.add(e, fmt, *(Item(t, "num") for t in (
                    f"{f['seconds']:.3f}", f"{f.get('mb_per_s', 0):,.1f}", f"{f.get('rows_per_s', 0):,.0f}",
                    f"{f.get('input_bytes', 0) / 1e6:,.1f}", f"{f.get('baseline_seconds', float('nan')):.3f}",
                    f"{f.get('ratio_to_baseline', float('nan')):.2f}×", str(len(f.get('samples_s') or [])))))
        return g

    def storage(self) -> Grid:
        g = Grid(["engine", "measured", "bytes", "data", "index", "log (not in bytes)", "% of CSV",
                  "% of Parquet-zstd", "rows"])
        for e in self.engines:
            r = self.view.record(e, "SE")
            if r is None:
                continue
            if r.status != "ok":
                g.add(e, Item(cell_text(r), _style(r), r.reason, span=8))
                continue
            f = r.figures
            pc, pp = f.get("pct_of_csv"), f.get("pct_of_parquet")
            split = [Item("—" if f.get(k) is None else f"{f[k]:,}", "num")  # records before the split have none
                     for k in ("data_bytes", "index_bytes", "log_bytes")]
            g.add(e, str(f.get("measured", "")), Item(f"{f.get('engine_bytes', 0):,}", "num"), *split,
                  Item("n/a (no CSV size)" if pc is None else f"{pc:.1f} %", "num"),
                  Item("n/a" if pp is None else f"{pp:.1f} %", "num"), Item(f"{f.get('rows', 0):,}", "num"))
        return g

    def verification(self) -> Grid:
        g = Grid(["benchmark", *self.engines])
        for b in BENCHMARKS:
            g.add(b.id, *(_verdict(self.view.record(e, b.id)) for e in self.engines))
        g.notes.append("✔ the answer equals the reference implementation's (same columns, rows and order; floats "
                       "within 1e-6 relative) · ✘ wrong answer or engine error · ⏱ timeout · “not supported” with "
                       "the engine's reason.")
        return g

    def memory(self) -> Grid:
        g = Grid(["benchmark", *self.engines])
        kinds: dict[str, str] = {}
        for b in BENCHMARKS:
            if b.kind != "query":
                continue
            row: list[Item | str] = [b.id]
            for e in self.engines:
                r = self.view.record(e, b.id)
                if r is not None and r.status == "ok" and r.memory is not None:
                    n = kinds.setdefault(r.memory.kind, str(len(kinds) + 1))
                    row.append(Item(f"{memory_text(r)} [{n}]", "num"))
                else:
                    row.append(Item("—" if r is None or r.status == "ok" else MARK[r.status], "na"))
            g.rows.append(row)
        if kinds:
            g.notes.append("Memory measured as: " + "; ".join(f"[{n}] {k}" for k, n in kinds.items())
                           + ". Kinds differ between engines: compare within one kind.")
        return g

    def problems(self) -> Grid:
        g = Grid(["engine", "benchmark", "status", "reason"])
        for r in self.view.records:
            if r.status != "ok":
                g.add(r.engine, r.benchmark, Item(r.status, _style(r)), r.reason)
        return g

    def ranks(self) -> Grid:
        g = Grid(["benchmark", "paper's order (fastest first)", "our order", "order", "pairs in the same order"])
        for r in paper_mod.rank_rows(headlines(self.results, contenders(self.results))):
            g.add(r.benchmark, " < ".join(r.paper_order), " < ".join(r.our_order),
                  Item("same" if r.agrees else "differs", "ok" if r.agrees else "bad"),
                  Item(f"{r.concordant}/{r.pairs}", "num"))
        return g

    def mapping(self) -> Grid:
        p = self.paper
        return Grid(["paper", "tickbench engine"], [[s, p.engine_of[s] or "— (no counterpart)"] for s in p.systems])

    def paper_values(self) -> Grid:
        p = self.paper
        g = Grid(["benchmark", "unit", "table", *p.systems])
        for b in BENCHMARKS:
            vals = p.values.get(b.id)
            if vals:
                g.add(b.id, p.units[b.id], p.table_of[b.id],
                      *(Item(f"{vals[s]:,.6g}", "num") if s in vals else Item("–", "na") for s in p.systems))
        return g


SUMMARY_INTRO = ("Categories as in the reference paper (sections 6.1–6.4). Ranked by verified cells only: most wins, "
                 "then the geometric mean of the ratio to the fastest engine. W ranks by CSV load seconds, SE by "
                 "bytes on disk (smaller is better).")
PAPER_NOTE = ("Their figures are not comparable in value with ours (other machine, data and cache state): the charts "
              "draw them on a separate axis, and only the rank order of the engines present in both is compared.")


def _queries(records: Sequence[Record]) -> list[Record]:
    order = {b.id: i for i, b in enumerate(BENCHMARKS)}
    return sorted((r for r in records if r.query is not None), key=lambda r: order.get(r.benchmark, len(order)))


# -- Markdown ---------------------------------------------------------------------------------

def markdown(view: SuiteView) -> PageParts[list[str]]:
    """The suite's Markdown: the results (``##`` sections from "Who is fastest" to the cells
    without a verified figure), the reference paper, and the native query text."""
    t = _Tables(view)
    st = standings(view.results)
    out = ["## Who is fastest, per category", "", SUMMARY_INTRO, ""]
    out += [f"- {category_sentence(c, st[c])}" for c in CATEGORIES]
    out += ["", *markdown_grid(t.standings()), "", "## All cells", "", *markdown_grid(t.cells()), "",
            "## Query timings (ms)", ""]
    for b in BENCHMARKS:
        if b.kind == "query" and any(r.benchmark == b.id for r in view.records):
            out += [f"### {b.id}", "", b.description, "", *markdown_grid(t.timings(b.id)), ""]
    if any(r.benchmark == "W" for r in view.records):
        out += ["## W: bulk load of the bulk-load day", "", *markdown_grid(t.loads()), ""]
    if any(r.benchmark == "SE" for r in view.records):
        out += ["## SE: storage efficiency of the 30-day period", "", *markdown_grid(t.storage()), ""]
    out += ["## Verification", "", *markdown_grid(t.verification()), "", "## Memory per query", "",
            *markdown_grid(t.memory())]
    if any(r.status != "ok" for r in view.records):
        out += ["", "## Cells without a verified figure", "", *markdown_grid(t.problems())]
    p = t.paper
    reference = ["", "## The reference paper, side by side", "",
                 f"{p.citation} Their machine: {p.machine}. Their data: {p.dataset}. Their protocol: {p.protocol}.",
                 "", PAPER_NOTE, "", "### Rank order, paper vs ours", ""]
    ranks = t.ranks()
    reference += markdown_grid(ranks) if ranks.rows else [
        "No benchmark has two or more engines with a figure both here and in the paper."]
    reference += ["", "### Name mapping", "", *markdown_grid(t.mapping()), "",
                  f"### The paper's figures ({paper_mod.PAPER_LABEL}; tables 5–8)", "",
                  *markdown_grid(t.paper_values())]
    appendix: list[str] = []
    queries = _queries(view.records)
    if queries:
        appendix += ["## Native query text", ""]
        for r in queries:
            assert r.query is not None
            appendix += [f"<details><summary>{escape(r.engine)} · {escape(r.benchmark)} · <code>{escape(r.query.file)}"
                         f"</code> · sha256 {escape(r.query.sha256[:16])}…</summary>", "",
                         *md_fence(r.query.text.rstrip()), "", "</details>", ""]
    return PageParts(results=out, reference=reference, appendix=appendix)


# -- HTML -------------------------------------------------------------------------------------

def html(view: SuiteView) -> PageParts[list[Section]]:
    """The suite's HTML sections, each with its anchor and its label in the page's navigation;
    charts are added to the page in the order of the page."""
    s = _Sections(view)
    results = [Section("summary", "Summary", s.summary()), Section("charts", "Latency", s.latency()),
               Section("load", "Load &amp; storage", s.load_storage()),
               Section("verification", "Verification", s.verification()), Section("memory", "Memory", s.memory())]
    return PageParts(results=results, reference=[Section("paper", "Reference paper", s.paper_section())],
                     appendix=[Section("queries", "Query text", s.queries())])


def _no_chart(div_id: str, data: list[dict[str, Any]], layout: dict[str, Any]) -> str:
    return ""


class _Sections:
    """The published suite's HTML sections and charts over one page."""

    def __init__(self, view: SuiteView) -> None:
        self.view = view
        self.t = _Tables(view)
        self.results = view.results
        self.engines = view.engines
        self.colors = view.colors
        self.paper = self.t.paper
        self._add: AddChart = view.add or _no_chart

    # -- charts ---------------------------------------------------------------------------
    def _layout(self, ours_title: str, ours_unit: str, ours_vals: list[float], paper_unit: str,
                paper_vals: list[float], notes: list[dict[str, Any]]) -> dict[str, Any]:
        has_paper = bool(paper_vals)
        split = 0.6 if has_paper else 1.0
        yt = axis_type(ours_vals)
        layout: dict[str, Any] = {
            "height": 340, "margin": {"l": 70, "r": 20, "t": 36, "b": 40}, "barmode": "group",
            "bargap": 0.6 if len(self.engines) <= 2 else 0.25, "font": {"size": 12},
            "legend": {"orientation": "h", "x": 0, "y": -0.16, "yanchor": "top"},
            "xaxis": {"domain": [0, split - 0.06 if has_paper else 1], "type": "category", "automargin": True},
            "yaxis": {"title": {"text": ours_unit + (" · log scale" if yt == "log" else "")}, "type": yt,
                      "automargin": True, "rangemode": "tozero"},
            "annotations": [{"text": f"<b>{escape(ours_title)}</b>", "xref": "x domain", "yref": "paper",
                             "x": 0, "y": 1.09, "showarrow": False, "xanchor": "left"}, *notes],
        }
        if has_paper:
            pt = axis_type(paper_vals)
            layout["xaxis2"] = {"domain": [split + 0.04, 1], "anchor": "y2", "type": "category",
                                "automargin": True}
            layout["yaxis2"] = {"anchor": "x2", "type": pt, "automargin": True, "rangemode": "tozero",
                                "title": {"text": paper_unit + (" · log scale" if pt == "log" else "")}}
            layout["annotations"].append(
                {"text": f"<b>{escape(paper_mod.PAPER_LABEL)}</b>", "xref": "x2 domain", "yref": "paper",
                 "x": 0, "y": 1.09, "showarrow": False, "xanchor": "left", "font": {"color": "#616161"}})
        return layout

    def _status_notes(self, recs: dict[str, Record | None]) -> list[dict[str, Any]]:
        """A label on the category axis for each engine without a figure."""
        notes = []
        for e, rec in recs.items():
            if rec is None or rec.status == "ok":
                continue
            notes.append({"text": escape(cell_text(rec)), "x": e, "xref": "x", "y": 0.04, "yref": "y domain",
                          "showarrow": False, "textangle": -90, "yanchor": "bottom",
                          "font": {"color": "#b3261e" if rec.status in BAD else "#5f6b76"}})
        return notes

    def _paper_trace(self, bid: str, scale: float = 1.0) -> tuple[dict[str, Any] | None, list[float]]:
        theirs = self.paper.values.get(bid, {})
        if not theirs:
            return None, []
        systems = [s for s in self.paper.systems if s in theirs]
        ys = [theirs[s] * scale for s in systems]
        trace = {"type": "bar", "name": paper_mod.PAPER_LABEL, "x": [self.paper.label(s) for s in systems],
                 "y": ys, "xaxis": "x2", "yaxis": "y2",
                 "marker": {"color": PAPER_COLOR, "pattern": {"shape": "/", "fillmode": "overlay",
                                                             "fgcolor": "#ffffff", "fgopacity": 0.7}},
                 "hovertemplate": "%{x}: %{y:,.4g} (paper, table " + self.paper.table_of[bid] + ")<extra></extra>"}
        return trace, ys

    def query_chart(self, bid: str) -> str | None:
        recs = {e: self.view.record(e, bid) for e in self.engines}
        ok = {e: r for e, r in recs.items() if r is not None and r.status == "ok" and r.stats is not None}
        if not ok:
            return None
        xs = list(ok)
        med = [r.stats.median_ms for r in ok.values() if r.stats]
        lo = [r.stats.min_ms for r in ok.values() if r.stats]
        hi = [r.stats.max_ms for r in ok.values() if r.stats]
        hover = [f"{e}: median {_fmt_ms(m)} ms, min {_fmt_ms(a)}, max {_fmt_ms(b)}, n={r.stats.n}"
                 for (e, r), m, a, b in zip(ok.items(), med, lo, hi, strict=True) if r.stats]
        ours = {"type": "bar", "name": "tickbench (this run)", "x": xs, "y": med,
                "marker": {"color": [self.colors[e] for e in xs]},
                "error_y": {"type": "data", "symmetric": False, "array": [h - m for h, m in zip(hi, med, strict=True)],
                            "arrayminus": [m - low for m, low in zip(med, lo, strict=True)], "color": "#333",
                            "thickness": 1.3, "width": 5},
                "hovertext": hover, "hoverinfo": "text"}
        data: list[dict[str, Any]] = [ours]
        missing = [e for e in self.engines if e not in ok]
        if missing:  # keep failed engines on the axis, so their status label has a place
            data.append({"type": "bar", "x": missing, "y": [None] * len(missing), "showlegend": False,
                         "hoverinfo": "skip", "name": "no figure"})
        trace, pvals = self._paper_trace(bid)
        if trace:
            data.append(trace)
        layout = self._layout("ours: this machine, this data", "ms (median; bars min–max)", lo + hi,
                              "ms (mean of 10, cold)", pvals, self._status_notes(recs))
        layout["xaxis"]["categoryarray"] = self.engines
        layout["xaxis"]["categoryorder"] = "array"
        return self._add(f"chart-{bid}", data, layout)

    def load_chart(self) -> str | None:
        recs = {e: self.view.record(e, "W") for e in self.engines}
        ok = {e: r for e, r in recs.items() if r is not None and r.status == "ok" and r.figures}
        if not ok:
            return None
        data: list[dict[str, Any]] = []
        vals: list[float] = []
        styles = {("csv", False): ("#1f5f99", "CSV · tickbench load path"),
                  ("csv", True): ("#8fb8de", "CSV · engine's own baseline path"),
                  ("parquet", False): ("#b85c00", "Parquet · tickbench load path"),
                  ("parquet", True): ("#f2b67a", "Parquet · engine's own baseline path")}
        for (fmt, baseline), (color, name) in styles.items():
            xs, ys, up, down, hover = [], [], [], [], []
            for e, r in ok.items():
                f = r.figures.get(fmt)
                if not f:
                    continue
                samples = f.get("baseline_samples_s" if baseline else "samples_s") or []
                y = f.get("baseline_seconds" if baseline else "seconds")
                if y is None:
                    continue
                xs.append(e)
                ys.append(y)
                up.append((max(samples) - y) if samples else 0)
                down.append((y - min(samples)) if samples else 0)
                vals += [y, *samples]
                mbps = f.get("input_bytes", 0) / 1e6 / y if y else 0
                hover.append(f"{e} · {name}: {y:.3f} s, {mbps:,.1f} MB/s")
            if xs:
                data.append({"type": "bar", "name": name, "x": xs, "y": ys, "marker": {"color": color},
                             "error_y": {"type": "data", "symmetric": False, "array": up, "arrayminus": down,
                                         "color": "#333", "thickness": 1.2, "width": 4},
                             "hovertext": hover, "hoverinfo": "text"})
        trace, pvals = self._paper_trace("W", scale=1e-3)
        if trace:
            data.append(trace)
        layout = self._layout("ours: the bulk-load day", "seconds (median; bars min–max)", vals,
                              "seconds (their 2.5 M-row CSV day)", pvals, self._status_notes(recs))
        return self._add("chart-W", data, layout)

    def storage_chart(self) -> str | None:
        recs = {e: self.view.record(e, "SE") for e in self.engines}
        ok = {e: r for e, r in recs.items() if r is not None and r.status == "ok" and r.figures}
        if not ok:
            return None
        data: list[dict[str, Any]] = []
        vals: list[float] = []
        for key, name, color in (("pct_of_csv", "% of CSV", "#1f5f99"),
                                 ("pct_of_parquet", "% of Parquet-zstd", "#b85c00")):
            xs = [e for e, r in ok.items() if r.figures.get(key) is not None]
            ys = [float(ok[e].figures[key]) for e in xs]
            vals += ys
            if xs:
                data.append({"type": "bar", "name": name, "x": xs, "y": ys, "marker": {"color": color},
                             "hovertemplate": "%{x}: %{y:.1f} " + name + "<extra></extra>"})
        if not data:
            return None
        trace, pvals = self._paper_trace("SE")
        if trace:
            data.append(trace)
        layout = self._layout("ours: the 30-day period on disk", "% (lower is smaller)", vals,
                              "% of CSV", pvals, self._status_notes(recs))
        return self._add("chart-SE", data, layout)

    def memory_chart(self) -> str | None:
        data: list[dict[str, Any]] = []
        vals: list[float] = []
        ids = [b.id for b in BENCHMARKS if b.kind == "query"]
        for e in self.engines:
            xs, ys = [], []
            for bid in ids:
                r = self.view.record(e, bid)
                if r is not None and r.status == "ok" and r.memory is not None:
                    xs.append(bid)
                    ys.append(r.memory.bytes / 2**20)
            if xs:
                vals += ys
                data.append({"type": "bar", "name": e, "x": xs, "y": ys, "marker": {"color": self.colors[e]},
                             "hovertemplate": e + " · %{x}: %{y:,.2f} MiB<extra></extra>"})
        if not data:
            return None
        layout = self._layout("memory per query (ours)", "MiB", vals, "", [], [])
        layout["xaxis"]["categoryarray"] = ids
        layout["xaxis"]["categoryorder"] = "array"
        return self._add("chart-memory", data, layout)

    # -- sections -------------------------------------------------------------------------
    def summary(self) -> str:
        st = standings(self.results)
        cards = []
        for cat in CATEGORIES:
            rows = [s for s in st[cat] if s.covered]
            if rows:
                top = rows[0]
                rest = "".join(
                    f"<p>{escape(s.engine)}: fastest in {s.wins}/{s.total}, "
                    f"{'' if s.geomean_vs_best is None else f'{s.geomean_vs_best:.2f}× best on average, '}"
                    f"{s.covered}/{s.total} verified</p>" for s in rows[1:4])
                cards.append(f'<div class="card"><h3>{escape(cat)}</h3><div class="who" '
                             f'style="color:{self.colors[top.engine]}">{escape(top.engine)}</div>'
                             f"<p>fastest in {top.wins} of {top.total} · {top.covered}/{top.total} verified</p>"
                             f"{rest}</div>")
            else:
                cards.append(f'<div class="card"><h3>{escape(cat)}</h3><p class="muted">'
                             "no verified figure</p></div>")
        lines = "".join(f"<li>{_md_bold(category_sentence(c, st[c]))}</li>" for c in CATEGORIES)
        return (f'<h2 id="summary">Who is fastest, per category</h2><p class="muted">{escape(SUMMARY_INTRO)}</p>'
                f'<div class="cards">{"".join(cards)}</div><ul>{lines}</ul>'
                f"<details><summary>standings</summary>{html_grid(self.t.standings())}</details>"
                f"<h3>All cells</h3>{html_grid(self.t.cells())}")

    def latency(self) -> str:
        out = ['<h2 id="charts">Latency per benchmark</h2><p class="muted">Left: our median latency per '
               "engine, error bars from the fastest to the slowest timed repetition. Right, grey hatched: the "
               "reference paper's published figure for the same benchmark — their machine, their data, cold "
               f"cache, mean of 10 — on its own axis. A value axis is logarithmic when what it shows spans "
               f"more than {LOG_SPREAD:g}×.</p>"]
        for cat in CATEGORIES[1:]:
            out.append(f"<h3>{escape(cat)}</h3>")
            for b in BENCHMARKS:
                if b.category == cat:
                    out.append(self._query_box(b))
        return "".join(out)

    def _query_box(self, b: Benchmark) -> str:
        chart = self.query_chart(b.id)
        ref = self.paper.table_of.get(b.id)
        cite = f" · paper table {ref}" if ref else ""
        return (f'<div class="chartbox"><h4>{escape(b.id)}</h4><p class="desc">{escape(b.description)}{cite}</p>'
                f"{chart or '<p class=muted>no engine produced a verified figure</p>'}"
                f"<details><summary>numbers</summary>{html_grid(self.t.timings(b.id))}</details></div>")

    def load_storage(self) -> str:
        chart = self.load_chart()
        se_chart = self.storage_chart()
        return ('<h2 id="load">Write and storage (W, SE)</h2>'
                '<div class="chartbox"><h4>W — bulk load of the bulk-load day</h4><p class="desc">'
                "Seconds until the rows are committed and queryable, from CSV and from Parquet, through "
                "tickbench's load path and, beside it, the engine's own simplest bulk path · paper table 5 "
                f"(kdb+ loads CSV at {self.paper.kdb_csv_mb_per_s} MB/s there)</p>"
                f"{chart or '<p class=muted>no verified W figure</p>'}</div>{html_grid(self.t.loads())}"
                '<div class="chartbox"><h4>SE — storage efficiency of the 30-day period</h4><p class="desc">'
                "Bytes on disk after the engine's own compaction, as % of the same rows as CSV and as "
                "Parquet-zstd · paper table 5 (“compression ratio”, % of CSV)</p>"
                f"{se_chart or '<p class=muted>no verified SE figure</p>'}</div>{html_grid(self.t.storage())}")

    def verification(self) -> str:
        problems = self.t.problems()
        rest = f"<h3>Cells without a verified figure</h3>{html_grid(problems)}" if problems.rows else ""
        return f'<h2 id="verification">Verification</h2>{html_grid(self.t.verification())}{rest}'

    def memory(self) -> str:
        chart = self.memory_chart()
        box = f'<div class="chartbox">{chart}</div>' if chart else ""
        return f'<h2 id="memory">Memory per query</h2>{box}{html_grid(self.t.memory())}'

    def paper_section(self) -> str:
        p = self.paper
        ranks = self.t.ranks()
        rank_table = html_grid(ranks) if ranks.rows else (
            "<p class='muted'>No benchmark has two or more engines with a figure both here and in the paper, so "
            "there is no rank order to compare. Engines the paper measured: "
            + escape(", ".join(p.label(s) for s in p.systems)) + ".</p>")
        return f"""<h2 id="paper">The reference paper, side by side</h2>
<div class="paperbox"><p><b>{escape(p.citation)}</b></p>
<p>Their machine: {escape(p.machine)}.</p><p>Their data: {escape(p.dataset)}.</p>
<p>Their protocol: {escape(p.protocol)}.</p><p>{escape(PAPER_NOTE)}</p></div>
<h3>Rank order, paper vs ours</h3>{rank_table}
<h3>Name mapping</h3>{html_grid(self.t.mapping())}
<h3>The paper's figures (tables 5–8, transcribed)</h3>{html_grid(self.t.paper_values())}"""

    def queries(self) -> str:
        out = ['<h2 id="queries">The native query text that ran</h2><p class="muted">Exactly as each engine '
               "ran it, with its file and SHA-256 (compare refuses cells whose text differs).</p>"]
        current = ""
        for r in _queries(self.view.records):
            assert r.query is not None
            if r.benchmark != current:
                current = r.benchmark
                out.append(f"<h3>{escape(current)}</h3>")
            out.append(f"<details><summary>{escape(r.engine)} · <code>{escape(r.query.file)}</code> · "
                       f"<span class='muted'>sha256 {escape(r.query.sha256[:16])}…</span></summary>"
                       f"<pre>{escape(r.query.text)}</pre></details>")
        return "".join(out)


def axis_type(values: Sequence[float]) -> str:
    """``log`` when the values span more than ``LOG_SPREAD``×, else ``linear``."""
    pos = [v for v in values if v > 0]
    if len(pos) >= 2 and max(pos) / min(pos) > LOG_SPREAD:
        return "log"
    return "linear"


def _md_bold(text: str) -> str:
    """``**x**`` (the Markdown summary's emphasis) as HTML, the rest escaped."""
    parts = escape(text).split("**")
    return "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts))
