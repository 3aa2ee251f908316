"""Latency distributions as HDR histograms (nanoseconds, 3 significant digits).

Histograms travel from the worker to the parent and into ``results.json`` as the library's
compressed base64 encoding (``HdrHistogram.encode``), so distributions from several clients
or repetitions merge exactly, and a reader can recompute any percentile later.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hdrh.histogram import HdrHistogram

LOWEST_NS = 1
HIGHEST_NS = 3_600 * 1_000_000_000  # an hour: anything slower is clamped (and is a timeout anyway)
DIGITS = 3
PERCENTILES = (50.0, 99.0, 99.9)


def new() -> HdrHistogram:
    return HdrHistogram(LOWEST_NS, HIGHEST_NS, DIGITS)


def record(h: HdrHistogram, ns: int, count: int = 1) -> None:
    """Record ``ns`` (clamped into the histogram's range) ``count`` times."""
    h.record_value(min(max(int(ns), LOWEST_NS), HIGHEST_NS), count)


def encode(h: HdrHistogram) -> str:
    return bytes(h.encode()).decode("ascii")


def decode(text: str) -> HdrHistogram:
    h = new()
    if text:
        h.add(HdrHistogram.decode(text.encode("ascii")))
    return h


def merge(encoded: Iterable[str]) -> HdrHistogram:
    """One histogram holding every sample of the encoded ones."""
    out = new()
    for text in encoded:
        if text:
            out.add(HdrHistogram.decode(text.encode("ascii")))
    return out


def summary(h: HdrHistogram) -> dict[str, Any]:
    """Count, mean, p50/p99/p99.9 and max in microseconds, and the encoded histogram."""
    n = h.get_total_count()
    if n == 0:
        return {"count": 0, "hdr": ""}
    return {
        "count": n,
        "mean_us": h.get_mean_value() / 1e3,
        "p50_us": h.get_value_at_percentile(50.0) / 1e3,
        "p99_us": h.get_value_at_percentile(99.0) / 1e3,
        "p99_9_us": h.get_value_at_percentile(99.9) / 1e3,
        "max_us": h.get_max_value() / 1e3,
        "hdr": encode(h),
    }
