"""``report.html``: one static, self-contained page (no server, no network).

This module is the page's shell: the heading and navigation, the environment, the footer, and
the charts' data and script. Every section of results comes from the suites it is given
(:class:`tickbench.report.sections.ReportSuite`, laid out by :mod:`tickbench.report.sections`);
sections add their charts through the page (:class:`tickbench.report.widgets.ChartPage`).

Charts are drawn by plotly.js, inlined from the ``plotly`` Python package
(:func:`plotly.offline.get_plotlyjs`), so the file opens from disk with no network. Why plotly
rather than hand-written SVG: readers need the exact value behind a bar (hover), log axes with
min–max error bars, and legend toggles to hide an engine or the paper's series, and plotly.js
gives all of that, tested across browsers, for one ~4.8 MB inline script; the figures are plain
JSON built by the sections (no plotly Python objects), so the page is easy to check: every chart
``<div>`` must end up holding an ``<svg class="main-svg">`` with marks (the tests check it in
headless Chromium). Everything a chart shows is also in a table beside it, so the page still
reads without JavaScript.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from tickbench.report import sections
from tickbench.report.sections import ReportSuite
from tickbench.report.summary import Merged, merge
from tickbench.report.widgets import ChartPage, PageParts, Section
from tickbench.results import Results

STYLE = """
:root{--fg:#1d2329;--muted:#5f6b76;--line:#d9dee3;--bg2:#f5f7f9;--ok:#1b7f3b;--bad:#b3261e;--warn:#8a5a00}
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:var(--fg)}
header{background:#16324f;color:#fff;padding:1.2rem 2rem}
header h1{margin:0 0 .3rem;font-size:1.6rem}header p{margin:.15rem 0;color:#d6e2ee}
header code{color:#fff}
nav{position:sticky;top:0;background:#fff;border-bottom:1px solid var(--line);padding:.45rem 2rem;z-index:5}
nav a{margin-right:1.1rem;color:#16324f;text-decoration:none;font-weight:600}
main{padding:0 2rem 3rem;max-width:92rem}
h2{margin-top:2.2rem;border-bottom:2px solid #16324f;padding-bottom:.2rem}
h3{margin:1.6rem 0 .3rem}
table{border-collapse:collapse;margin:.6rem 0 1rem;font-size:.92rem}
td,th{border:1px solid var(--line);padding:.28rem .55rem;vertical-align:top}
th{background:var(--bg2);text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.ok{color:var(--ok)}td.bad{color:var(--bad);font-weight:600}td.na{color:var(--muted)}
td.best{font-weight:700;background:#eaf6ee}
.why{display:block;font-weight:400;color:var(--muted);font-size:.82rem;max-width:26rem}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(17rem,1fr));gap:.8rem;margin:1rem 0}
.card{border:1px solid var(--line);border-radius:8px;padding:.7rem .9rem;background:var(--bg2)}
.card h3{margin:0 0 .3rem;font-size:1rem;text-transform:uppercase;letter-spacing:.04em;color:var(--muted)}
.card .who{font-size:1.35rem;font-weight:700}.card p{margin:.2rem 0;font-size:.9rem}
.warn{background:#fff4d6;border:1px solid #e6c35c;padding:.6rem .9rem;border-radius:6px;color:var(--warn)}
.chartbox{border:1px solid var(--line);border-radius:8px;padding:.4rem .6rem;margin:.9rem 0}
.chartbox h4{margin:.2rem 0;font-size:1.02rem}.chartbox .desc{color:var(--muted);font-size:.88rem;margin:0}
.chart{width:100%;height:340px}
.paperbox{border-left:4px solid var(--ppr,#9e9e9e);background:#fafafa;padding:.5rem .9rem}
pre{background:var(--bg2);padding:.6rem;overflow:auto;font-size:.85rem;margin:.3rem 0}
details{margin:.25rem 0}summary{cursor:pointer}
.muted{color:var(--muted)}
"""

SCRIPT = """
(function(){
  var errors = [];
  window.addEventListener('error', function(e){
    errors.push(String(e.message)); document.body.setAttribute('data-chart-errors', errors.join(' | '));
  });
  var specs = JSON.parse(document.getElementById('chart-data').textContent);
  var pending = Object.keys(specs).length;
  function done(){ if (--pending === 0) document.body.setAttribute('data-charts-done', '1'); }
  if (!pending) document.body.setAttribute('data-charts-done', '1');
  Object.keys(specs).forEach(function(id){
    var el = document.getElementById(id);
    try {
      Plotly.newPlot(el, specs[id].data, specs[id].layout,
                     {displaylogo: false, responsive: true, modeBarButtonsToRemove: ['select2d', 'lasso2d']})
        .then(function(){ el.setAttribute('data-rendered', '1'); done(); },
              function(err){ errors.push(id + ': ' + err);
                             document.body.setAttribute('data-chart-errors', errors.join(' | ')); done(); });
    } catch (err) {
      errors.push(id + ': ' + err); document.body.setAttribute('data-chart-errors', errors.join(' | ')); done();
    }
  });
})();
"""


def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs  # plotly is needed only to write the HTML report

    return str(get_plotlyjs())


def _header(page: ChartPage, nav: list[Section]) -> str:
    """The heading, and the navigation to ``nav``'s sections (labels are HTML)."""
    r, ds = page.results, page.results.dataset
    runs = ", ".join(f"<code>{escape(x.run_id)}</code> ({escape(x.created)})" for x in page.m.runs)
    warn = "".join(f'<p class="warn">⚠ {escape(w)}</p>' for w in page.m.warnings)
    links = "".join(f'<a href="#{escape(x.anchor)}">{x.label}</a>' for x in nav)
    return f"""<header><h1>tickbench results — {escape(r.suite)} suite</h1>
<p>run{"s" if len(page.m.runs) > 1 else ""} {runs}; {len(page.engines)} engine(s):
{escape(", ".join(page.engines))}</p>
<p>dataset <code>{escape(ds.content_hash)}</code> · scale {ds.scale:g} · seed {ds.seed} · {escape(ds.source)}
· {escape(r.protocol_text())} · timeout {r.timeout_s:g} s</p></header>
<nav>{links}</nav><main>{warn}"""


def _environment(m: Merged) -> str:
    """The environment and dataset of each run."""
    out = ['<h2 id="environment">Environment and dataset</h2>']
    for run in m.runs:
        env, ds = run.environment, run.dataset
        eng = "".join(
            f"<tr><td>{escape(name)}</td><td>{escape(str(info.get('version', '')))}</td>"
            f"<td><code>{escape(json.dumps(info.get('settings', {}), sort_keys=True))}</code></td>"
            f"<td>{escape(str(info.get('reason', '')) if not info.get('available', True) else '')}</td></tr>"
            for name, info in env.engines.items())
        out.append(f"""<h3>run <code>{escape(run.run_id)}</code></h3><table>
<tr><th>created</th><td>{escape(run.created)}</td></tr>
<tr><th>machine</th><td>{escape(env.cpu)}, {env.cores} cores, {env.memory_bytes / 2**30:,.1f} GiB;
{escape(env.os)}</td></tr>
<tr><th>software</th><td>Python {escape(env.python)}, tickbench {escape(env.tickbench_version)},
results schema {run.schema_version}, protocol {escape(run.protocol_version)}</td></tr>
<tr><th>dataset</th><td>content hash <code>{escape(ds.content_hash)}</code>; {escape(ds.source)}, scale {ds.scale:g},
seed {ds.seed}, +{ds.symbols} symbols, generator {escape(ds.generator_version)}</td></tr>
<tr><th>protocol</th><td>{escape(run.protocol_text())}, timeout {run.timeout_s:g} s;
<code>{escape(json.dumps(run.config.model_dump() if run.config else {}, sort_keys=True))}</code></td></tr>
<tr><th>parameters</th><td><code>{escape(json.dumps(run.params, sort_keys=True))}</code></td></tr></table>
<table><tr><th>engine</th><th>version</th><th>settings</th><th>note</th></tr>{eng}</table>""")
    return "".join(out)


def finite(obj: Any) -> Any:
    """``obj`` with NaN and infinities replaced by ``None`` (JSON has neither; plotly skips nulls)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite(v) for v in obj]
    return obj


def render(results: Results | Sequence[Results], suites: Iterable[ReportSuite]) -> str:
    """The whole page for one run, or several runs side by side, with the sections of ``suites``."""
    merged = merge(results)
    page = ChartPage(merged)
    # The sections in the page's order, so their charts are added in that order.
    own: list[PageParts[list[Section]]] = []
    grouped: list[tuple[ReportSuite, PageParts[list[Section]]]] = []
    for suite, view in sections.views(merged, suites, page.engines, page.colors, page.add):
        parts = suite.report_html(view)
        if suite.own_sections:
            own.append(parts)
        else:
            grouped.append((suite, parts))
    environment = [Section("environment", "Environment", _environment(merged))]
    order = [*(x for p in own for x in p.results), *sections.group_html(grouped),
             *(x for p in own for x in p.reference), *environment, *(x for p in own for x in p.appendix)]
    body = _header(page, order) + "".join(x.html for x in order)
    charts = json.dumps(finite(page.charts), allow_nan=False).replace("</", "<\\/")
    title = f"tickbench results · {merged.results.run_id}"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{escape(title)}</title><style>{STYLE}</style></head><body>
{body}
<footer class="muted"><p>Generated by tickbench {escape(merged.results.environment.tickbench_version)} from
results.json; self-contained (no network). Charts: plotly.js, inlined.</p></footer></main>
<script type="application/json" id="chart-data">{charts}</script>
<script>{_plotly_js()}</script>
<script>{SCRIPT}</script>
</body></html>
"""
