"""The concrete parameters of a run on the paper dataset: the days, the symbol and the random probe
times that every engine's queries and the reference bind (SPEC §2), and the scaling suite's
rebinding of them to one time span. Engines, suites and the reference all read them from here.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from tickbench.data.dataset import DatasetError
from tickbench.rng import stream

NS_PER_US = 1_000
HOUR_NS = 3_600 * 1_000_000_000
DAY_NS = 24 * HOUR_NS

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


def day_ns(iso: str) -> int:
    return (dt.date.fromisoformat(iso) - dt.date(1970, 1, 1)).days * DAY_NS


def probe_times(seed: int, name: str, start_ns: int, end_ns: int) -> tuple[int, ...]:
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
    if "day" not in p and "D" in p:
        raise DatasetError("this is a market dataset (tickbench generate --dataset market); the published "
                           "suite and the suites beyond it run on the paper dataset (--dataset paper); the "
                           "market suite's parameters are tickbench.datasets.market.params")
    month = (p["month"][0], p["month"][1])
    return QueryParams(
        day=p["day"],
        week=(p["week"][0], p["week"][1]),
        month=month,
        symbol=p["symbol"],
        multi_day=p["multi_day"],
        ot_times=probe_times(seed, "O-T", day_ns(month[0]), day_ns(month[1]) + DAY_NS),
        nbbo_times=probe_times(seed, "O-NBBO", day_ns(p["multi_day"]), day_ns(p["multi_day"]) + DAY_NS),
    )


def to_datetime(ns: int) -> dt.datetime:
    """A whole-µs ns timestamp as a naive UTC datetime."""
    return dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=ns // NS_PER_US)


@dataclass(frozen=True)
class SpanParams(QueryParams):
    """The run's parameters with every query's time range rebound to one span.

    ``days("day")``, ``days("week")`` and ``days("month")`` all return the span's days, so
    ``bindings()`` gives ``day_*``, ``week_*`` and ``month_*`` over the same range and the
    native query files run unchanged: "T-V1 over a week" is T-V1 with ``$day_start`` /
    ``$day_end`` a week apart. The O-T probe times are redrawn inside the span. O-NBBO reads
    the multi-exchange day, which no span changes (it scales with the scale factor only).
    """

    span_days: tuple[str, ...] = ()

    def days(self, span: str) -> list[str]:
        if span in ("day", "week", "month") and self.span_days:
            return list(self.span_days)
        return super().days(span)

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "span_days": list(self.span_days)}


def span_params(base: QueryParams, span: str, seed: int) -> SpanParams:
    """``base`` with every range rebound to the first day, week or month of its month."""
    days = QueryParams.days(base, span)
    first, last = days[0], days[-1]
    ot = probe_times(seed, f"O-T/{span}", day_ns(first), day_ns(last) + DAY_NS)
    return SpanParams(day=base.day, week=base.week, month=base.month, symbol=base.symbol,
                      multi_day=base.multi_day, ot_times=ot, nbbo_times=base.nbbo_times,
                      span_days=tuple(days))
