"""The published suite (SPEC §2.1): the 14 queries, W and SE, as data.

Each query is named by its id; its answer has exactly ``columns``, sorted ascending by
``sort_by``. Engines implement the queries in their own dialect (``engines/<name>/queries``),
the reference implementation in :mod:`tickbench.reference`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from tickbench.rng import stream

NS_PER_US = 1_000
HOUR_NS = 3_600 * 1_000_000_000
DAY_NS = 24 * HOUR_NS


@dataclass(frozen=True)
class Benchmark:
    """One benchmark of the published suite."""

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

PROBES = 10  # random times per O-T / O-NBBO


@dataclass(frozen=True)
class QueryParams:
    """Concrete parameters of one run: dates as ISO strings, times as ns since the epoch."""

    day: str
    week: tuple[str, str]
    month: tuple[str, str]
    symbol: str
    multi_day: str
    ot_times: tuple[int, ...]
    nbbo_times: tuple[int, ...]

    def days(self, span: str) -> list[str]:
        """The ISO days of ``span`` ("day", "week", "month" or "multi_day")."""
        if span in ("day", "multi_day"):
            return [getattr(self, span)]
        first, last = (dt.date.fromisoformat(d) for d in getattr(self, span))
        return [(first + dt.timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]

    def load_days(self) -> list[str]:
        """The ISO days an engine loads for the queries: the month's and the multi-exchange
        day, each once, in date order (every venue's rows of each day).

        Imported data usually has its multi-exchange day inside the month (a one-day import
        has D = W = M = X), so simply joining the two lists would load that day twice:
        doubled rows, or older rows appended after newer ones."""
        return sorted({*self.days("month"), *self.days("multi_day")})

    def bindings(self) -> dict[str, Any]:
        """Named query parameters: half-open ``[*_start, *_end)`` ranges as naive UTC
        datetimes, the symbol, and the probe times as lists of naive UTC datetimes."""
        out: dict[str, Any] = {"sym": self.symbol}
        for span in ("day", "week", "month", "multi"):
            days = self.days("multi_day" if span == "multi" else span)
            first = dt.datetime.fromisoformat(days[0])
            out[f"{span}_start"] = first
            out[f"{span}_end"] = first + dt.timedelta(days=len(days))
        out["ot_times"] = [to_datetime(t) for t in self.ot_times]
        out["nbbo_times"] = [to_datetime(t) for t in self.nbbo_times]
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "day": self.day, "week": list(self.week), "month": list(self.month),
            "symbol": self.symbol, "multi_day": self.multi_day,
            "ot_times": list(self.ot_times), "nbbo_times": list(self.nbbo_times),
        }


def _day_ns(iso: str) -> int:
    return (dt.date.fromisoformat(iso) - dt.date(1970, 1, 1)).days * DAY_NS


def _probe_times(seed: int, name: str, start_ns: int, end_ns: int) -> tuple[int, ...]:
    """``PROBES`` distinct whole-µs times in [start + 1 h, end), sorted, from the run's seed.

    Whole microseconds, so engines whose timestamps are µs can represent them exactly; the
    first hour is skipped so every probe has a snapshot before it on every venue.
    """
    rng = stream(seed, "probe-times", name)
    lo, hi = (start_ns + HOUR_NS) // NS_PER_US, end_ns // NS_PER_US
    picks: set[int] = set()
    while len(picks) < PROBES:
        picks.add(int(rng.integers(lo, hi)))
    return tuple(sorted(p * NS_PER_US for p in picks))


def query_params(dataset_params: dict[str, Any], seed: int) -> QueryParams:
    """The run's parameters: the dataset's days and symbol, random times from ``seed``."""
    p = dataset_params
    month = (p["month"][0], p["month"][1])
    return QueryParams(
        day=p["day"],
        week=(p["week"][0], p["week"][1]),
        month=month,
        symbol=p["symbol"],
        multi_day=p["multi_day"],
        ot_times=_probe_times(seed, "O-T", _day_ns(month[0]), _day_ns(month[1]) + DAY_NS),
        nbbo_times=_probe_times(seed, "O-NBBO", _day_ns(p["multi_day"]), _day_ns(p["multi_day"]) + DAY_NS),
    )


def to_datetime(ns: int) -> dt.datetime:
    """A whole-µs ns timestamp as a naive UTC datetime."""
    return dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=ns // NS_PER_US)
