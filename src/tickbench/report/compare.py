"""``tickbench compare A B``: per-cell ratios between two runs, flagging real differences.

For every (engine, benchmark) cell timed in both runs it prints the medians, the ratio B/A
and each run's [min, max]. What a cell's figures are is its suite's to say
(:meth:`~tickbench.report.sections.ReportSuite.measures`): a query cell has its timed
repetitions; the published suite's W has the load repetitions of its CSV and Parquet loads
separately, and its SE (bytes, not a timing) is shown for information.

When is a difference flagged (the rule; all three must hold)
-----------------------------------------------------------
1. the two runs' ranges do not overlap: ``max_A < min_B`` or ``max_B < min_A``;
2. ``|median_B - median_A| > 3 × pooled spread``, the pooled spread being
   ``sqrt((s_A² + s_B²) / 2)`` with ``s = 1.4826 × MAD`` (the median absolute deviation
   scaled to a standard deviation; robust against the odd slow repetition);
3. the ratio B/A is outside ``[1/min_ratio, min_ratio]`` (default 1.2): smaller changes are
   within what a shared machine drifts between runs and are not worth a flag.

Rule 1 alone fires by chance in about one cell in ten with three repetitions per side; 2 and 3
keep a comparison of two runs of the same build on the same machine quiet while a real
slowdown (for example ``TICKBENCH_FAULTS="duckdb:slow=0.05"``, which adds 50 ms to every duckdb
query) is flagged on every cell it touches. A cell that was ok in one run and wrong, errored or
timed out in the other is flagged too. Cells with fewer than two samples on either side are
shown but cannot be tested, so never flagged; the output says how many there are.

What is refused
---------------
Two runs on different datasets (content hash) are not compared at all, nor two runs whose
dataset parameters (days, symbol) differ under one content hash (the hash does not cover them,
so one run's dataset manifest was edited), and neither is a cell whose native query text
differs (``Record.query.sha256``): the error names every such cell. ``skip_changed`` compares
the other cells and lists the refused ones instead. When no timed cell can be tested (runs of
one repetition) and none changed status, there is nothing to compare: refused, never "no cell
differs".

Exit status (``tickbench compare``): 0 nothing flagged, 1 at least one cell flagged,
2 refused or unreadable input (like ``diff``: scripts can gate on "no regression").
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tickbench.report.cells import Measure, timing_measures
from tickbench.report.sections import ReportSuite, find
from tickbench.results import Record, Results

MAD_TO_SIGMA = 1.4826
SPREAD_FACTOR = 3.0
DEFAULT_MIN_RATIO = 1.2
BAD = ("wrong", "error", "timeout")
NOT_TESTED = "fewer than 2 samples: not tested"


class CompareRefused(Exception):
    """The two runs, or some of their cells, must not be compared; the message says which."""


@dataclass(frozen=True)
class Cell:
    """One compared cell."""

    engine: str
    cell: str  # the measure's name: the benchmark id, or e.g. "W csv" / "W parquet"
    status_a: str
    status_b: str
    a: list[float]  # samples, in ``unit``
    b: list[float]
    flagged: bool
    why: str
    unit: str = "ms"
    testable: bool = True  # a timing the rule can test (not a figure shown for information)

    @property
    def median_a(self) -> float | None:
        return statistics.median(self.a) if self.a else None

    @property
    def median_b(self) -> float | None:
        return statistics.median(self.b) if self.b else None

    @property
    def ratio(self) -> float | None:
        """B/A of the medians."""
        ma, mb = self.median_a, self.median_b
        if ma is None or mb is None or ma == 0:
            return None
        return mb / ma


@dataclass
class Comparison:
    a: Results
    b: Results
    cells: list[Cell] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # cells skipped because their query text differs
    only_a: list[str] = field(default_factory=list)  # engines only in A
    only_b: list[str] = field(default_factory=list)

    @property
    def flagged(self) -> list[Cell]:
        return [c for c in self.cells if c.flagged]

    @property
    def timed(self) -> list[Cell]:
        """The cells timed in both runs (a figure shown for information, such as SE's bytes, is
        not a timing)."""
        return [c for c in self.cells if c.a and c.b and c.testable]

    @property
    def untested(self) -> list[Cell]:
        """Timed cells with fewer than two samples on a side: shown, but no test could run."""
        return [c for c in self.timed if c.why == NOT_TESTED]


def _spread(xs: list[float]) -> float:
    med = statistics.median(xs)
    return MAD_TO_SIGMA * statistics.median(abs(x - med) for x in xs)


def differs(a: list[float], b: list[float], min_ratio: float = DEFAULT_MIN_RATIO) -> tuple[bool, str]:
    """Apply the module's rule to two sample lists; (flagged, why)."""
    if len(a) < 2 or len(b) < 2:
        return False, NOT_TESTED
    ma, mb = statistics.median(a), statistics.median(b)
    if max(a) >= min(b) and max(b) >= min(a):
        return False, "ranges overlap"
    pooled = math.sqrt((_spread(a) ** 2 + _spread(b) ** 2) / 2)
    if abs(mb - ma) <= SPREAD_FACTOR * pooled:
        return False, f"|Δmedian| within {SPREAD_FACTOR:g}× pooled spread"
    ratio = mb / ma if ma > 0 else math.inf
    if 1 / min_ratio <= ratio <= min_ratio:
        return False, f"within {min_ratio:g}×"
    return True, f"{ratio:.2f}× {'slower' if ratio > 1 else 'faster'}, ranges apart, beyond {SPREAD_FACTOR:g}× spread"


def _changed(a: Results, b: Results) -> list[str]:
    """Cells whose native query text differs between the runs."""
    out = []
    for ra in a.records:
        rb = b.record(ra.engine, ra.benchmark)
        if rb is not None and ra.query is not None and rb.query is not None and ra.query.sha256 != rb.query.sha256:
            out.append(f"{ra.engine} {ra.benchmark} ({ra.query.file}: {ra.query.sha256[:12]} → {rb.query.sha256[:12]})")
    return out


def _measures(suites: Iterable[ReportSuite], rec: Record) -> list[Measure]:
    suite = find(suites, rec.suite)
    return suite.measures(rec) if suite is not None else timing_measures(rec)


def compare(a: Results, b: Results, suites: Iterable[ReportSuite], min_ratio: float = DEFAULT_MIN_RATIO,
            skip_changed: bool = False) -> Comparison:
    """Compare run ``b`` against run ``a`` (ratios are B/A), each cell by its suite's measures.
    Raises :class:`CompareRefused` for different datasets, or for changed query text unless
    ``skip_changed``."""
    suites = list(suites)
    if a.dataset.content_hash != b.dataset.content_hash:
        raise CompareRefused(
            f"the runs used different datasets: A {a.run_id} has content hash {a.dataset.content_hash}, "
            f"B {b.run_id} has {b.dataset.content_hash}; every cell differs in what it measured, nothing "
            "is compared")
    differ = sorted(k for k in {*a.params, *b.params} if a.params.get(k) != b.params.get(k))
    if differ:
        why = (f"they drew them from different seeds ({a.seed} / {b.seed})" if a.seed != b.seed else
               "the content hash does not cover the dataset's own parameters, so one run used an edited manifest")
        shown = "; ".join(f"{k} {str(a.params.get(k))[:60]} / {str(b.params.get(k))[:60]}" for k in differ[:4])
        raise CompareRefused(
            f"the runs name one dataset ({a.dataset.content_hash}) but measured different parameters: {shown} "
            f"(A {a.run_id} / B {b.run_id}): {why}; nothing is compared")
    changed = _changed(a, b)
    if changed and not skip_changed:
        raise CompareRefused("the native query text differs in these cells, so they measured different "
                             "queries: " + "; ".join(changed) + " (use --skip-changed to compare the others)")
    out = Comparison(a, b, refused=changed)
    ea, eb = a.engines(), b.engines()
    out.only_a = [e for e in ea if e not in eb]
    out.only_b = [e for e in eb if e not in ea]
    refused = {c.split(" (")[0] for c in changed}
    for engine in [e for e in ea if e in eb]:
        for ra in [r for r in a.records if r.engine == engine]:
            rb = b.record(engine, ra.benchmark)
            if rb is None or f"{engine} {ra.benchmark}" in refused:
                continue
            mb = {m.name: m for m in _measures(suites, rb)}
            for ma in _measures(suites, ra):
                sa, sb = ma.samples, mb[ma.name].samples if ma.name in mb else []
                if not ma.testable:
                    out.cells.append(Cell(engine, ma.name, ra.status, rb.status, sa, sb, False,
                                          f"{ma.unit}: for information", ma.unit, testable=False))
                    continue
                if (ra.status == "ok") != (rb.status == "ok") and (ra.status in BAD or rb.status in BAD):
                    out.cells.append(Cell(engine, ma.name, ra.status, rb.status, sa, sb, True,
                                          f"status {ra.status} → {rb.status}", ma.unit))
                    continue
                if not sa or not sb:
                    if ra.status != "ok" or rb.status != "ok":
                        out.cells.append(Cell(engine, ma.name, ra.status, rb.status, sa, sb, False,
                                              f"status {ra.status} / {rb.status}: no timing", ma.unit))
                    continue
                flagged, why = differs(sa, sb, min_ratio)
                out.cells.append(Cell(engine, ma.name, ra.status, rb.status, sa, sb, flagged, why, ma.unit))
    return out


def _num(v: float | None, unit: str = "") -> str:
    if v is None:
        return "—"
    return f"{v:,.0f}{unit}" if v >= 100 else f"{v:,.2f}{unit}"


def print_comparison(c: Comparison, console: Console) -> None:
    """The table of cells, then the flagged ones in words."""
    t = Table(title=f"B {c.b.run_id} vs A {c.a.run_id} · dataset {c.a.dataset.content_hash[:12]} · ratio = B/A "
                    "of medians")
    for col, just in (("engine", "left"), ("cell", "left"), ("A median", "right"), ("B median", "right"),
                      ("B/A", "right"), ("A [min, max]", "right"), ("B [min, max]", "right"), ("", "left")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for cell in c.cells:
        unit = f" {cell.unit}"
        rng = [f"[{_num(min(s))}, {_num(max(s))}]" if s else "—" for s in (cell.a, cell.b)]
        ratio = f"{cell.ratio:.2f}×" if cell.ratio is not None else "—"
        mark = f"[red bold]FLAG[/red bold] {cell.why}" if cell.flagged else f"[dim]{cell.why}[/dim]"
        t.add_row(cell.engine, cell.cell, _num(cell.median_a, unit) if cell.a else cell.status_a,
                  _num(cell.median_b, unit) if cell.b else cell.status_b,
                  f"[red]{ratio}[/red]" if cell.flagged else ratio, rng[0], rng[1], mark)
    console.print(t)
    for label, names in (("only in A", c.only_a), ("only in B", c.only_b)):
        if names:
            console.print(f"engines {label}: {', '.join(names)}")
    if c.refused:
        console.print("[yellow]not compared (query text differs):[/yellow] " + "; ".join(c.refused))
    untested = c.untested
    if untested:
        console.print(f"[yellow]{len(untested)} of {len(c.timed)} timed cells not tested[/yellow] (fewer than 2 "
                      "samples on a side: run both with --repetitions 2 or more)")
    if c.flagged:
        console.print(f"[red bold]{len(c.flagged)} cell(s) differ beyond the runs' own spread:[/red bold] "
                      + ", ".join(f"{x.engine} {x.cell} ({x.why})" for x in c.flagged))
    else:
        tested = len(c.timed) - len(untested)
        console.print(f"[green]no cell differs beyond the runs' own spread[/green] ({tested} tested)")


def main(a: Results, b: Results, suites: Iterable[ReportSuite], console: Console, err: Console,
         min_ratio: float = DEFAULT_MIN_RATIO, skip_changed: bool = False) -> int:
    """``tickbench compare``: compare, print; the exit status (see the module docstring)."""
    try:
        if min_ratio < 1:
            raise CompareRefused(f"--min-ratio {min_ratio:g}: must be at least 1")
        c = compare(a, b, suites, min_ratio, skip_changed)
        if not c.flagged and len(c.untested) == len(c.timed):
            raise CompareRefused(
                f"nothing to compare: none of the {len(c.timed)} cells timed in both runs has 2 samples on each "
                "side (runs of --repetitions 1), so no difference could be tested; run both with --repetitions 2 "
                "or more")
    except CompareRefused as exc:
        err.print(f"[red]error:[/red] {escape(' '.join(str(exc).split()))}", highlight=False, soft_wrap=True)
        return 2
    print_comparison(c, console)
    return 1 if c.flagged else 0
