"""The calendar and instruments of the default dataset (SPEC §1.1).

Rates are per day at scale factor 1 and come from the published row counts: the 30-day period
holds BTC-USD 8.81 M trades / 15.66 M book rows, ETH-USD 10.01 M / 14.06 M, USDT-USD
0.76 M / 0.92 M; the multi-exchange day holds 1.43 M / 1.22 M / 0.11 M book rows over five
venues; the bulk-load day holds 1,000,000 trades and 1,500,000 book rows.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

NS_PER_DAY = 86_400 * 1_000_000_000
EPOCH = dt.date(1970, 1, 1)

MONTH_START = dt.date(2022, 6, 18)
MONTH_DAYS = 30
MULTI_DAY = dt.date(2022, 7, 20)
BULK_DAY = dt.date(2022, 6, 1)
HOME_EXCHANGE = "COINBASE"
VENUES = ("COINBASE", "BINANCEUS", "KRAKEN", "BITSTAMP", "GEMINI")
# Share of the multi-exchange day's activity per venue.
VENUE_SHARE = {"COINBASE": 0.34, "BINANCEUS": 0.22, "KRAKEN": 0.19, "BITSTAMP": 0.15, "GEMINI": 0.10}
# Per-venue feed latency behind the common price (ms) and quote offset (basis points).
VENUE_LATENCY_MS = {"COINBASE": 0.0, "BINANCEUS": 35.0, "KRAKEN": 60.0, "BITSTAMP": 20.0, "GEMINI": 90.0}
VENUE_OFFSET_BP = {"COINBASE": 0.0, "BINANCEUS": 0.6, "KRAKEN": -0.8, "BITSTAMP": 0.3, "GEMINI": -0.4}


@dataclass(frozen=True)
class Instrument:
    """One instrument: its grids, its price dynamics and its activity at scale 1."""

    sym: str
    price_decimals: int  # tick = 10 ** -price_decimals
    lot_decimals: int  # lot = 10 ** -lot_decimals
    start_price: float  # open of the first calendar day
    daily_vol: float  # stdev of daily log returns
    trades_per_day: float  # single-exchange day, scale 1
    book_per_day: float
    multi_book: float  # book rows on the multi-exchange day over all venues, scale 1
    bulk_share: float  # share of the bulk-load day's rows
    spread_ticks: float  # mean quoted spread in ticks beyond the minimum of one
    gap_ticks: float  # mean extra gap between deeper levels, in ticks
    size_scale: float  # median size at the top level, in units
    mean_reverting: bool = False  # a stablecoin: the price reverts to its start

    @property
    def tick(self) -> float:
        return 10.0 ** -self.price_decimals


INSTRUMENTS: tuple[Instrument, ...] = (
    Instrument("BTC-USD", 2, 8, 29_800.0, 0.045, 8.81e6 / 30, 15.66e6 / 30, 1.43e6, 0.45,
               spread_ticks=40.0, gap_ticks=60.0, size_scale=0.08),
    Instrument("ETH-USD", 2, 8, 1_820.0, 0.058, 10.01e6 / 30, 14.06e6 / 30, 1.22e6, 0.51,
               spread_ticks=6.0, gap_ticks=8.0, size_scale=1.2),
    Instrument("USDT-USD", 5, 2, 1.0003, 0.0004, 0.76e6 / 30, 0.92e6 / 30, 0.11e6, 0.04,
               spread_ticks=0.3, gap_ticks=0.2, size_scale=9_000.0, mean_reverting=True),
)
BULK_TRADES = 1_000_000
BULK_BOOK = 1_500_000


def synthetic_instruments(count: int) -> tuple[Instrument, ...]:
    """``count`` further instruments with a Zipf-like (rank ** -1.1) activity distribution."""
    out = []
    for rank in range(1, count + 1):
        w = 0.6 * rank**-1.1
        out.append(
            Instrument(
                f"SYN{rank:04d}-USD", 3, 4, 10.0 + 7.3 * rank, 0.06,
                10.01e6 / 30 * w, 14.06e6 / 30 * w, 0.0, 0.5 * w,
                spread_ticks=3.0, gap_ticks=4.0, size_scale=25.0,
            )
        )
    return tuple(out)


def month_days() -> list[dt.date]:
    return [MONTH_START + dt.timedelta(days=i) for i in range(MONTH_DAYS)]


def day_ns(day: dt.date) -> int:
    """Nanoseconds since the epoch at 00:00 UTC of ``day``."""
    return (day - EPOCH).days * NS_PER_DAY


def all_days() -> list[dt.date]:
    """Every calendar day any partition uses, in order (the daily price path spans them)."""
    return sorted({BULK_DAY, *month_days(), MULTI_DAY})


@dataclass(frozen=True)
class Partition:
    """One (table-pair, day, exchange, instrument) unit of generation."""

    day: dt.date
    exchange: str
    sym: str
    trades: int  # target counts at this scale
    book: int

    @property
    def name(self) -> str:
        return f"{self.day.isoformat()}/{self.exchange}__{self.sym}"


def partitions(scale: float, symbols: int = 0) -> list[Partition]:
    """Every partition of the dataset at ``scale`` with ``symbols`` extra instruments."""
    instruments = INSTRUMENTS + synthetic_instruments(symbols)
    out: list[Partition] = []
    for inst in instruments:
        share = inst.bulk_share
        out.append(Partition(BULK_DAY, HOME_EXCHANGE, inst.sym,
                             _count(BULK_TRADES * share, scale), _count(BULK_BOOK * share, scale)))
        for day in month_days():
            out.append(Partition(day, HOME_EXCHANGE, inst.sym,
                                 _count(inst.trades_per_day, scale), _count(inst.book_per_day, scale)))
        if inst.multi_book:
            ratio = inst.trades_per_day / inst.book_per_day
            for venue in VENUES:
                book = inst.multi_book * VENUE_SHARE[venue]
                out.append(Partition(MULTI_DAY, venue, inst.sym,
                                     _count(book * ratio, scale), _count(book, scale)))
    return out


def instrument(sym: str, symbols: int = 0) -> Instrument:
    for inst in INSTRUMENTS + synthetic_instruments(symbols):
        if inst.sym == sym:
            return inst
    raise KeyError(sym)


def _count(rate: float, scale: float) -> int:
    return max(20, round(rate * scale))
