"""``report.md``: the run in Markdown, for terminals and pull requests.

The same content as ``report.html`` without the charts. This module is the page's shell: the
run's heading, the machine and dataset, and the environment; the published suite's sections
(who is fastest per category, every cell, timings, W and SE, the reference paper side by side,
the native query text) come from :mod:`tickbench.suites.published.report`, the other suites'
from :mod:`tickbench.report.sections`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from tickbench.report import sections
from tickbench.report.summary import merge
from tickbench.report.widgets import md_cell, mib
from tickbench.results import Results
from tickbench.suites.published import report as published_report


def render(runs: Results | Sequence[Results]) -> str:
    """The Markdown report of one run, or of several side by side."""
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
    main = published_report.markdown(results)
    out += main.results
    out += main.reference
    out += ["", "## Environment", ""]
    for run in m.runs:
        out += [f"Run `{run.run_id}`: dataset `{run.dataset.content_hash}`, {run.environment.cpu}, "
                f"{run.environment.cores} cores; parameters `{json.dumps(run.params, sort_keys=True)}`.", ""]
        out += ["| engine | version | settings |", "|---|---|---|"]
        for name, info in run.environment.engines.items():
            settings = md_cell(json.dumps(info.get("settings", {}), sort_keys=True))
            out.append(f"| {name} | {info.get('version', '')} | `{settings}` |")
        out.append("")
    out += main.appendix
    beyond = sections.markdown(results)
    if beyond:
        out += ["", beyond]
    return "\n".join(out).rstrip() + "\n"

