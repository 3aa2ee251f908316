"""How one result cell reads in a table: the same text in the terminal, Markdown and HTML."""

from __future__ import annotations

import statistics

from tickbench.results import Record, Results
from tickbench.suites.published import BENCHMARKS

MARK = {"ok": "✔", "wrong": "✘", "timeout": "⏱", "error": "✘", "unsupported": "—",
        "not_applicable": "n/a", "unavailable": "—"}


def cell_text(rec: Record | None) -> str:
    """Median ms (with the server-side median where the engine reports one) and ✔ for a
    verified query; W in seconds; SE in %; otherwise the status."""
    if rec is None:
        return ""
    if rec.status != "ok":
        label = {"wrong": "✘ wrong", "timeout": "⏱ timeout", "error": "✘ error",
                 "unsupported": "— unsupported", "not_applicable": "n/a",
                 "unavailable": "— unavailable"}[rec.status]
        return label
    if rec.benchmark == "W":
        csv = rec.figures.get("csv", {})
        return f"{csv.get('seconds', 0):.2f} s · {csv.get('mb_per_s', 0):.0f} MB/s ✔"
    if rec.benchmark == "SE":
        pct = rec.figures.get("pct_of_csv")
        if pct is not None:
            return f"{pct:.1f} % of CSV"
        pq = rec.figures.get("pct_of_parquet")
        return f"{pq:.1f} % of Parquet" if pq is not None else "?"
    assert rec.stats is not None
    server = server_median_ms(rec)
    if server is not None:
        return f"{rec.stats.median_ms:,.1f} ms (server {server:,.1f}) ✔"
    return f"{rec.stats.median_ms:,.1f} ms ✔"


def server_median_ms(rec: Record) -> float | None:
    """The median of the engine's own (server-side) times of the timed repetitions, in ms, or
    ``None`` where the engine reported none (SPEC §3: kept beside the client-side time)."""
    if not rec.server_samples_ns:
        return None
    return float(statistics.median(rec.server_samples_ns)) / 1e6


def matrix(results: Results) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """(engines, [(benchmark id, [cell text per engine])]) in SPEC order."""
    engines = results.engines()
    rows = []
    for b in BENCHMARKS:
        rows.append((b.id, [cell_text(results.record(e, b.id)) for e in engines]))
    return engines, rows


def problems(results: Results) -> list[Record]:
    """Cells that did not produce a verified figure, with their reasons."""
    return [r for r in results.records if r.status not in ("ok",)]
