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
from tickbench.report.widgets import PALETTE, PageParts, md_cell, mib
from tickbench.results import Results


def render(runs: Results | Sequence[Results], suites: Iterable[ReportSuite]) -> str:
    """The Markdown report of one run, or of several side by side, with the sections of ``suites``."""
    m = merge(runs)
    results = m.results
    env, ds = results.environment, results.dataset
    out = ["# tickbench results", ""]
    if len(m.runs) > 1:
        out += ["Runs side by side: " + ", ".join(f"`{r.run_id}` ({r.created})" for r in m.runs)
                + "; an engine present in several runs is shown as `engine@run`.", ""]
        out += [f"> ⚠ {w}" for w in m.warnings] + ([""] if m.warnings else [])
    out += [
        f"Suite `{results.suite}`, run `{results.run_id}` on {results.created}; "
        f"{results.repetitions} timed repetitions after a warm-up, timeout {results.timeout_s:g} s.",
        "",
        f"Machine: {env.cpu}, {env.cores} cores, {mib(env.memory_bytes)} memory, {env.os}; "
        f"Python {env.python}, tickbench {env.tickbench_version}.",
        "",
        f"Dataset: {ds.source}, scale {ds.scale:g}, seed {ds.seed}, symbols +{ds.symbols}, "
        f"content hash `{ds.content_hash}`.",
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
        out += [f"Run `{run.run_id}`: dataset `{run.dataset.content_hash}`, {run.environment.cpu}, "
                f"{run.environment.cores} cores; parameters `{json.dumps(run.params, sort_keys=True)}`.", ""]
        out += ["| engine | version | settings |", "|---|---|---|"]
        for name, info in run.environment.engines.items():
            settings = md_cell(json.dumps(info.get("settings", {}), sort_keys=True))
            out.append(f"| {name} | {info.get('version', '')} | `{settings}` |")
        out.append("")
    out += [x for p in own for x in p.appendix]
    beyond = sections.group_markdown(grouped)
    if beyond:
        out += ["", *beyond]
    return "\n".join(out).rstrip() + "\n"

