"""The market suite (SPEC §2.3) on Polars: the market dataset held in memory, one frame per (table, day).

:class:`PolarsMarket` is a mixin of the Polars :class:`~tickbench.engines.polars.adapter.Adapter`.
``_load_market()`` reads the 20 days' Parquet into a :class:`MarketStore`: **one DataFrame per
(table, UTC day)** holding every instrument's and venue's rows of that day, sorted by ``sym`` and
then by the table's order, quotes ``(ts, exchange, seq)`` and trades ``(ts, exchange,
trade_id)`` (exchange compared as bytes), as a tick store partitions by date and sorts each
partition by symbol (kdb+'s ``p#``). Two kinds of read follow from it:

- a whole-market query (M-STATS, M-TOPN, M-LAST) reads columns of the day's frame, one
  vectorised pass, with no per-instrument work in Python;
- a basket query finds each instrument's block of rows in a day's frame from the offsets kept at
  load, then its time range inside the block by two binary searches on ``ts`` (numpy
  ``searchsorted``), and stacks those views: nothing scans the other instruments or days.

Within an instrument the rows follow the SPEC's own orders, so M-NBBO's quote-by-quote steps, a
bar's open and close and an as-of lookup's tie on ``ts`` (the greatest ``seq`` is the last row)
all follow from the row order, with no sort at query time.

What is held (:data:`QUOTE_COLUMNS`, :data:`TRADE_COLUMNS`): ``sym`` (an ``Enum`` of the
dataset's instruments in byte order: two bytes a row up to 65,536 instruments, sorting as the SPEC
compares names) and
every column the M- queries read; ``exchange`` an ``Enum`` of the dataset's venues in byte order
(one byte a row), ``side`` an ``Enum`` of its two values. At SF 1 (N = 1,000: 50 M quotes, 5 M
trades) that is about 2.7 GB, within the 12 GiB budget of a run, so the whole month stays in
memory and no query is unsupported. A query answers ``sym`` as a string (:func:`named`).

Query contract: ``queries/M-<ID>.py`` defines::

    def query(store: MarketStore, params: dict[str, Any]) -> pl.LazyFrame

with ``params`` as for the paper queries (:func:`tickbench.engines.polars.adapter.bindings`: the
market bindings with their datetimes made UTC-aware).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

TS = pl.Datetime("ns", "UTC")
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
NS_PER_DAY = 86_400 * 10**9
SIDES = pl.Enum(["buy", "sell"])
# What is held of each table besides sym, and the order of an instrument's rows within a day.
QUOTE_COLUMNS = ("ts", "exchange", "seq", "bid", "bsize", "ask", "asize")
TRADE_COLUMNS = ("ts", "exchange", "trade_id", "side", "price", "amount")
HELD = {"quotes": QUOTE_COLUMNS, "trades": TRADE_COLUMNS}
ORDER = {"quotes": ("ts", "exchange", "seq"), "trades": ("ts", "exchange", "trade_id")}


def ns(t: dt.datetime | int) -> int:
    """A UTC-aware datetime as integer nanoseconds since the epoch (exact to the µs); an int is
    already that."""
    if isinstance(t, int):
        return t
    return (t - EPOCH) // dt.timedelta(microseconds=1) * 1_000


def through(t: dt.datetime) -> int:
    """The end of ``[start, end)`` that takes every row with ``ts <= t``: ``t`` + 1 ns."""
    return ns(t) + 1


def named(frame: pl.LazyFrame, *columns: str) -> pl.LazyFrame:
    """``frame`` with its ``sym`` (and ``columns``) as strings, as the answers carry names."""
    return frame.with_columns(pl.col("sym", *columns).cast(pl.String))


@dataclass(frozen=True)
class Day:
    """One (table, UTC day) frame: its rows sorted by (sym, the table's order), each instrument's
    block of rows (``blocks``: sym -> [lo, hi)), ``ts`` as int64 for binary searches, and its
    first and last ``ts``."""

    frame: pl.DataFrame
    blocks: dict[str, tuple[int, int]]
    ts: np.ndarray
    first: int
    last: int

    @classmethod
    def of(cls, frame: pl.DataFrame) -> Day:
        runs = frame.get_column("sym").rle()  # the frame is sorted by sym: one run per instrument
        ends = runs.struct.field("len").cum_sum().to_list()
        blocks = {str(s): (e - n, e) for s, n, e in zip(runs.struct.field("value").to_list(),
                                                          runs.struct.field("len").to_list(), ends, strict=True)}
        ts = frame.get_column("ts").to_physical().to_numpy()
        return cls(frame, blocks, ts, int(ts.min()), int(ts.max()))

    def within(self, start: int, end: int) -> bool:
        """Every row of the day lies in ``[start, end)``."""
        return start <= self.first and self.last < end

    def rows(self, start: int, end: int) -> pl.DataFrame:
        """The day's rows with ``start <= ts < end`` (the frame itself when it lies inside)."""
        if self.within(start, end):
            return self.frame
        return self.frame.filter(pl.col("ts").to_physical().is_between(start, end, closed="left"))

    def block(self, sym: str, start: int, end: int) -> tuple[int, int]:
        """The row range of ``sym``'s rows with ``start <= ts < end``: its block, then two binary
        searches on ``ts`` inside it ((0, 0) for an instrument with no rows that day)."""
        lo, hi = self.blocks.get(sym, (0, 0))
        ts = self.ts[lo:hi]
        return lo + int(np.searchsorted(ts, start, "left")), lo + int(np.searchsorted(ts, end, "left"))


class MarketStore:
    """The market tables in memory: one frame per (table, UTC day), each sorted by (sym, order)."""

    def __init__(self, venues: pl.Enum, syms: pl.Enum, instruments: pl.DataFrame) -> None:
        self.venue_type = venues
        self.sym_type = syms
        self.instruments = instruments
        self.days: dict[str, list[Day]] = {t: [] for t in HELD}  # in time order
        self.pairs: list[pl.DataFrame] = []  # each quotes day's (sym, exchange) pairs, as self.days["quotes"]

    def add(self, table: str, frame: pl.DataFrame) -> None:
        """Hold one day of ``table`` (after the days before it), already sorted by (sym, order)."""
        self.days[table].append(Day.of(frame))
        if table == "quotes":
            self.pairs.append(frame.select("sym", "exchange").unique())

    def rows(self) -> int:
        return sum(d.frame.height for days in self.days.values() for d in days) + self.instruments.height

    def venues(self) -> pl.Series:
        """Every venue of the dataset, as the ``exchange`` column's type."""
        return pl.Series("exchange", self.venue_type.categories, dtype=self.venue_type)

    def spanned(self, table: str, start: dt.datetime | int, end: dt.datetime | int) -> list[Day]:
        """The days of ``table`` with rows in ``[start, end)``, in time order."""
        lo, hi = ns(start), ns(end)
        return [d for d in self.days[table] if d.first < hi and d.last >= lo]

    def market(self, table: str, start: dt.datetime | int, end: dt.datetime | int,
               columns: Sequence[str]) -> pl.LazyFrame:
        """Every instrument's rows with ``start <= ts < end``: ``sym`` and ``columns`` of each
        day's frame (filtered on ``ts`` only when the day reaches outside the range), the days
        in time order, each by (sym, order)."""
        lo, hi = ns(start), ns(end)
        parts = [d.rows(lo, hi).select("sym", *columns) for d in self.spanned(table, lo, hi)]
        return pl.concat(parts, rechunk=False).lazy() if parts else self.empty(table, columns)

    def basket(self, table: str, syms: Iterable[str], start: dt.datetime | int, end: dt.datetime | int,
               columns: Sequence[str], label: str = "sym", **labels: Any) -> pl.LazyFrame:
        """The rows of ``syms`` with ``start <= ts < end`` (an instrument the data lacks has
        none), with ``columns`` and the instrument as column ``label`` (and each of ``labels`` as
        a constant column): the instruments one after another in the order given, each in its
        rows' order across the days. Each (instrument, day) is a slice of the day's frame."""
        lo, hi = ns(start), ns(end)
        spans = self.spanned(table, lo, hi)
        days = [d.frame.select("sym", *columns) for d in spans]
        parts = []
        for sym in dict.fromkeys(syms):
            for day, held in zip(spans, days, strict=True):
                a, b = day.block(sym, lo, hi)
                if b > a:
                    parts.append(held.slice(a, b - a))
        consts = [pl.lit(v).alias(k) for k, v in labels.items()]
        out = pl.concat(parts, rechunk=False).lazy() if parts else self.empty(table, columns)
        if label != "sym":
            out = out.rename({"sym": label})
        return out.with_columns(consts) if consts else out

    def latest(self, start: dt.datetime | int, end: dt.datetime | int, columns: Sequence[str]) -> pl.DataFrame:
        """Each (sym, exchange) pair's latest quote with ``start <= ts < end`` (by (ts, seq): its
        last row), with ``columns``: the last day of the range first, one grouped pass over its
        frame; then, a day further back at a time, only the instruments with a pair still
        missing (each day's pairs are kept at load), until none is or the range's start is
        reached."""
        lo, hi = ns(start), ns(end)
        spanned = [(d, p) for d, p in zip(self.days["quotes"], self.pairs, strict=True)
                   if d.first < hi and d.last >= lo]
        wanted = pl.concat([p for _, p in spanned]).unique() if spanned else self.pairs_schema()
        found: list[pl.DataFrame] = []
        pending = wanted
        for i, (day, _) in enumerate(reversed(spanned)):
            if i == 0:
                rows = day.rows(lo, hi).lazy()
            else:
                rows = self.basket_of(day, pending.get_column("sym").unique(), lo, hi).lazy()
            last = rows.group_by("sym", "exchange").agg(pl.col(*columns).last()).collect()
            if i:
                last = last.join(pending, on=["sym", "exchange"], how="semi")
            found.append(last)
            pending = pending.join(last, on=["sym", "exchange"], how="anti")
            if pending.is_empty():
                break
        if not found:
            return pl.DataFrame(schema={"sym": self.sym_type, "exchange": self.venue_type,
                                        **{c: self.schema("quotes")[c] for c in columns}})
        return pl.concat(found)

    def basket_of(self, day: Day, syms: pl.Series, lo: int, hi: int) -> pl.DataFrame:
        """One day's rows of ``syms`` with ``lo <= ts < hi``: a slice per instrument."""
        parts = [day.frame.slice(a, b - a) for s in syms.cast(pl.String).to_list()
                 for a, b in [day.block(s, lo, hi)] if b > a]
        return pl.concat(parts, rechunk=False) if parts else day.frame.clear()

    def pairs_schema(self) -> pl.DataFrame:
        return pl.DataFrame(schema={"sym": self.sym_type, "exchange": self.venue_type})

    def empty(self, table: str, columns: Sequence[str]) -> pl.LazyFrame:
        """No rows, with ``sym`` and ``columns`` typed as held."""
        return pl.LazyFrame(schema={"sym": self.sym_type, **{c: self.schema(table)[c] for c in columns}})

    def schema(self, table: str) -> dict[str, pl.DataType]:
        return {"ts": TS, "exchange": self.venue_type, "seq": pl.Int64(), "trade_id": pl.Int64(), "side": SIDES,
                **{c: pl.Float64() for c in ("bid", "bsize", "ask", "asize", "price", "amount")}}


class PolarsMarket:
    """The Polars adapter's part for the market dataset, picked by ``by_kind`` (no M-W or M-SE:
    nothing is on disk)."""

    market: MarketStore | None = None

    def _load_market(self) -> int:
        """Read the 20 days of quotes and trades into a :class:`MarketStore`, a day's files at a
        time: the held columns, split by the rows' own UTC day (a file may hold rows of another
        day), then each day's rows sorted by (sym, the table's order) into one frame."""
        days = self.params.load_days()  # type: ignore[attr-defined]
        dataset = self.dataset  # type: ignore[attr-defined]
        files = {t: [str(f) for f in dataset.files(t, days)] for t in HELD}
        scans = [pl.scan_parquet(f).select("sym", "exchange") for f in files.values() if f]
        names = pl.concat(scans).unique().collect() if scans else pl.DataFrame(schema={"sym": pl.String,
                                                                                          "exchange": pl.String})
        # byte order of the names (Python's str order is code-point order, the same as UTF-8's)
        venues = pl.Enum(sorted(set(names["exchange"].to_list())))
        syms = pl.Enum(sorted(set(names["sym"].to_list())))
        store = MarketStore(venues, syms, dataset.instruments())
        for table, held in HELD.items():
            chunks: dict[int, list[pl.DataFrame]] = defaultdict(list)
            for day in days:
                day_files = [str(f) for f in dataset.files(table, [day])]
                if not day_files:
                    continue
                frame = (pl.scan_parquet(day_files).select("sym", *held)
                         .with_columns(pl.col("sym").cast(syms), pl.col("exchange").cast(venues),
                                       *([pl.col("side").cast(SIDES)] if "side" in held else []))
                         .collect())
                utc_day = (pl.col("ts").to_physical() // NS_PER_DAY).alias("utc_day")
                for (key,), part in frame.with_columns(utc_day).partition_by("utc_day", as_dict=True,
                                                                             include_key=False).items():
                    chunks[int(key)].append(part)
            for key in sorted(chunks):
                store.add(table, pl.concat(chunks.pop(key)).sort("sym", *ORDER[table]).rechunk())
        self.market = store
        return store.rows()

    def market_settings(self) -> dict[str, Any]:
        return {
            "threads": pl.thread_pool_size(),
            "layout": "one frame per (table, UTC day), sorted by (sym, then quotes (ts, exchange, seq), trades "
                      "(ts, exchange, trade_id)); whole-market reads take the day's columns, a basket its "
                      "instruments' blocks (offsets kept at load) and time ranges by binary search",
            "held": {t: ["sym", *c] for t, c in HELD.items()},
        }
