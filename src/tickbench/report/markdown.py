"""``report.md``: the run in Markdown, for terminals and pull requests."""

from __future__ import annotations

from tickbench.report.cells import matrix, problems
from tickbench.results import Results


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def render(results: Results) -> str:
    env, ds = results.environment, results.dataset
    engines, rows = matrix(results)
    out = [
        "# tickbench results",
        "",
        f"Suite `{results.suite}`, run `{results.run_id}` on {results.created}; "
        f"{results.repetitions} timed repetitions after a warm-up, timeout {results.timeout_s:g} s.",
        "",
        f"Machine: {env.cpu}, {env.cores} cores, {_mib(env.memory_bytes)} memory, {env.os}; "
        f"Python {env.python}, tickbench {env.tickbench_version}.",
        "",
        f"Dataset: {ds.source}, scale {ds.scale:g}, seed {ds.seed}, symbols +{ds.symbols}, "
        f"content hash `{ds.content_hash}`.",
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
                "| engine | benchmark | median | mean | std | min | max | memory | mode |",
                "|---|---|---|---|---|---|---|---|---|"]
        for r in detail:
            s = r.stats
            assert s is not None
            mem = f"{_mib(r.memory.bytes)} ({r.memory.kind})" if r.memory else "—"
            out.append(f"| {r.engine} | {r.benchmark} | {s.median_ms:.2f} | {s.mean_ms:.2f} | "
                       f"{s.std_ms:.2f} | {s.min_ms:.2f} | {s.max_ms:.2f} | {mem} | {r.mode} |")
    loads = [r for r in results.records if r.benchmark == "W" and r.status == "ok"]
    if loads:
        out += ["", "## W: bulk load of the bulk-load day", "",
                "| engine | input | seconds | rows/s | MB/s | engine's own path (s) | ratio |",
                "|---|---|---|---|---|---|---|"]
        for r in loads:
            for fmt, f in r.figures.items():
                out.append(f"| {r.engine} | {fmt} | {f['seconds']:.3f} | {f['rows_per_s']:,.0f} | "
                           f"{f['mb_per_s']:.1f} | {f['baseline_seconds']:.3f} | "
                           f"{f['ratio_to_baseline']:.2f}× |")
    storage = [r for r in results.records if r.benchmark == "SE" and r.status == "ok"]
    if storage:
        out += ["", "## SE: storage efficiency of the 30-day period", "",
                "| engine | measured | bytes | % of CSV | % of Parquet-zstd |", "|---|---|---|---|---|"]
        for r in storage:
            f = r.figures
            pct_csv = f"{f['pct_of_csv']:.1f}" if f.get("pct_of_csv") is not None else "?"
            out.append(f"| {r.engine} | {f['measured']} | {f['engine_bytes']:,} | {pct_csv} | "
                       f"{f['pct_of_parquet']:.1f} |")
    bad = problems(results)
    if bad:
        out += ["", "## Cells without a verified figure", "", "| engine | benchmark | status | reason |",
                "|---|---|---|---|"]
        for r in bad:
            reason = r.reason.replace("|", "\\|").replace("\n", " ")
            out.append(f"| {r.engine} | {r.benchmark} | {r.status} | {reason} |")
    return "\n".join(out) + "\n"
