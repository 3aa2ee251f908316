"""The calendar, venues, universe and activity of the market dataset (SPEC §1.3).

Everything here depends on an instrument's *rank* alone (1 = the most active), never on the size
of the universe: a larger universe adds quieter instruments and leaves the others as they were.

Rates are per trading day at scale factor 1: activity falls as rank ** -1.1 and is normalised so
that a universe of 1,000 instruments holds about 50 M quotes and 5 M trades over the 20 days.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa

from tickbench.datasets.market.schema import INSTRUMENTS_SCHEMA
from tickbench.rng import stream

EPOCH = dt.date(1970, 1, 1)
NS_PER_S = 1_000_000_000
NS_PER_DAY = 86_400 * NS_PER_S

# The 20 trading days: the weekdays 2024-01-02 … 2024-01-30 without 2024-01-15 (a US holiday).
HOLIDAYS = (dt.date(2024, 1, 15),)
FIRST_DAY, LAST_DAY = dt.date(2024, 1, 2), dt.date(2024, 1, 30)
DAYS: tuple[dt.date, ...] = tuple(
    d for d in (FIRST_DAY + dt.timedelta(days=i) for i in range((LAST_DAY - FIRST_DAY).days + 1))
    if d.weekday() < 5 and d not in HOLIDAYS
)
D_INDEX = 9  # D = the 10th trading day
W_DAYS = 5  # W = trading days 1-5
SESSION_OPEN_S = 14 * 3600 + 30 * 60  # 14:30:00 UTC
SESSION_CLOSE_S = 21 * 3600  # 21:00:00 UTC, exclusive
SESSION_S = SESSION_CLOSE_S - SESSION_OPEN_S

# The venues in SPEC order. Each: feed latency behind the common price (µs; IEX's is its speed
# bump), its share of quote updates and order flow, and how often its quote sits at the inside.
VENUES = ("XNYS", "XNAS", "ARCX", "BATS", "EDGX", "IEXG", "MEMX", "XBOS")
VENUE_LATENCY_US = {"XNYS": 180, "XNAS": 120, "ARCX": 200, "BATS": 150, "EDGX": 170, "IEXG": 350,
                    "MEMX": 100, "XBOS": 450}
VENUE_SHARE = {"XNYS": 0.12, "XNAS": 0.18, "ARCX": 0.11, "BATS": 0.13, "EDGX": 0.13, "IEXG": 0.07,
               "MEMX": 0.12, "XBOS": 0.05}
VENUE_AT_INSIDE = {"XNYS": 0.65, "XNAS": 0.75, "ARCX": 0.6, "BATS": 0.65, "EDGX": 0.65, "IEXG": 0.45,
                   "MEMX": 0.6, "XBOS": 0.35}
PRIMARY_BOOST = 2.5  # the listing venue's share of updates and flow is this many times its usual share
PRIMARY_AT_INSIDE = 0.85
# A name quoted on fewer venues is quoted on its primary and then on these, in this order.
VENUE_PREFERENCE = ("XNAS", "BATS", "EDGX", "MEMX", "XNYS", "ARCX", "IEXG", "XBOS")
LISTINGS = (("XNYS", 0.4), ("XNAS", 0.5), ("ARCX", 0.1))

ZIPF = 1.1
REFERENCE_UNIVERSE = 1_000
QUOTES_SF1 = 50e6  # over the 20 days, for the reference universe
TRADES_SF1 = 5e6
MIN_UNIVERSE, MAX_UNIVERSE, DEFAULT_UNIVERSE = 1, 100_000, 1_000  # the market suite serves what a small universe can
HARMONIC = float(np.sum(np.arange(1, REFERENCE_UNIVERSE + 1, dtype=np.float64) ** -ZIPF))
BLOCK_BASE = 4  # part file b of a day holds ranks (4**(b-1), 4**b]: about equal activity each


def day_ns(day: dt.date) -> int:
    """Nanoseconds since the epoch at 00:00 UTC of ``day``."""
    return (day - EPOCH).days * NS_PER_DAY


def d_day() -> dt.date:
    return DAYS[D_INDEX]


def sym_width(universe: int) -> int:
    return len(str(universe))


def sym_of(rank: int, universe: int) -> str:
    """``S`` and the rank zero-padded to the universe's width: ``S0001`` … ``S1000``."""
    return f"S{rank:0{sym_width(universe)}d}"


def activity(rank: int) -> float:
    """The share of the reference universe's events that ``rank`` has (rank ** -1.1)."""
    return float(rank**-ZIPF / HARMONIC)


def quotes_per_day(rank: int, scale: float) -> float:
    return QUOTES_SF1 / len(DAYS) * activity(rank) * scale


def trades_per_day(rank: int, scale: float) -> float:
    return TRADES_SF1 / len(DAYS) * activity(rank) * scale


def venue_count(rank: int) -> int:
    """How many venues quote ``rank``: eight for the 25 most active, one fewer each time the rank
    doubles, two from rank 801 on."""
    if rank <= 25:
        return 8
    return max(2, 8 - math.ceil(math.log2(rank / 25)))


@dataclass(frozen=True)
class Instrument:
    """One instrument of the universe and its model parameters (all from its rank and the seed)."""

    rank: int
    sym: str
    tick: float
    lot: float
    primary: str
    venues: tuple[str, ...]  # the venues that quote it, primary first
    start_price: float  # the open of the first trading day
    daily_vol: float  # sd of daily log returns, before the day's own volatility factor
    spread_bp: float  # typical inside spread, basis points of the price
    lots: float  # typical quote size, in round lots of 100

    @property
    def tick_decimals(self) -> int:
        return 4 if self.tick < 0.01 else 2


@lru_cache(maxsize=131_072)
def instrument(seed: int, rank: int, universe: int) -> Instrument:
    """Instrument ``rank`` of a universe of ``universe`` (only its symbol depends on the universe)."""
    rng = stream(seed, "market", "instrument", rank)
    u = rng.random(8)
    sub_dollar = rank > 50 and u[0] < 0.05
    price = float(np.exp(np.log(0.2) + u[1] * np.log(0.85 / 0.2))) if sub_dollar else float(
        np.exp(np.log(2.0) + u[1] * np.log(500 / 2.0)))
    tick = 0.0001 if price < 1 else 0.01
    primary = LISTINGS[-1][0]
    acc = 0.0
    for venue, p in LISTINGS:
        acc += p
        if u[2] < acc:
            primary = venue
            break
    others = [v for v in VENUE_PREFERENCE if v != primary]
    venues = (primary, *others[: venue_count(rank) - 1])
    z = rng.standard_normal(2)
    daily_vol = 0.015 * float(np.exp(0.35 * z[0])) * (1 + 0.15 * math.log10(rank)) * (1.5 if sub_dollar else 1.0)
    spread_bp = 2.0 * rank**0.33 * float(np.exp(0.3 * z[1]))
    lots = float(np.clip(round(20 / math.sqrt(price)), 1, 50))
    return Instrument(rank, sym_of(rank, universe), tick, 1.0, primary, venues, price, daily_vol, spread_bp, lots)


def universe_instruments(seed: int, universe: int) -> list[Instrument]:
    return [instrument(seed, r, universe) for r in range(1, universe + 1)]


def instruments_table(instruments: list[Instrument]) -> pa.Table:
    """The ``instruments`` table of SPEC §1.3, by rank."""
    return pa.table({
        "sym": [i.sym for i in instruments], "rank": [i.rank for i in instruments],
        "tick": [i.tick for i in instruments], "lot": [i.lot for i in instruments],
        "primary": [i.primary for i in instruments], "venues": [len(i.venues) for i in instruments],
    }, schema=INSTRUMENTS_SCHEMA)


@dataclass(frozen=True)
class Block:
    """One unit of work and one part file per table: a trading day and a fixed range of ranks."""

    day: dt.date
    index: int
    first_rank: int
    last_rank: int

    def expected_rows(self, scale: float) -> float:
        ranks = range(self.first_rank, self.last_rank + 1)
        return sum(quotes_per_day(r, scale) + trades_per_day(r, scale) for r in ranks)

    def path(self, table: str) -> str:
        return f"{table}/{self.day.isoformat()}/block-{self.index}.parquet"


def rank_blocks(universe: int) -> list[tuple[int, int]]:
    """The fixed rank ranges of the part files: (4**(b-1), 4**b], b = 0, 1, …, cut at the universe."""
    out, lo, b = [], 1, 0
    while lo <= universe:
        hi = min(universe, BLOCK_BASE**b)
        out.append((lo, hi))
        lo, b = hi + 1, b + 1
    return out


def blocks(universe: int) -> list[Block]:
    return [Block(day, i, lo, hi) for day in DAYS for i, (lo, hi) in enumerate(rank_blocks(universe))]


def calendar_dict() -> dict[str, object]:
    """The generated calendar as the manifest records it."""
    return GENERATED.to_dict()


@dataclass(frozen=True)
class Calendar:
    """A market dataset's trading days, daily session [open, close) in seconds of the UTC day, and
    venues: the generated calendar (:data:`GENERATED`), or an imported dataset's, derived from its
    data and read from its manifest (:func:`calendar_of`). The suite's parameters, reference and
    validation go by it, never by the generated calendar's constants."""

    days: tuple[str, ...]
    open_s: int
    close_s: int
    venues: tuple[str, ...]

    @property
    def session_s(self) -> int:
        return self.close_s - self.open_s

    def session_ns(self, day: str) -> tuple[int, int]:
        """[open, close) of ``day``'s session, ns since the epoch."""
        start = day_ns(dt.date.fromisoformat(day))
        return start + self.open_s * NS_PER_S, start + self.close_s * NS_PER_S

    def to_dict(self) -> dict[str, object]:
        return {"days": list(self.days),
                "session": {"open": _clock(self.open_s), "close": _clock(self.close_s), "timezone": "UTC"},
                "venues": list(self.venues)}


def _clock(seconds: int) -> str:
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _seconds(text: object, what: str) -> int:
    parts = str(text).split(":")
    if len(parts) != 3 or not all(p.isdigit() and len(p) == 2 for p in parts):
        raise ValueError(f"session {what} {str(text)[:40]!r} is not hh:mm:ss")
    h, m, s = map(int, parts)
    value = h * 3600 + m * 60 + s
    if m > 59 or s > 59 or value > 86_400:
        raise ValueError(f"session {what} {text!r} is not a time of the day (00:00:00 … 24:00:00)")
    return value


def calendar_of(raw: object) -> Calendar:
    """The :class:`Calendar` a manifest's ``calendar`` records (ValueError naming what is wrong)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("session"), dict):
        raise ValueError("no calendar with days, session and venues")
    days, venues, session = raw.get("days"), raw.get("venues"), raw["session"]
    if not isinstance(days, list) or not days or not all(isinstance(d, str) for d in days):
        raise ValueError("calendar days: not a list of dates")
    for d in days:
        dt.date.fromisoformat(d)
    if sorted(set(days)) != days:
        raise ValueError("calendar days: not increasing")
    if not isinstance(venues, list) or not venues or not all(isinstance(v, str) for v in venues):
        raise ValueError("calendar venues: not a list of names")
    if session.get("timezone") != "UTC":
        raise ValueError("calendar session: its times must be UTC")
    cal = Calendar(tuple(days), _seconds(session.get("open"), "open"), _seconds(session.get("close"), "close"),
                   tuple(venues))
    if cal.close_s <= cal.open_s:
        raise ValueError(f"calendar session: closes ({_clock(cal.close_s)}) before it opens ({_clock(cal.open_s)})")
    return cal


def params_of(cal: Calendar) -> dict[str, object]:
    """The fixed parameters of SPEC §2.3 on ``cal``: D its 10th trading day (the middle one of a
    shorter calendar), W its first five, M all of them; W loads D."""
    d = cal.days[min(D_INDEX, (len(cal.days) - 1) // 2)]
    return {"D": d, "W": list(cal.days[:W_DAYS]), "M": list(cal.days), "bulk_day": d}


GENERATED = Calendar(tuple(d.isoformat() for d in DAYS), SESSION_OPEN_S, SESSION_CLOSE_S, VENUES)


def default_params() -> dict[str, object]:
    """The fixed parameters of SPEC §2.3 (the random ones are drawn from the run's seed)."""
    return params_of(GENERATED)
