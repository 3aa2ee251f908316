"""``report.md``: the run in Markdown, for terminals and pull requests.

The same content as ``report.html`` without the charts. This module is the page's shell: the
run's heading, the machine and dataset, and the environment; every section of results comes
from the suites it is given, laid out as on the HTML page (:mod:`tickbench.report.sections`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from tickbench.report import sections
from tickbench.report.sections import ReportSuite
from tickbench.report.summary import merge
from tickbench.report.widgets import PALETTE, PageParts, md_cell, md_code, md_text, mib
from tickbench.results import Results


def render(runs: Results | Sequence[Results], suites: Iterable[ReportSuite]) -> str:
    """The Markdown report of one run, or of several side by side, with the sections of ``suites``."""
    m = merge(runs)
    results = m.results
    env, ds = results.environment, results.dataset
    out = ["# tickbench results", ""]
    if len(m.runs) > 1:
        out += ["Runs side by side: " + ", ".join(f"{md_code(r.run_id)} ({md_text(r.created)})" for r in m.runs)
                + "; an engine present in several runs is shown as `engine@run`.", ""]
        out += [f"> ⚠ {md_text(w)}" for w in m.warnings] + ([""] if m.warnings else [])
    out += [
        f"Suite {md_code(results.suite)}, run {md_code(results.run_id)} on {md_text(results.created)}; "
        f"{results.protocol_text()}, timeout {results.timeout_s:g} s.",
        "",
        f"Machine: {md_text(env.cpu)}, {env.cores} cores, {mib(env.memory_bytes)} memory, {md_text(env.os)}; "
        f"Python {md_text(env.python)}, tickbench {md_text(env.tickbench_version)}.",
        "",
        f"Dataset: {md_text(ds.source)}, scale {ds.scale:g}, seed {ds.seed}, symbols +{ds.symbols}, "
        f"content hash {md_code(ds.content_hash)}.",
        "",
    ]
    engines = results.engines()
    colors = {e: PALETTE[i % len(PALETTE)] for i, e in enumerate(engines)}
    own: list[PageParts[list[str]]] = []
    grouped: list[tuple[ReportSuite, PageParts[list[str]]]] = []
    for suite, view in sections.views(m, suites, engines, colors):
        parts = suite.report_markdown(view)
        if suite.own_sections:
            own.append(parts)
        else:
            grouped.append((suite, parts))
    out += [x for p in own for x in p.results]
    out += [x for p in own for x in p.reference]
    out += ["", "## Environment", ""]
    for run in m.runs:
        out += [f"Run {md_code(run.run_id)}: dataset {md_code(run.dataset.content_hash)}, "
                f"{md_text(run.environment.cpu)}, {run.environment.cores} cores; parameters "
                f"{md_code(json.dumps(run.params, sort_keys=True))}.", ""]
        out += ["| engine | version | settings |", "|---|---|---|"]
        for name, info in run.environment.engines.items():
            settings = md_code(json.dumps(info.get("settings", {}), sort_keys=True)).replace("|", "\\|")
            out.append(f"| {md_cell(name)} | {md_cell(str(info.get('version', '')))} | {settings} |")
        out.append("")
    out += [x for p in own for x in p.appendix]
    beyond = sections.group_markdown(grouped)
    if beyond:
        out += ["", *beyond]
    return "\n".join(out).rstrip() + "\n"

