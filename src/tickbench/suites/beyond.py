"""The suites beyond the paper (SPEC §2.2) as data: their cells, ids and options.

``tick-latency`` (after KungfuDB's table 1), ``stream`` (after the STAC-M3 ingest harness),
``concurrency`` (the STAC-M3 users dimension), ``scaling`` (latency against data read) and
``durability`` (acknowledged rows lost to a kill -9, per durability setting). The protocols
are in :mod:`tickbench.run.beyond`, :mod:`tickbench.run.durability` and METHODOLOGY.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tickbench.suites.published import DAY_NS, QUERY_IDS, QueryParams, _day_ns, _probe_times

BEYOND_SUITES = ("tick-latency", "stream", "concurrency", "scaling", "durability")

TICK_MATRIX: tuple[tuple[int, int], ...] = tuple((x, y) for y in (10_000, 100_000) for x in (1, 10, 100))
STREAM_RATES: tuple[int | None, ...] = (10_000, 100_000, 1_000_000, None)  # None: as fast as possible
CONCURRENCY_CLIENTS = (1, 2, 4, 8)
SPANS = ("day", "week", "month")


class OptionError(ValueError):
    """A suite option that cannot be parsed; the message names it and the expected form."""


@dataclass(frozen=True)
class BeyondOptions:
    """The options of the suites beyond the paper (each has a ``tickbench run`` flag)."""

    tick_matrix: tuple[tuple[int, int], ...] = TICK_MATRIX  # (X tickers, Y records per ticker)
    tick_reps: int = 3
    tick_batch: int = 1000
    stream_rates: tuple[int | None, ...] = STREAM_RATES
    stream_writers: tuple[int, ...] = (1, 2)
    stream_seconds: float = 10.0
    stream_max_batch: int = 1000  # the most events one write carries when a writer is behind
    concurrency_clients: tuple[int, ...] = CONCURRENCY_CLIENTS
    concurrency_seconds: float = 10.0
    scaling_factor: float = 2.0
    scaling_spans: tuple[str, ...] = field(default=SPANS)
    durability_seconds: float = 10.0  # the longest a writer streams before the kill ends it
    durability_writers: int = 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "tick_matrix": [list(c) for c in self.tick_matrix], "tick_reps": self.tick_reps,
            "tick_batch": self.tick_batch, "stream_rates": list(self.stream_rates),
            "stream_writers": list(self.stream_writers), "stream_seconds": self.stream_seconds,
            "stream_max_batch": self.stream_max_batch,
            "concurrency_clients": list(self.concurrency_clients),
            "concurrency_seconds": self.concurrency_seconds, "scaling_factor": self.scaling_factor,
            "scaling_spans": list(self.scaling_spans), "durability_seconds": self.durability_seconds,
            "durability_writers": self.durability_writers,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> BeyondOptions:
        d = cls()
        return cls(
            tick_matrix=tuple((int(x), int(y)) for x, y in raw.get("tick_matrix", d.tick_matrix)),
            tick_reps=int(raw.get("tick_reps", d.tick_reps)),
            tick_batch=int(raw.get("tick_batch", d.tick_batch)),
            stream_rates=tuple(None if r is None else int(r) for r in raw.get("stream_rates", d.stream_rates)),
            stream_writers=tuple(int(w) for w in raw.get("stream_writers", d.stream_writers)),
            stream_seconds=float(raw.get("stream_seconds", d.stream_seconds)),
            stream_max_batch=int(raw.get("stream_max_batch", d.stream_max_batch)),
            concurrency_clients=tuple(int(c) for c in raw.get("concurrency_clients", d.concurrency_clients)),
            concurrency_seconds=float(raw.get("concurrency_seconds", d.concurrency_seconds)),
            scaling_factor=float(raw.get("scaling_factor", d.scaling_factor)),
            scaling_spans=tuple(raw.get("scaling_spans", d.scaling_spans)),
            durability_seconds=float(raw.get("durability_seconds", d.durability_seconds)),
            durability_writers=int(raw.get("durability_writers", d.durability_writers)),
        )


def parse_matrix(text: str) -> tuple[tuple[int, int], ...]:
    """``"1x10000,10x10000"`` → ``((1, 10000), (10, 10000))``."""
    out = []
    for item in text.split(","):
        x, sep, y = item.strip().lower().partition("x")
        if not sep or not x.isdigit() or not y.isdigit() or int(x) < 1 or int(y) < 1:
            raise OptionError(f"--tick-matrix {text}: expected XxY,… with positive integers, e.g. 1x10000,10x10000")
        out.append((int(x), int(y)))
    return tuple(out)


def parse_rates(text: str) -> tuple[int | None, ...]:
    """``"10000,100000,max"`` → ``(10000, 100000, None)``; ``max`` is as fast as possible."""
    out: list[int | None] = []
    for item in text.split(","):
        item = item.strip().lower()
        if item == "max":
            out.append(None)
        elif item.isdigit() and int(item) > 0:
            out.append(int(item))
        else:
            raise OptionError(f"--stream-rates {text}: expected positive events/s or 'max', e.g. 10000,100000,max")
    return tuple(out)


def parse_counts(text: str, option: str) -> tuple[int, ...]:
    """``"1,2,4"`` → ``(1, 2, 4)``, every count positive."""
    items = [s.strip() for s in text.split(",")]
    if not all(s.isdigit() and int(s) > 0 for s in items):
        raise OptionError(f"{option} {text}: expected positive integers separated by commas, e.g. 1,2,4")
    return tuple(int(s) for s in items)


def check_options(o: BeyondOptions) -> None:
    """Refuse options no cell could run with; the message names the option."""
    checks = [
        (o.tick_reps >= 1, f"--tick-reps {o.tick_reps}: must be at least 1"),
        (o.tick_batch >= 1, f"--tick-batch {o.tick_batch}: must be at least 1"),
        (o.stream_seconds > 0, f"--stream-seconds {o.stream_seconds}: must be positive"),
        (o.concurrency_seconds > 0, f"--concurrency-seconds {o.concurrency_seconds}: must be positive"),
        (o.scaling_factor >= 1, f"--scaling-factor {o.scaling_factor}: must be at least 1"),
        (o.durability_seconds >= 1, f"--durability-seconds {o.durability_seconds}: must be at least 1"),
        (o.durability_writers >= 1, f"--durability-writers {o.durability_writers}: must be at least 1"),
    ]
    for ok, message in checks:
        if not ok:
            raise OptionError(message)


# -- benchmark ids -------------------------------------------------------------------------

def tick_id(x: int, y: int, mode: str) -> str:
    return f"tick-latency/X={x},Y={y}/{mode}"


def rate_label(rate: int | None) -> str:
    return "max" if rate is None else str(rate)


def stream_id(rate: int | None, writers: int) -> str:
    return f"stream/rate={rate_label(rate)}/writers={writers}"


def concurrency_id(clients: int) -> str:
    return f"concurrency/clients={clients}"


def scaling_id(qid: str) -> str:
    return f"scaling/{qid}"


def durability_id(setting: str) -> str:
    return f"durability/{setting}"


def cell_ids(suite: str, opts: BeyondOptions, settings: tuple[str, ...] = ()) -> list[str]:
    """Every benchmark id the suite records per engine, in run order; ``settings`` are the
    engine's durability settings (one ``durability/default`` cell when it names none)."""
    if suite == "tick-latency":
        return [tick_id(x, y, m) for x, y in opts.tick_matrix for m in ("single", "batch")]
    if suite == "stream":
        return [stream_id(r, w) for r in opts.stream_rates for w in opts.stream_writers]
    if suite == "concurrency":
        return [concurrency_id(c) for c in opts.concurrency_clients]
    if suite == "scaling":
        return [scaling_id(q) for q in QUERY_IDS]
    if suite == "durability":
        return [durability_id(s) for s in settings or ("default",)]
    raise ValueError(suite)


# -- scaling: one query over another time span -----------------------------------------------

# The table each query reads and whether it reads one symbol (S) or every symbol: how "rows
# read" is counted for the log-log slope (the rows of the partitions in the query's scope).
QUERY_SCOPE: dict[str, tuple[str, bool]] = {
    "T-V1": ("trades", False), "T-V2": ("trades", False), "T-VWAP": ("trades", True),
    "O-T": ("book", True), "O-B1": ("book", False), "O-B2": ("book", False), "O-S": ("book", True),
    "O-V1": ("book", True), "O-V2": ("book", True), "O-NBBO": ("book", True), "C-R": ("book", True),
    "C-VT": ("trades", True), "C-VO1": ("book", True), "C-VO2": ("book", True),
}


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
    ot = _probe_times(seed, f"O-T/{span}", _day_ns(first), _day_ns(last) + DAY_NS)
    return SpanParams(day=base.day, week=base.week, month=base.month, symbol=base.symbol,
                      multi_day=base.multi_day, ot_times=ot, nbbo_times=base.nbbo_times,
                      span_days=tuple(days))


def params_from_dict(raw: dict[str, Any]) -> QueryParams:
    """Rebuild :class:`QueryParams` (or :class:`SpanParams`) from ``as_dict()``."""
    common = dict(day=raw["day"], week=tuple(raw["week"]), month=tuple(raw["month"]),
                  symbol=raw["symbol"], multi_day=raw["multi_day"],
                  ot_times=tuple(raw["ot_times"]), nbbo_times=tuple(raw["nbbo_times"]))
    if raw.get("span_days"):
        return SpanParams(**common, span_days=tuple(raw["span_days"]))
    return QueryParams(**common)
