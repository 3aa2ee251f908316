"""The suites' own sections in the reports: every registered suite beside the published one
that the run recorded, in the suites' order, each with the tables and charts it renders
(``suites/<name>/report.py``). The page shells call these; they hold no suite's knowledge."""

from __future__ import annotations

from html import escape

from tickbench.report.widgets import status_text
from tickbench.results import Record, Results
from tickbench.suites.base import AddChart, Suite
from tickbench.suites.registry import suites


def suite_records(results: Results) -> list[tuple[Suite, list[Record]]]:
    """(suite, its records in run order) for every suite beside the published one with records."""
    out = []
    for suite in suites().values():
        if not suite.beside_published():
            continue
        records = [r for r in results.records if r.suite == suite.name]
        if records:
            out.append((suite, records))
    return out


def has_sections(results: Results) -> bool:
    return bool(suite_records(results))


def markdown(results: Results) -> str:
    """Markdown sections (``##``) for every such suite; "" when the run has none."""
    out: list[str] = []
    for suite, records in suite_records(results):
        out += [f"## {suite.title}", "", *suite.markdown(records), ""]
    return "\n".join(out)


def html(results: Results, add: AddChart) -> str:
    """The section "Suites beyond the paper", or "" when the run has none of their records."""
    parts = [f'<h3 id="beyond-{escape(s.name)}">{escape(s.title)}</h3>{s.html(records, add)}'
             for s, records in suite_records(results)]
    if not parts:
        return ""
    intro = ("<p class='muted'>Suites that measure what the paper does not (SPEC §2.2; protocols in "
             "METHODOLOGY.md). Latency distributions are the HDR histograms saved in results.json; a cell that "
             "is not ok is in its table with its status and reason, and not in the charts.</p>")
    return f'<h2 id="beyond">Suites beyond the paper</h2>{intro}{"".join(parts)}'


def headline(r: Record) -> str:
    """The one figure that sums up a cell of a suite beside the published one, from its suite."""
    if r.status != "ok":
        return status_text(r)[:160]
    known = suites().get(r.suite)
    return known.headline(r) if known is not None else ""
