"""The published suite's sections of the reports (SPEC §2.1): who is fastest per category,
every cell, the latency charts and timings, W and SE, verification, memory per query, the
reference paper side by side, and the native query text.

The page shells (:mod:`tickbench.report.html`, :mod:`tickbench.report.markdown`) place these
around the environment and the other suites' sections (:mod:`tickbench.report.sections`);
``markdown(results)`` and ``html(page)`` give them in three parts, as
:class:`~tickbench.report.widgets.PageParts`: the results, the reference paper, the appendix.
Unlike the other suites' sections, these draw on the whole run (every engine's column, the
merged runs), not on a list of records.

The reference paper's figures are drawn as a separate series on their own axis, labelled as
theirs, and compared with ours only by rank (:mod:`tickbench.report.paper`).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from tickbench.report import paper as paper_mod
from tickbench.report.cells import MARK, cell_text, matrix, problems, server_median_ms
from tickbench.report.summary import CATEGORIES, category_sentence, fastest, headlines, memory_text, standings
from tickbench.report.widgets import ChartPage, PageParts, Section, md_cell, mib
from tickbench.results import Record, Results
from tickbench.suites.published import BENCHMARKS

LOG_SPREAD = 20.0  # a value axis turns logarithmic when max/min of what it shows exceeds this
PAPER_COLOR = "#9e9e9e"


# -- Markdown ---------------------------------------------------------------------------------

def markdown(results: Results) -> PageParts[list[str]]:
    """The suite's Markdown: the results (``##`` sections from "Who is fastest" to the cells
    without a verified figure), the reference paper, and the native query text."""
    engines, rows = matrix(results)
    out: list[str] = [
        "## Who is fastest, per category",
        "",
        "Categories as in the reference paper; ranked on verified cells: most wins, then the geometric "
        "mean of the ratio to the fastest engine. W ranks by CSV load seconds, SE by bytes on disk.",
        "",
    ]
    st = standings(results)
    out += [f"- {category_sentence(c, st[c])}" for c in CATEGORIES]
    out += ["", "| category | engine | fastest in | verified | × best (geo-mean) |", "|---|---|---|---|---|"]
    for c in CATEGORIES:
        for sd in st[c]:
            gm = f"{sd.geomean_vs_best:.2f}×" if sd.geomean_vs_best is not None else "—"
            out.append(f"| {c} | {sd.engine} | {sd.wins}/{sd.total} | {sd.covered}/{sd.total} | {gm} |")
    out += [
        "",
        "## All cells",
        "",
        "Median client-side latency; ✔ = answer verified against the reference implementation.",
        "",
        "| benchmark | " + " | ".join(engines) + " |",
        "|---|" + "---|" * len(engines),
    ]
    out += [f"| {bid} | " + " | ".join(cells) + " |" for bid, cells in rows]
    detail = [r for r in results.records if r.status == "ok" and r.stats is not None]
    if detail:
        out += ["", "## Query timings (ms)", "",
                "| engine | benchmark | median | mean | std | min | max | n | server median | memory | mode |",
                "|---|---|---|---|---|---|---|---|---|---|---|"]
        kinds: dict[str, int] = {}
        for r in detail:
            s = r.stats
            assert s is not None
            mem = "—"
            if r.memory:
                n = kinds.setdefault(r.memory.kind, len(kinds) + 1)
                mem = f"{mib(r.memory.bytes)} [{n}]"
            server = server_median_ms(r)
            srv = "—" if server is None else f"{server:.2f}"
            out.append(f"| {r.engine} | {r.benchmark} | {s.median_ms:.2f} | {s.mean_ms:.2f} | "
                       f"{s.std_ms:.2f} | {s.min_ms:.2f} | {s.max_ms:.2f} | {s.n} | {srv} | {mem} | {r.mode} |")
        if kinds:
            out += ["", "Memory measured as: " + "; ".join(f"[{n}] {k}" for k, n in kinds.items()) + "."]
    loads = [r for r in results.records if r.benchmark == "W" and r.status == "ok"]
    if loads:
        out += ["", "## W: bulk load of the bulk-load day", "",
                "| engine | input | seconds | rows/s | MB/s | engine's own path (s) | ratio |",
                "|---|---|---|---|---|---|---|"]
        for r in loads:
            for fmt, f in r.figures.items():
                if not isinstance(f, dict) or "seconds" not in f:
                    continue
                out.append(f"| {r.engine} | {fmt} | {f['seconds']:.3f} | {f.get('rows_per_s', 0):,.0f} | "
                           f"{f.get('mb_per_s', 0):.1f} | {f.get('baseline_seconds', float('nan')):.3f} | "
                           f"{f.get('ratio_to_baseline', float('nan')):.2f}× |")
    storage = [r for r in results.records if r.benchmark == "SE" and r.status == "ok"]
    if storage:
        out += ["", "## SE: storage efficiency of the 30-day period", "",
                "| engine | measured | bytes | % of CSV | % of Parquet-zstd |", "|---|---|---|---|---|"]
        for r in storage:
            f = r.figures
            pct_csv = f"{f['pct_of_csv']:.1f}" if f.get("pct_of_csv") is not None else "n/a"
            pct_pq = f"{f['pct_of_parquet']:.1f}" if f.get("pct_of_parquet") is not None else "n/a"
            out.append(f"| {r.engine} | {f.get('measured', '')} | {f.get('engine_bytes', 0):,} | {pct_csv} | "
                       f"{pct_pq} |")
    bad = problems(results)
    if bad:
        out += ["", "## Cells without a verified figure", "", "| engine | benchmark | status | reason |",
                "|---|---|---|---|"]
        for r in bad:
            out.append(f"| {r.engine} | {r.benchmark} | {r.status} | {md_cell(r.reason)} |")
    appendix: list[str] = []
    queries = [r for r in results.records if r.query is not None]
    if queries:
        appendix += ["## Native query text", ""]
        for r in queries:
            assert r.query is not None
            appendix += [f"<details><summary>{r.engine} · {r.benchmark} · <code>{r.query.file}</code> · "
                         f"sha256 {r.query.sha256[:16]}…</summary>", "", "```", r.query.text.rstrip(), "```", "",
                         "</details>", ""]
    return PageParts(results=out, reference=_md_paper(results), appendix=appendix)


def _md_paper(results: Results) -> list[str]:
    """The reference paper section: who they are, the rank comparison, their figures."""
    p = paper_mod.load()
    out = ["", "## The reference paper, side by side", "",
           f"{p.citation} Their machine: {p.machine}. Their data: {p.dataset}. Their protocol: {p.protocol}.",
           "", "Their figures are not comparable in value with ours (other machine, data and cache state); "
           "only the rank order of the engines present in both is compared.", "",
           "Name mapping: " + ", ".join(f"{s} ↔ {p.engine_of[s] or '—'}" for s in p.systems) + ".", "",
           "### Rank order, paper vs ours", ""]
    ranks = paper_mod.rank_rows(headlines(results))
    if ranks:
        out += ["| benchmark | paper (fastest first) | ours | order | pairs in the same order |",
                "|---|---|---|---|---|"]
        out += [f"| {r.benchmark} | {' < '.join(r.paper_order)} | {' < '.join(r.our_order)} | "
                f"{'same' if r.agrees else 'differs'} | {r.concordant}/{r.pairs} |" for r in ranks]
    else:
        out.append("No benchmark has two or more engines with a figure both here and in the paper.")
    out += ["", f"### The paper's figures ({paper_mod.PAPER_LABEL}; tables 5–8)", "",
            "| benchmark | unit | table | " + " | ".join(p.systems) + " |",
            "|---|---|---|" + "---|" * len(p.systems)]
    for b in BENCHMARKS:
        vals = p.values.get(b.id)
        if vals:
            cells = [f"{vals[s]:,.6g}" if s in vals else "–" for s in p.systems]
            out.append(f"| {b.id} | {p.units[b.id]} | {p.table_of[b.id]} | " + " | ".join(cells) + " |")
    return out


# -- HTML -------------------------------------------------------------------------------------

def html(page: ChartPage) -> PageParts[list[Section]]:
    """The suite's HTML sections, each with its anchor and its label in the page's navigation;
    charts are added to ``page`` in the order of the page."""
    s = _Sections(page)
    results = [Section("summary", "Summary", s.summary()), Section("charts", "Latency", s.latency()),
               Section("load", "Load &amp; storage", s.load_storage()),
               Section("verification", "Verification", s.verification()), Section("memory", "Memory", s.memory())]
    return PageParts(results=results, reference=[Section("paper", "Reference paper", s.paper_section())],
                     appendix=[Section("queries", "Query text", s.queries())])


class _Sections:
    """The published suite's HTML sections and charts over one page."""

    def __init__(self, page: ChartPage) -> None:
        self.results = page.results
        self.engines = page.engines
        self.colors = page.colors
        self.paper = paper_mod.load()
        self._add = page.add

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
                          "font": {"color": "#b3261e" if rec.status in ("wrong", "error", "timeout")
                                   else "#5f6b76"}})
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
        recs = {e: self.results.record(e, bid) for e in self.engines}
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
        recs = {e: self.results.record(e, "W") for e in self.engines}
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
        recs = {e: self.results.record(e, "SE") for e in self.engines}
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
                r = self.results.record(e, bid)
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
        head = "".join(f"<th>{escape(e)}</th>" for e in self.engines)
        body = []
        for b in BENCHMARKS:
            best = set(fastest(self.results, b.id))
            tds = []
            for e in self.engines:
                rec = self.results.record(e, b.id)
                text = cell_text(rec)
                cls = "num"
                if rec is not None and rec.status in ("wrong", "error", "timeout"):
                    cls += " bad"
                elif rec is not None and rec.status != "ok":
                    cls += " na"
                elif e in best and len(self.engines) > 1:
                    cls += " best"
                tds.append(f'<td class="{cls}">{escape(text)}</td>')
            body.append(f"<tr><td><b>{escape(b.id)}</b> <span class='muted'>{escape(b.category)}</span></td>"
                        f"{''.join(tds)}</tr>")
        lines = "".join(f"<li>{_md_bold(category_sentence(c, st[c]))}</li>" for c in CATEGORIES)
        return f"""<h2 id="summary">Who is fastest, per category</h2>
<p class="muted">Categories as in the reference paper (sections 6.1–6.4). Ranked by verified cells only:
most wins, then the geometric mean of the ratio to the fastest engine. W ranks by CSV load seconds, SE by
bytes on disk (smaller is better).</p>
<div class="cards">{"".join(cards)}</div><ul>{lines}</ul>
<h3>All cells</h3><p class="muted">Median client-side latency; ✔ = answer verified against the reference
implementation; best per benchmark highlighted.</p>
<table><tr><th>benchmark</th>{head}</tr>{"".join(body)}</table>"""

    def latency(self) -> str:
        out = ['<h2 id="charts">Latency per benchmark</h2><p class="muted">Left: our median latency per '
               "engine, error bars from the fastest to the slowest timed repetition. Right, grey hatched: the "
               "reference paper's published figure for the same benchmark — their machine, their data, cold "
               f"cache, mean of 10 — on its own axis. A value axis is logarithmic when what it shows spans "
               f"more than {LOG_SPREAD:g}×.</p>"]
        for cat in CATEGORIES[1:]:
            out.append(f"<h3>{escape(cat)}</h3>")
            for b in BENCHMARKS:
                if b.category != cat:
                    continue
                chart = self.query_chart(b.id)
                table = self._timing_table(b.id)
                ref = self.paper.table_of.get(b.id)
                cite = f" · paper table {ref}" if ref else ""
                out.append(f'<div class="chartbox"><h4>{escape(b.id)}</h4><p class="desc">'
                           f"{escape(b.description)}{cite}</p>"
                           f"{chart or '<p class=muted>no engine produced a verified figure</p>'}"
                           f"<details><summary>numbers</summary>{table}</details></div>")
        return "".join(out)

    def _timing_table(self, bid: str) -> str:
        rows = []
        for e in self.engines:
            r = self.results.record(e, bid)
            if r is None:
                continue
            if r.status == "ok" and r.stats is not None:
                s = r.stats
                mem = f"{memory_text(r)}" if r.memory else "—"
                rows.append(f"<tr><td>{escape(e)}</td><td class='ok'>✔</td><td class='num'>{_fmt_ms(s.median_ms)}"
                            f"</td><td class='num'>{_fmt_ms(s.min_ms)}</td><td class='num'>{_fmt_ms(s.max_ms)}</td>"
                            f"<td class='num'>{_fmt_ms(s.mean_ms)}</td><td class='num'>{_fmt_ms(s.std_ms)}</td>"
                            f"<td class='num'>{s.n}</td><td class='num'>{r.rows if r.rows is not None else ''}</td>"
                            f"<td class='num'>{mem}</td><td>{escape(r.mode)}{_note(r)}</td></tr>")
            else:
                rows.append(f"<tr><td>{escape(e)}</td><td colspan='10' class='{_cls(r)}'>"
                            f"{escape(cell_text(r))}<span class='why'>{escape(r.reason)}</span></td></tr>")
        return ("<table><tr><th>engine</th><th></th><th>median ms</th><th>min</th><th>max</th><th>mean</th>"
                "<th>std</th><th>n</th><th>rows</th><th>memory</th><th>mode</th></tr>" + "".join(rows) + "</table>")

    def load_storage(self) -> str:
        out = ['<h2 id="load">Write and storage (W, SE)</h2>']
        chart = self.load_chart()
        out.append('<div class="chartbox"><h4>W — bulk load of the bulk-load day</h4><p class="desc">'
                   "Seconds until the rows are committed and queryable, from CSV and from Parquet, through "
                   "tickbench's load path and, beside it, the engine's own simplest bulk path · paper table 5 "
                   f"(kdb+ loads CSV at {self.paper.kdb_csv_mb_per_s} MB/s there)</p>"
                   f"{chart or '<p class=muted>no verified W figure</p>'}</div>")
        rows = []
        for e in self.engines:
            r = self.results.record(e, "W")
            if r is None:
                continue
            if r.status != "ok":
                rows.append(f"<tr><td>{escape(e)}</td><td colspan='8' class='{_cls(r)}'>{escape(cell_text(r))}"
                            f"<span class='why'>{escape(r.reason)}</span></td></tr>")
                continue
            for fmt, f in r.figures.items():
                if not isinstance(f, dict) or "seconds" not in f:
                    continue
                rows.append(
                    f"<tr><td>{escape(e)}</td><td>{escape(fmt)}</td><td class='num'>{f['seconds']:.3f}</td>"
                    f"<td class='num'>{f.get('mb_per_s', 0):,.1f}</td>"
                    f"<td class='num'>{f.get('rows_per_s', 0):,.0f}</td>"
                    f"<td class='num'>{f.get('input_bytes', 0) / 1e6:,.1f}</td>"
                    f"<td class='num'>{f.get('baseline_seconds', float('nan')):.3f}</td>"
                    f"<td class='num'>{f.get('ratio_to_baseline', float('nan')):.2f}×</td>"
                    f"<td class='num'>{len(f.get('samples_s') or [])}</td></tr>")
        out.append("<table><tr><th>engine</th><th>input</th><th>seconds (median)</th><th>MB/s</th><th>rows/s</th>"
                   "<th>input MB</th><th>engine's own path (s)</th><th>ratio to own path</th><th>n</th></tr>"
                   + "".join(rows) + "</table>")
        chart = self.storage_chart()
        out.append('<div class="chartbox"><h4>SE — storage efficiency of the 30-day period</h4><p class="desc">'
                   "Bytes on disk after the engine's own compaction, as % of the same rows as CSV and as "
                   "Parquet-zstd · paper table 5 (“compression ratio”, % of CSV)</p>"
                   f"{chart or '<p class=muted>no verified SE figure</p>'}</div>")
        rows = []
        for e in self.engines:
            r = self.results.record(e, "SE")
            if r is None:
                continue
            if r.status != "ok":
                rows.append(f"<tr><td>{escape(e)}</td><td colspan='5' class='{_cls(r)}'>{escape(cell_text(r))}"
                            f"<span class='why'>{escape(r.reason)}</span></td></tr>")
                continue
            f = r.figures
            pc = f.get("pct_of_csv")
            pp = f.get("pct_of_parquet")
            rows.append(f"<tr><td>{escape(e)}</td><td>{escape(str(f.get('measured', '')))}</td>"
                        f"<td class='num'>{f.get('engine_bytes', 0):,}</td>"
                        f"<td class='num'>{'n/a (no CSV size)' if pc is None else f'{pc:.1f} %'}</td>"
                        f"<td class='num'>{'n/a' if pp is None else f'{pp:.1f} %'}</td>"
                        f"<td class='num'>{f.get('rows', 0):,}</td></tr>")
        out.append("<table><tr><th>engine</th><th>measured</th><th>bytes</th><th>% of CSV</th>"
                   "<th>% of Parquet-zstd</th><th>rows</th></tr>" + "".join(rows) + "</table>")
        return "".join(out)

    def verification(self) -> str:
        head = "".join(f"<th>{escape(e)}</th>" for e in self.engines)
        body = []
        for b in BENCHMARKS:
            tds = []
            for e in self.engines:
                r = self.results.record(e, b.id)
                tds.append(f"<td class='{_cls(r)}'>{_verdict(r)}</td>")
            body.append(f"<tr><td><b>{escape(b.id)}</b></td>{''.join(tds)}</tr>")
        return f"""<h2 id="verification">Verification</h2>
<p class="muted">✔ the answer equals the reference implementation's (same columns, rows and order; floats
within 1e-6 relative) · ✘ wrong answer or engine error · ⏱ timeout · “not supported” with the engine's reason.</p>
<table><tr><th>benchmark</th>{head}</tr>{"".join(body)}</table>"""

    def memory(self) -> str:
        chart = self.memory_chart()
        kinds: dict[str, str] = {}
        head = "".join(f"<th>{escape(e)}</th>" for e in self.engines)
        body = []
        for b in BENCHMARKS:
            if b.kind != "query":
                continue
            tds = []
            for e in self.engines:
                r = self.results.record(e, b.id)
                if r is not None and r.status == "ok" and r.memory is not None:
                    n = kinds.setdefault(r.memory.kind, str(len(kinds) + 1))
                    tds.append(f"<td class='num' title='{escape(r.memory.kind)}'>{memory_text(r)} "
                               f"<sup>{n}</sup></td>")
                else:
                    mark = "—" if r is None or r.status == "ok" else MARK[r.status]
                    tds.append(f"<td class='na'>{escape(mark)}</td>")
            body.append(f"<tr><td><b>{escape(b.id)}</b></td>{''.join(tds)}</tr>")
        legend = "".join(f"<li><sup>{n}</sup> {escape(k)}</li>" for k, n in kinds.items())
        box = f'<div class="chartbox">{chart}</div>' if chart else ""
        return f"""<h2 id="memory">Memory per query</h2>
<p class="muted">How each figure was measured is its kind (superscript); kinds differ between engines, so
compare within one kind.</p>{box}
<table><tr><th>benchmark</th>{head}</tr>{"".join(body)}</table><ul>{legend}</ul>"""

    def paper_section(self) -> str:
        p = self.paper
        ranks = paper_mod.rank_rows(headlines(self.results))
        if ranks:
            rr = "".join(
                f"<tr><td><b>{escape(r.benchmark)}</b></td><td>{escape(' < '.join(r.paper_order))}</td>"
                f"<td>{escape(' < '.join(r.our_order))}</td>"
                f"<td class='{'ok' if r.agrees else 'bad'}'>{'same' if r.agrees else 'differs'}</td>"
                f"<td class='num'>{r.concordant}/{r.pairs}</td></tr>" for r in ranks)
            rank_table = ("<table><tr><th>benchmark</th><th>paper's order (fastest first)</th><th>our order</th>"
                          "<th>order</th><th>pairs in the same order</th></tr>" + rr + "</table>")
        else:
            rank_table = ("<p class='muted'>No benchmark has two or more engines with a figure both here and in "
                          "the paper, so there is no rank order to compare. Engines the paper measured: "
                          + escape(", ".join(p.label(s) for s in p.systems)) + ".</p>")
        mapping = "".join(f"<tr><td>{escape(s)}</td><td>{escape(p.engine_of[s] or '— (no counterpart)')}</td></tr>"
                          for s in p.systems)
        head = "".join(f"<th>{escape(s)}</th>" for s in p.systems)
        body = []
        for b in BENCHMARKS:
            vals = p.values.get(b.id)
            if not vals:
                continue
            tds = "".join(f"<td class='num'>{vals[s]:,.6g}</td>" if s in vals else "<td class='na'>–</td>"
                          for s in p.systems)
            body.append(f"<tr><td><b>{escape(b.id)}</b></td><td>{escape(p.units[b.id])}</td>"
                        f"<td>{escape(p.table_of[b.id])}</td>{tds}</tr>")
        return f"""<h2 id="paper">The reference paper, side by side</h2>
<div class="paperbox"><p><b>{escape(p.citation)}</b></p>
<p>Their machine: {escape(p.machine)}.</p><p>Their data: {escape(p.dataset)}.</p>
<p>Their protocol: {escape(p.protocol)}.</p>
<p>Their numbers are never mixed into ours: the charts draw them on a separate axis, and only the rank order
of engines present in both is compared below.</p></div>
<h3>Rank order, paper vs ours</h3>{rank_table}
<h3>Name mapping</h3><table><tr><th>paper</th><th>tickbench engine</th></tr>{mapping}</table>
<h3>The paper's figures (tables 5–8, transcribed)</h3>
<table><tr><th>benchmark</th><th>unit</th><th>table</th>{head}</tr>{"".join(body)}</table>"""

    def queries(self) -> str:
        out = ['<h2 id="queries">The native query text that ran</h2><p class="muted">Exactly as each engine '
               "ran it, with its file and SHA-256 (compare refuses cells whose text differs).</p>"]
        for b in BENCHMARKS:
            items = []
            for e in self.engines:
                r = self.results.record(e, b.id)
                if r is None or r.query is None:
                    continue
                items.append(f"<details><summary>{escape(e)} · <code>{escape(r.query.file)}</code> · "
                             f"<span class='muted'>sha256 {escape(r.query.sha256[:16])}…</span></summary>"
                             f"<pre>{escape(r.query.text)}</pre></details>")
            if items:
                out.append(f"<h3>{escape(b.id)}</h3>{''.join(items)}")
        return "".join(out)


def _fmt_ms(v: float) -> str:
    return f"{v:,.1f}" if v >= 10 else f"{v:,.2f}" if v >= 1 else f"{v:,.3f}"


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


def _cls(r: Record | None) -> str:
    if r is None:
        return "na"
    return {"ok": "ok", "wrong": "bad", "error": "bad", "timeout": "bad"}.get(r.status, "na")


def _note(r: Record) -> str:
    text = " ".join(x for x in (r.cold_note, r.notes) if x)
    return f"<span class='why'>{escape(text)}</span>" if text else ""


def _verdict(r: Record | None) -> str:
    """The verification matrix cell: ✔ / ✘ / ⏱ / not supported, with the reason."""
    if r is None:
        return "<span class='muted'>not run</span>"
    why = f"<span class='why'>{escape(r.reason)}</span>" if r.reason else ""
    if r.status == "ok":
        return "✔" if r.verified is not False else "✔ <span class='why'>not verifiable</span>"
    label = {"wrong": "✘ wrong answer", "error": "✘ error", "timeout": "⏱ timeout",
             "unsupported": "not supported", "not_applicable": "not applicable",
             "unavailable": "engine unavailable"}[r.status]
    return f"{label}{why}"

