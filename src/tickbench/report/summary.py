"""What the reports say beyond the cell matrix: merged runs, headline figures, who is fastest.

Shared by the HTML and Markdown reports so both say the same thing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from tickbench.results import Record, Results
from tickbench.suites.published import BENCHMARKS, BY_ID

# The reference paper's grouping (its sections 6.1-6.4), in its order.
CATEGORIES = ("write/storage", "read", "compute-heavy", "complex")


@dataclass
class Merged:
    """One or several runs as one :class:`Results` whose engine names are unique.

    An engine whose runs overlap in a benchmark is shown as ``engine@run_id`` for each run; one
    whose runs hold different benchmarks (its published and its scaling run) keeps its name.
    ``results`` carries the first run's metadata; ``runs`` keeps every run's own environment
    and dataset for the report's environment section.
    """

    results: Results
    runs: list[Results]
    run_of: dict[str, str] = field(default_factory=dict)  # display engine -> run id
    warnings: list[str] = field(default_factory=list)


def merge(runs: Results | Sequence[Results]) -> Merged:
    """Merge runs side by side (a single run is returned as it is)."""
    if isinstance(runs, Results):
        runs = [runs]
    runs = list(runs)
    if not runs:
        raise ValueError("no results to report")
    if len(runs) == 1:
        only = runs[0]
        return Merged(only, runs, {e: only.run_id for e in only.engines()})
    # An engine keeps its name when its runs hold different benchmarks (e.g. its published run
    # and its scaling run); runs that overlap in a benchmark show it once per run.
    held: dict[str, set[str]] = {}
    clash: set[str] = set()
    for r in runs:
        for e in r.engines():
            mine = {rec.benchmark for rec in r.records if rec.engine == e}
            if held.get(e, set()) & mine:
                clash.add(e)
            held[e] = held.get(e, set()) | mine
    records: list[Record] = []
    engines_env: dict[str, dict[str, object]] = {}
    run_of: dict[str, str] = {}
    for r in runs:
        for e in r.engines():
            name = f"{e}@{r.run_id}" if e in clash else e
            run_of.setdefault(name, r.run_id)
            meta = r.environment.engines.get(e)
            # the engine's published run describes it (where its time went, its memory)
            published = any(rec.engine == e and rec.benchmark in BY_ID for rec in r.records)
            if meta is not None and (name not in engines_env or published):
                engines_env[name] = meta
        for rec in r.records:
            name = f"{rec.engine}@{r.run_id}" if rec.engine in clash else rec.engine
            records.append(rec.model_copy(update={"engine": name}))
    first = runs[0]
    env = first.environment.model_copy(update={"engines": engines_env})
    merged = first.model_copy(update={"records": records, "environment": env,
                                      "run_id": "+".join(r.run_id for r in runs)})
    warnings = []
    # Runs of one suite share tables, so they must share a dataset; runs of different suites
    # never share a cell (e.g. a published run at SF 1 beside a scaling run from SF 0.5).
    by_suite: dict[str, set[str]] = {}
    for r in runs:
        for suite in {rec.suite for rec in r.records} or {r.suite}:
            by_suite.setdefault(suite, set()).add(r.dataset.content_hash)
    hashes = {h for hs in by_suite.values() if len(hs) > 1 for h in hs}
    if hashes:
        warnings.append("the runs used different datasets (content hashes "
                        + ", ".join(sorted(hashes)) + "): their figures are not comparable")
    if len({(r.environment.cpu, r.environment.cores, r.environment.memory_bytes) for r in runs}) > 1:
        warnings.append("the runs ran on different machines: compare their figures with care")
    if len({r.protocol_version for r in runs}) > 1:
        warnings.append("the runs used different timing protocol versions")
    return Merged(merged, runs, run_of, warnings)


def headline(rec: Record | None) -> float | None:
    """The one figure an engine is ranked by (lower is better): median ms for a query,
    CSV load seconds for W, bytes on disk for SE. ``None`` unless the cell is ok."""
    if rec is None or rec.status != "ok":
        return None
    if rec.benchmark == "W":
        sec = rec.figures.get("csv", {}).get("seconds")
        return float(sec) if sec is not None else None
    if rec.benchmark == "SE":
        n = rec.figures.get("engine_bytes")
        return float(n) if n is not None else None
    return rec.stats.median_ms if rec.stats is not None else None


HEADLINE_UNIT = {"W": "s (CSV)", "SE": "bytes"}


def headlines(results: Results) -> dict[str, dict[str, float]]:
    """benchmark id -> engine -> headline figure, for the ok cells."""
    out: dict[str, dict[str, float]] = {}
    for rec in results.records:
        v = headline(rec)
        if v is not None and rec.benchmark in BY_ID:
            out.setdefault(rec.benchmark, {})[rec.engine] = v
    return out


@dataclass(frozen=True)
class Standing:
    """An engine's standing in one category."""

    engine: str
    wins: int  # benchmarks of the category where it is fastest
    covered: int  # benchmarks of the category where it has a verified figure
    total: int  # benchmarks in the category
    geomean_vs_best: float | None  # geometric mean of (its figure / the best figure) over ``covered``


def standings(results: Results) -> dict[str, list[Standing]]:
    """Per category, the engines best first: most wins, then the smallest geometric mean of
    the ratio to the fastest engine (over the benchmarks it completed), then coverage."""
    figs = headlines(results)
    out: dict[str, list[Standing]] = {}
    for cat in CATEGORIES:
        ids = [b.id for b in BENCHMARKS if b.category == cat]
        rows = []
        for e in results.engines():
            wins = covered = 0
            logs: list[float] = []
            for bid in ids:
                row = figs.get(bid, {})
                if e not in row:
                    continue
                covered += 1
                best = min(row.values())
                wins += row[e] == best
                if best > 0:
                    logs.append(math.log(row[e] / best))
            gm = math.exp(sum(logs) / len(logs)) if logs else None
            rows.append(Standing(e, wins, covered, len(ids), gm))
        rows.sort(key=lambda s: (-s.wins, s.geomean_vs_best if s.geomean_vs_best is not None else math.inf,
                                 -s.covered, s.engine))
        out[cat] = rows
    return out


def fastest(results: Results, benchmark: str) -> list[str]:
    """The engine(s) with the best headline figure on ``benchmark`` (ties share it)."""
    row = headlines(results).get(benchmark, {})
    if not row:
        return []
    best = min(row.values())
    return [e for e, v in row.items() if v == best]


def category_sentence(cat: str, rows: list[Standing]) -> str:
    """One line: who is fastest in the category and by how much, in plain words."""
    ranked = [s for s in rows if s.covered]
    if not ranked:
        return f"{cat}: no engine produced a verified figure."
    top = ranked[0]
    text = f"{cat}: **{top.engine}** fastest in {top.wins} of {top.total}"
    if len(ranked) > 1:
        second = ranked[1]
        gm = f", {second.geomean_vs_best:.2f}× the best on average" if second.geomean_vs_best else ""
        text += f"; next {second.engine} ({second.wins} of {second.total}{gm})"
    return text + "."


def memory_text(rec: Record) -> str:
    """A query's memory figure as MiB."""
    if rec.memory is None:
        return "—"
    return f"{rec.memory.bytes / 2**20:,.2f} MiB"
