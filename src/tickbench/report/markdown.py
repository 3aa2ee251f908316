"""``report.md``: the run in Markdown, for terminals and pull requests.

The same content as ``report.html`` without the charts: who is fastest per category, every
cell, timings, W and SE, memory, the reference paper side by side (its figures and how the
rank order compares), the environment and the native query text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from tickbench.report import paper as paper_mod
from tickbench.report import sections
from tickbench.report.cells import matrix, problems, server_median_ms
from tickbench.report.summary import CATEGORIES, category_sentence, headlines, merge, standings
from tickbench.results import Results
from tickbench.suites.published import BENCHMARKS


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def render(runs: Results | Sequence[Results]) -> str:
    """The Markdown report of one run, or of several side by side."""
    m = merge(runs)
    results = m.results
    env, ds = results.environment, results.dataset
    engines, rows = matrix(results)
    out = ["# tickbench results", ""]
    if len(m.runs) > 1:
        out += ["Runs side by side: " + ", ".join(f"`{r.run_id}` ({r.created})" for r in m.runs)
                + "; an engine present in several runs is shown as `engine@run`.", ""]
        out += [f"> ⚠ {w}" for w in m.warnings] + ([""] if m.warnings else [])
    out += [
        f"Suite `{results.suite}`, run `{results.run_id}` on {results.created}; "
        f"{results.repetitions} timed repetitions after a warm-up, timeout {results.timeout_s:g} s.",
        "",
        f"Machine: {env.cpu}, {env.cores} cores, {_mib(env.memory_bytes)} memory, {env.os}; "
        f"Python {env.python}, tickbench {env.tickbench_version}.",
        "",
        f"Dataset: {ds.source}, scale {ds.scale:g}, seed {ds.seed}, symbols +{ds.symbols}, "
        f"content hash `{ds.content_hash}`.",
        "",
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
                mem = f"{_mib(r.memory.bytes)} [{n}]"
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
            out.append(f"| {r.engine} | {r.benchmark} | {r.status} | {_cell(r.reason)} |")
    out += _paper(results)
    out += ["", "## Environment", ""]
    for run in m.runs:
        out += [f"Run `{run.run_id}`: dataset `{run.dataset.content_hash}`, {run.environment.cpu}, "
                f"{run.environment.cores} cores; parameters `{json.dumps(run.params, sort_keys=True)}`.", ""]
        out += ["| engine | version | settings |", "|---|---|---|"]
        for name, info in run.environment.engines.items():
            settings = _cell(json.dumps(info.get("settings", {}), sort_keys=True))
            out.append(f"| {name} | {info.get('version', '')} | `{settings}` |")
        out.append("")
    queries = [r for r in results.records if r.query is not None]
    if queries:
        out += ["## Native query text", ""]
        for r in queries:
            assert r.query is not None
            out += [f"<details><summary>{r.engine} · {r.benchmark} · <code>{r.query.file}</code> · "
                    f"sha256 {r.query.sha256[:16]}…</summary>", "", "```", r.query.text.rstrip(), "```", "",
                    "</details>", ""]
    beyond = sections.markdown(results)
    if beyond:
        out += ["", beyond]
    return "\n".join(out).rstrip() + "\n"


def _paper(results: Results) -> list[str]:
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
