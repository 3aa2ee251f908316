"""How one result cell reads in a table: the same text in the terminal, Markdown and HTML; and
the harness share of a query cell (its client time beyond the engine's own time)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from tickbench.results import Record, Results, harness_share_ms

MARK = {"ok": "✔", "wrong": "✘", "timeout": "⏱", "error": "✘", "unsupported": "—",
        "not_applicable": "n/a", "unavailable": "—", "interrupted": "⏸"}
STATUS_LABEL = {"wrong": "✘ wrong", "timeout": "⏱ timeout", "error": "✘ error", "unsupported": "— unsupported",
                "not_applicable": "n/a", "unavailable": "— unavailable", "interrupted": "⏸ interrupted"}
#: A cell is transport-bound when its client time exceeds the engine's own time by more than
#: this share of the client time, and by more than ``TRANSPORT_FLOOR_MS``: the figure then
#: measures the result's way to the client more than the engine.
TRANSPORT_SHARE = 0.2
TRANSPORT_FLOOR_MS = 5.0


def status_label(rec: Record) -> str:
    return STATUS_LABEL.get(rec.status, rec.status)


def server_median_ms(rec: Record) -> float | None:
    """The median of the engine's own (server-side) times of the timed repetitions, in ms, or
    ``None`` where the engine reported none (SPEC §3: kept beside the client-side time)."""
    if not rec.server_samples_ns:
        return None
    return float(statistics.median(rec.server_samples_ns)) / 1e6


def harness_ms(rec: Record) -> float | None:
    """The harness share of a timed cell (:func:`tickbench.results.harness_share_ms`), in ms;
    ``None`` where the engine reports no time of its own."""
    if rec.stats is None:
        return None
    return harness_share_ms(rec.samples_ns, rec.server_samples_ns)


def transport_bound(rec: Record) -> bool:
    """Whether the harness share exceeds max(``TRANSPORT_SHARE`` of the client time,
    ``TRANSPORT_FLOOR_MS``)."""
    gap = harness_ms(rec)
    if gap is None or rec.stats is None:
        return False
    return gap > max(TRANSPORT_SHARE * rec.stats.median_ms, TRANSPORT_FLOOR_MS)


def timed_text(rec: Record) -> str:
    """A verified timed cell: median ms (with the server-side median where the engine reports
    one) and ✔, marked when it is transport-bound."""
    assert rec.stats is not None
    server = server_median_ms(rec)
    text = f"{rec.stats.median_ms:,.1f} ms"
    if server is not None:
        text += f" (server {server:,.1f})"
    text += " ✔"
    if transport_bound(rec):
        text += f" ⚠ transport-bound (+{harness_ms(rec):,.1f} ms)"
    return text


def cell_text(rec: Record | None) -> str:
    """The generic text of a cell: its status when it is not ok, its timing when it has one."""
    if rec is None:
        return ""
    if rec.status != "ok":
        return status_label(rec)
    return timed_text(rec) if rec.stats is not None else "✔"


def problems(results: Results) -> list[Record]:
    """Cells that did not produce a verified figure, with their reasons."""
    return [r for r in results.records if r.status != "ok"]


@dataclass(frozen=True)
class Measure:
    """One figure of a cell that ``tickbench compare`` compares: its label, its samples (lower is
    better), their unit, and whether a difference can be tested (a size is shown, not tested)."""

    name: str
    samples: list[float]
    unit: str = "ms"
    testable: bool = True


def timing_measures(rec: Record) -> list[Measure]:
    """A timed cell's one measure: its repetitions in ms (none unless it is ok)."""
    samples = [s / 1e6 for s in rec.samples_ns] if rec.status == "ok" else []
    return [Measure(rec.benchmark, samples)]
