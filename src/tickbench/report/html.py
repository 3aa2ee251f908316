"""``report.html``: one static, self-contained page (no server, no network)."""

from __future__ import annotations

from html import escape

from tickbench.report.cells import matrix
from tickbench.report.markdown import render as render_markdown
from tickbench.results import Results

STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem;max-width:80rem;color:#222}
table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.3rem .6rem}
th{background:#f3f3f3}td.bad{color:#b00}td{text-align:right}td:first-child{text-align:left}
pre{background:#f7f7f7;padding:.6rem;overflow:auto}details{margin:.3rem 0}
"""


def render(results: Results) -> str:
    engines, rows = matrix(results)
    head = "".join(f"<th>{escape(e)}</th>" for e in engines)
    body = []
    for bid, cells in rows:
        tds = "".join(
            f'<td class="{"bad" if ("✘" in c or "⏱" in c) else ""}">{escape(c)}</td>' for c in cells)
        body.append(f"<tr><td>{escape(bid)}</td>{tds}</tr>")
    queries = []
    for r in results.records:
        if r.query is not None:
            queries.append(f"<details><summary>{escape(r.engine)} · {escape(r.benchmark)} · "
                           f"{escape(r.query.file)}</summary><pre>{escape(r.query.text)}</pre></details>")
    md = escape(render_markdown(results))
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>tickbench results</title>
<style>{STYLE}</style></head><body>
<h1>tickbench results</h1>
<p>Dataset hash <code>{escape(results.dataset.content_hash)}</code>, scale {results.dataset.scale:g},
seed {results.seed}; {escape(results.environment.cpu)}, {results.environment.cores} cores.</p>
<table><tr><th>benchmark</th>{head}</tr>{"".join(body)}</table>
<h2>Native query text</h2>{"".join(queries)}
<h2>Full report</h2><pre>{md}</pre>
</body></html>
"""
