"""Who is fastest: the published suite's ranking of engines per category of the reference paper.

An engine whose kind is ``in-memory`` (Polars: the columns the queries read, held in RAM, no
storage, W, SE or durability) is a lower bound, not a contender: it is ranked apart, as the
in-memory reference, and never counted among the fastest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tickbench.report.summary import in_memory
from tickbench.results import Record, Results
from tickbench.suites.published import BENCHMARKS

# The reference paper's grouping (its sections 6.1-6.4), in its order.
CATEGORIES = ("write/storage", "read", "compute-heavy", "complex")


def contenders(results: Results) -> list[str]:
    """The engines ranked against each other: every engine but the in-memory references."""
    return [e for e in results.engines() if not in_memory(results, e)]


def references(results: Results) -> list[str]:
    """The in-memory references, ranked apart."""
    return [e for e in results.engines() if in_memory(results, e)]


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


def headlines(results: Results, engines: list[str] | None = None) -> dict[str, dict[str, float]]:
    """benchmark id -> engine -> headline figure, for the ok cells of the published suite (of
    ``engines`` when given)."""
    ids = {b.id for b in BENCHMARKS}
    out: dict[str, dict[str, float]] = {}
    for rec in results.records:
        v = headline(rec)
        if v is not None and rec.benchmark in ids and (engines is None or rec.engine in engines):
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
    """Per category, the contenders best first: most wins, then the smallest geometric mean of
    the ratio to the fastest engine (over the benchmarks it completed), then coverage."""
    engines = contenders(results)
    figs = headlines(results, engines)
    out: dict[str, list[Standing]] = {}
    for cat in CATEGORIES:
        ids = [b.id for b in BENCHMARKS if b.category == cat]
        rows = []
        for e in engines:
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
    """The contender(s) with the best headline figure on ``benchmark`` (ties share it)."""
    row = headlines(results, contenders(results)).get(benchmark, {})
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
