"""Several runs shown as one: engine names made unique, every run's environment kept, and
warnings where the runs are not comparable. Shared by the HTML and Markdown reports."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tickbench.results import Record, Results

#: The kind of an engine that holds the columns the queries read in RAM (Polars): a lower bound,
#: shown apart and never ranked among the fastest.
IN_MEMORY = "in-memory"


def in_memory(results: Results, engine: str) -> bool:
    """Whether ``engine`` ran as an in-memory engine (its kind, as the run recorded it)."""
    return results.environment.engines.get(engine, {}).get("kind") == IN_MEMORY


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
    described: dict[str, int] = {}
    run_of: dict[str, str] = {}
    for r in runs:
        for e in r.engines():
            name = f"{e}@{r.run_id}" if e in clash else e
            run_of.setdefault(name, r.run_id)
            meta = r.environment.engines.get(e)
            # the run with most of the engine's cells describes it (where its time went, its memory)
            cells = sum(rec.engine == e for rec in r.records)
            if meta is not None and cells > described.get(name, -1):
                engines_env[name] = meta
                described[name] = cells
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
