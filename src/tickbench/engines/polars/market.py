"""The market suite (SPEC §2.3) on Polars: the market dataset held in memory, keyed by instrument.

:class:`PolarsMarket` is a mixin of the Polars :class:`~tickbench.engines.polars.adapter.Adapter`.
``load_market()`` reads the 20 days' Parquet into a :class:`MarketStore`: one DataFrame per (table,
instrument) holding every venue's rows of the month, as a tick store keys its in-memory tables
by symbol with a sorted time column. Quotes are ordered by ``(ts, exchange, seq)`` and trades by
``(ts, exchange, trade_id)`` (exchange compared as bytes): the SPEC's own orders, so M-NBBO's
quote-by-quote steps, a bar's open and close and an as-of lookup's tie on ``ts`` (the greatest
``seq`` is the last row) all follow from the row order, with no sort at query time. A query
slices each frame it reads to its time range by two binary searches on ``ts``
(``search_sorted``): nothing scans the month to find a day.

What is held (:data:`QUOTE_COLUMNS`, :data:`TRADE_COLUMNS`): every column the M- queries read;
``sym`` is the frame's key (a query adds it as a column where it groups by it), ``exchange`` an
``Enum`` of the dataset's venues in byte order (one byte a row), ``side`` an ``Enum`` of its two
values. At SF 1 (N = 1,000: 50 M quotes, 5 M trades) that is about 2.6 GB, within the 12 GiB
budget of a run, so the whole month stays in memory and no query is unsupported.

Query contract: ``queries/M-<ID>.py`` defines::

    def query(store: MarketStore, params: dict[str, Any]) -> pl.LazyFrame

with ``params`` as for the paper queries (:func:`tickbench.engines.polars.adapter.bindings`: the
market bindings with their datetimes made UTC-aware).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import polars as pl

from tickbench.engines.base import Market

TS = pl.Datetime("ns", "UTC")
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
SIDES = pl.Enum(["buy", "sell"])
# What is held of each table (sym is the frame's key), and the order of each frame's rows.
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


class MarketStore:
    """The market tables in memory: one frame per (table, instrument), sorted, found by binary search."""

    def __init__(self, venues: pl.Enum, instruments: pl.DataFrame) -> None:
        self.venue_type = venues
        self.instruments = instruments
        self.frames: dict[str, dict[str, pl.DataFrame]] = {t: {} for t in HELD}
        self._ts: dict[str, dict[str, pl.Series]] = {t: {} for t in HELD}  # ts as Int64, for search_sorted
        self.venues_of: dict[str, int] = {}  # how many venues quote each instrument (M-LAST's walk back)

    def add(self, table: str, sym: str, frame: pl.DataFrame) -> None:
        self.frames[table][sym] = frame.set_sorted("ts")
        self._ts[table][sym] = frame["ts"].to_physical()
        if table == "quotes":
            self.venues_of[sym] = frame["exchange"].n_unique()

    def rows(self) -> int:
        return sum(f.height for frames in self.frames.values() for f in frames.values()) + self.instruments.height

    def venues(self) -> pl.Series:
        """Every venue of the dataset, as the ``exchange`` column's type."""
        return pl.Series("exchange", self.venue_type.categories, dtype=self.venue_type)

    def syms(self, table: str) -> list[str]:
        """The instruments ``table`` holds rows of, sorted."""
        return sorted(self.frames[table])

    def bounds(self, table: str, sym: str, start: dt.datetime | int, end: dt.datetime | int) -> tuple[int, int]:
        """The row range of one frame with ``start <= ts < end``: two binary searches."""
        ts = self._ts[table][sym]
        return int(ts.search_sorted(ns(start), side="left")), int(ts.search_sorted(ns(end), side="left"))

    def slice(self, table: str, sym: str, start: dt.datetime | int, end: dt.datetime | int) -> pl.DataFrame:
        """The rows of one frame with ``start <= ts < end``, in the frame's order (a view, no copy)."""
        lo, hi = self.bounds(table, sym, start, end)
        return self.frames[table][sym].slice(lo, hi - lo)

    def latest(self, sym: str, start: dt.datetime | int, end: dt.datetime | int) -> pl.DataFrame:
        """The tail of ``sym``'s quotes with ``start <= ts < end`` that holds each venue's latest
        quote: read back from the end, doubling, until every venue of the instrument is seen (or
        ``start`` is reached), instead of reading the month."""
        lo, hi = self.bounds("quotes", sym, start, end)
        frame, n = self.frames["quotes"][sym], 1_024
        while True:
            tail = frame.slice(max(lo, hi - n), min(n, hi - lo))
            if hi - n <= lo or tail["exchange"].n_unique() >= self.venues_of[sym]:
                return tail
            n *= 2

    def basket(self, table: str, syms: Iterable[str], start: dt.datetime | int, end: dt.datetime | int,
               columns: Sequence[str], label: str = "sym", **labels: Any) -> pl.LazyFrame:
        """``start <= ts < end`` of the frames of ``syms`` (an instrument with no frame has no rows),
        with ``columns`` and the instrument as column ``label`` (and each of ``labels`` as a
        constant column), the instruments one after another, each in its frame's order."""
        want = [s for s in dict.fromkeys(syms) if s in self.frames[table]]
        parts = [(s, self.slice(table, s, start, end)) for s in want]
        consts = [pl.lit(v).alias(k) for k, v in labels.items()]
        frames = [p.select(*columns, pl.lit(s, pl.String).alias(label), *consts) for s, p in parts if p.height]
        if not frames:
            empty = pl.DataFrame(schema={c: self.schema(table)[c] for c in columns})
            return empty.with_columns(pl.lit(None, pl.String).alias(label), *consts).lazy()
        return pl.concat(frames, rechunk=False).lazy()

    def schema(self, table: str) -> dict[str, pl.DataType]:
        return {"ts": TS, "exchange": self.venue_type, "seq": pl.Int64(), "trade_id": pl.Int64(), "side": SIDES,
                **{c: pl.Float64() for c in ("bid", "bsize", "ask", "asize", "price", "amount")}}


class PolarsMarket(Market):
    """The market capability of the Polars adapter (no M-W or M-SE: nothing is on disk)."""

    market: MarketStore | None = None

    def load_market(self) -> int:
        """Read the 20 days of quotes and trades into a :class:`MarketStore`, a day at a time:
        each day's part files with the held columns, sorted by (sym, the table's order), split
        per instrument; each instrument's days are then concatenated into one contiguous frame."""
        days = self.params.load_days()  # type: ignore[attr-defined]
        dataset = self.dataset  # type: ignore[attr-defined]
        files = {t: [str(f) for f in dataset.files(t, days)] for t in HELD}
        names = pl.concat([pl.scan_parquet(f).select("exchange").unique() for f in files.values() if f]).unique()
        # byte order of the names (Python's str order is code-point order, the same as UTF-8's)
        venues = pl.Enum(sorted(names.collect()["exchange"].to_list()))
        store = MarketStore(venues, dataset.instruments())
        for table, held in HELD.items():
            chunks: dict[str, list[pl.DataFrame]] = defaultdict(list)
            for day in days:
                day_files = [str(f) for f in dataset.files(table, [day])]
                if not day_files:
                    continue
                frame = (pl.scan_parquet(day_files).select("sym", *held)
                         .with_columns(pl.col("exchange").cast(venues),
                                       *([pl.col("side").cast(SIDES)] if "side" in held else []))
                         .sort("sym", *ORDER[table]).collect())
                for (sym,), part in frame.partition_by("sym", as_dict=True, include_key=False).items():
                    chunks[str(sym)].append(part)
            for sym in sorted(chunks):
                frame = pl.concat(chunks.pop(sym), rechunk=True)
                if not frame["ts"].is_sorted():  # a day's file held rows of another day: order the whole month
                    frame = frame.sort(*ORDER[table])
                store.add(table, sym, frame)
        self.market = store
        return store.rows()

    def market_settings(self) -> dict[str, Any]:
        return {
            "threads": pl.thread_pool_size(),
            "layout": "one frame per (table, instrument), every venue, quotes by (ts, exchange, seq), trades by "
                      "(ts, exchange, trade_id); time ranges by search_sorted",
            "held": {t: list(c) for t, c in HELD.items()},
        }
