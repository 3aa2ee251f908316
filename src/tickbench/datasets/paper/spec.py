"""The paper dataset's spec (SPEC §2.1): the reference paper's 14 queries, W and SE, as data.

Each query is named by its id; its answer has exactly ``columns``, sorted ascending by
``sort_by``. Engines implement the queries in their own dialect (``engines/<name>/queries``),
the reference implementation is :mod:`tickbench.datasets.paper.reference`, the parameters
:mod:`tickbench.datasets.paper.params`.

A module below the engines and the suites: the published suite runs these benchmarks and an
engine may read an answer's columns here (InfluxDB names its answer's columns by them), with no
engine importing a suite.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Benchmark:
    """One benchmark of the reference paper (the published suite runs them)."""

    id: str
    category: str  # the reference paper's grouping: write/storage, read, compute-heavy, complex
    kind: str  # "query", "load" or "storage"
    description: str
    columns: tuple[str, ...] = ()
    sort_by: tuple[str, ...] = ()


def _q(id: str, category: str, description: str, columns: str, sort_by: str) -> Benchmark:
    return Benchmark(id, category, "query", description, tuple(columns.split()), tuple(sort_by.split()))


QUERIES: tuple[Benchmark, ...] = (
    _q("T-V1", "read", "volume per (sym, side, minute) on D", "sym side bucket volume", "sym side bucket"),
    _q("T-V2", "read", "volume per (sym, side, day) over M", "sym side day volume", "sym side day"),
    _q("T-VWAP", "compute-heavy", "per-minute VWAP of S on D", "bucket vwap", "bucket"),
    _q("O-T", "read", "top of book of S at 10 random times in M", "t ts b1price b1size a1price a1size", "t"),
    _q("O-B1", "read", "max best bid per sym over W", "sym max_bid", "sym"),
    _q("O-B2", "read", "max best bid per sym over M", "sym max_bid", "sym"),
    _q("O-S", "compute-heavy", "spread of every snapshot of S on D", "ts spread", "ts"),
    _q("O-V1", "compute-heavy", "per-minute average top-level depth of S over W",
       "bucket bid_depth ask_depth", "bucket"),
    _q("O-V2", "compute-heavy", "per-hour average 5-level depth of S over M", "bucket bid_depth ask_depth", "bucket"),
    _q("O-NBBO", "complex", "NBBO of S over five venues at 10 random times on X", "t nbb nbo", "t"),
    _q("C-R", "complex", "5-minute mid-quote log returns of S on D", "bucket ret", "bucket"),
    _q("C-VT", "complex", "hourly volatility of 5-minute trade-price returns of S on D", "hour vol", "hour"),
    _q("C-VO1", "complex", "hourly volatility of 5-minute mid-quote returns of S on D", "hour vol", "hour"),
    _q("C-VO2", "complex", "4-hourly volatility of hourly mid-quote returns of S over W", "bucket4h vol", "bucket4h"),
)
LOADS: tuple[Benchmark, ...] = (
    Benchmark("W", "write/storage", "load", "bulk load of the bulk-load day (CSV, and Parquet separately)"),
    Benchmark("SE", "write/storage", "storage", "bytes on disk for the 30-day period / bytes as CSV, %"),
)
BENCHMARKS: tuple[Benchmark, ...] = QUERIES + LOADS
QUERY_IDS = tuple(q.id for q in QUERIES)
BY_ID = {b.id: b for b in BENCHMARKS}
