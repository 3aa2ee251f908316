"""The deterministic market-data generator (SPEC §1.2).

One call of :func:`generate_partition` builds the trades and book snapshots of one
(day, exchange, instrument) partition from named random streams only, so a partition can be
regenerated alone, in any process, with identical bytes.

The model, in brief:

* A *common* log-price path per (day, instrument) on a 100 ms grid: a random walk whose
  volatility follows a per-minute log-volatility AR(1) process (volatility clustering), bridged
  so that the day ends at the next day's open (the daily opens are a random walk of their own,
  mean-reverting for a stablecoin).
* Each venue sees that path with its own feed latency and a small quote offset, so on the
  multi-exchange day the venues lead and lag each other and the NBBO changes venue.
* Event arrivals are a doubly stochastic Poisson process: a per-second intensity with an
  intraday profile, tied to the volatility and multiplied by gamma noise (bursty arrivals).
* Snapshots carry 20 levels per side: the spread and the gaps between levels are geometric in
  ticks, sizes are log-normal, grow with depth and cluster on round lots; each level keeps its
  gap and size from one snapshot to the next unless a draw changes it (a book changes a few
  levels at a time, which is what makes real books compress).
* A trade is a fill of a taker order against the book at that moment: a ``buy`` takes the ask
  levels from the best one outwards, a ``sell`` the bid levels, all fills of one order share
  its timestamp, and trade ids increase with time.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tickbench.data.schema import TRADES_SCHEMA
from tickbench.datasets.paper.calendar import EPOCH, VENUE_LATENCY_MS, VENUE_OFFSET_BP, Instrument, Partition, all_days
from tickbench.datasets.paper.schema import BOOK_SCHEMA, LEVELS, book_level_columns
from tickbench.rng import stream

GRID_NS = 100_000_000  # the common price path's step
GRID_POINTS = 86_400 * 1_000_000_000 // GRID_NS
US = 1_000  # ns per µs: the generator stamps events at microsecond resolution, as feeds do
SECONDS = 86_400
TRADE_ID_STRIDE = 100_000_000  # trade ids of day d start at d * stride: unique across days


@dataclass(frozen=True)
class PartitionData:
    """The generated rows of one partition, as Arrow tables in SPEC column order."""

    trades: pa.Table
    book: pa.Table


def daily_opens(seed: int, inst: Instrument) -> dict[dt.date, float]:
    """The open price of every calendar day (and the day after the last) for ``inst``."""
    days = all_days()
    first, last = days[0], days[-1] + dt.timedelta(days=1)
    n = (last - first).days + 1
    rng = stream(seed, "daily", inst.sym)
    z = rng.standard_normal(n)
    logp = np.empty(n)
    logp[0] = np.log(inst.start_price)
    for i in range(1, n):
        if inst.mean_reverting:
            logp[i] = logp[0] + 0.5 * (logp[i - 1] - logp[0]) + inst.daily_vol * z[i]
        else:
            logp[i] = logp[i - 1] + inst.daily_vol * z[i] - 0.5 * inst.daily_vol**2
    return {first + dt.timedelta(days=i): float(np.exp(logp[i])) for i in range(n)}


def _log_vol(seed: int, day: dt.date, sym: str) -> np.ndarray:
    """Per-minute log-volatility (AR(1), stationary sd about 0.5) shared by all venues."""
    rng = stream(seed, "logvol", day.isoformat(), sym)
    phi, eta = 0.97, 0.12
    eps = rng.standard_normal(1440) * eta
    h = np.empty(1440)
    h[0] = eps[0] / np.sqrt(1 - phi**2)
    for i in range(1, 1440):
        h[i] = phi * h[i - 1] + eps[i]
    return h


def common_path(seed: int, day: dt.date, inst: Instrument) -> np.ndarray:
    """Log mid price of ``inst`` on ``day`` at each 100 ms grid point (shared by venues)."""
    opens = daily_opens(seed, inst)
    start = np.log(opens[day])
    end = np.log(opens[day + dt.timedelta(days=1)])
    h = _log_vol(seed, day, inst.sym)
    sd_min = np.exp(h)
    sd_min *= inst.daily_vol / np.sqrt(np.sum(sd_min**2))  # the day's variance is daily_vol²
    per_step = np.repeat(sd_min / np.sqrt(GRID_POINTS / 1440), GRID_POINTS // 1440)
    rng = stream(seed, "path", day.isoformat(), inst.sym)
    walk = np.cumsum(rng.standard_normal(GRID_POINTS) * per_step)
    frac = np.arange(1, GRID_POINTS + 1) / GRID_POINTS
    return start + walk - frac * (walk[-1] - (end - start))


def _intensity(seed: int, day: dt.date, sym: str) -> np.ndarray:
    """Relative event intensity per second of the day (shared shape across venues)."""
    h = _log_vol(seed, day, sym)
    minute = np.arange(1440)
    # Crypto's intraday profile: busiest around the US equity open (13:30–16:00 UTC).
    profile = 1.0 + 0.8 * np.exp(-0.5 * ((minute - 870) / 120.0) ** 2) + 0.3 * np.exp(
        -0.5 * ((minute - 480) / 90.0) ** 2
    )
    per_min = profile * np.exp(1.2 * h)
    rng = stream(seed, "activity", day.isoformat(), sym)
    burst = rng.gamma(0.4, 1 / 0.4, SECONDS)
    lam = np.repeat(per_min, 60) * burst
    return lam / lam.sum()


def _arrivals(rng: np.random.Generator, lam: np.ndarray, n: int, start_us: int = 0) -> np.ndarray:
    """About ``n`` sorted event times (µs of the day, at or after ``start_us``)."""
    counts = rng.poisson(lam * n)
    secs = np.repeat(np.arange(SECONDS, dtype=np.int64), counts)
    t = np.sort(secs * 1_000_000 + rng.integers(0, 1_000_000, secs.size))
    return t[t >= start_us]


def _unique_increasing(t: np.ndarray) -> np.ndarray:
    """Nudge equal sorted values forward by the least amount so they strictly increase."""
    k = np.arange(t.size, dtype=np.int64)
    return np.maximum.accumulate(t - k) + k


def _persist(rng: np.random.Generator, fresh: np.ndarray, p_change: np.ndarray) -> np.ndarray:
    """Keep each column's previous value unless a draw (probability ``p_change``) renews it.

    ``fresh`` is ``(rows, columns)``, as drawn; the result is ``(columns, rows)``: one
    contiguous array per column (the layout the table is built from, and in which carrying a
    value down a column runs along memory)."""
    n, width = fresh.shape
    change = rng.random(fresh.shape) < p_change
    change[0] = True
    # The flat index (into ``fresh``) of the row that last renewed each cell, carried along.
    itype = np.int32 if n * width < 2**31 else np.intp  # half the memory traffic where it fits
    idx = np.multiply(np.ascontiguousarray(change.T), np.arange(0, n * width, width, dtype=itype), dtype=itype)
    np.maximum.accumulate(idx, axis=1, out=idx)
    idx += np.arange(width, dtype=itype)[:, None]
    return np.take(fresh.ravel(), idx)


def _round_sizes(rng: np.random.Generator, x: np.ndarray, inst: Instrument) -> np.ndarray:
    """Sizes on the lot grid, a share of them snapped to round lots (1, 2, 5 × 10^k).

    A 2-D ``x`` is ``(columns, rows)`` (from :func:`_persist`); its draws are made in
    ``(rows, columns)`` order, as for every other array of the partition."""
    lots = 10**inst.lot_decimals
    snap = (np.ascontiguousarray((rng.random(x.shape[::-1]) < 0.3).T) if x.ndim == 2
            else rng.random(x.shape) < 0.3)
    # Only the snapped sizes need their round lot (the same arithmetic as on every size), and
    # integer positions gather and scatter them several times faster than a boolean mask.
    sel = np.flatnonzero(snap)
    xs = np.take(x.ravel(), sel)
    mag = 10.0 ** np.floor(np.log10(np.maximum(xs, 1e-12)))
    mant = xs / mag
    # 1, 2, 5 or 10 as mant is below 1.5, 3.5, 7.5 or not (a chain of np.where, in arithmetic).
    nice = 10.0 - 5.0 * (mant < 7.5) - 3.0 * (mant < 3.5) - 1.0 * (mant < 1.5)
    snapped = np.array(x, order="C", copy=True)
    np.put(snapped, sel, nice * mag)
    snapped *= lots
    np.rint(snapped, out=snapped)
    np.maximum(snapped, 1, out=snapped)  # whole lots, at least one: exact as float64
    snapped /= lots
    return snapped


def _float_column(values: np.ndarray) -> pa.Array:
    """A float64 column over ``values``' memory (``pa.array`` copies a row of a 2-D array value
    by value, at about 40 ns each)."""
    values = np.ascontiguousarray(values, np.float64)
    return pa.Array.from_buffers(pa.float64(), values.size, [None, pa.py_buffer(values)])


def _repeat(value: str, n: int) -> pa.Array:
    """A string column holding ``value`` ``n`` times, built from its buffers."""
    data = value.encode()
    if n * len(data) >= 2**31:  # beyond 32-bit offsets
        offsets = np.arange(n + 1, dtype=np.int64) * len(data)
        big = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data * n))
        return big.cast(pa.string())
    offsets32 = np.arange(n + 1, dtype=np.int32) * np.int32(len(data))
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets32), pa.py_buffer(data * n))


def generate_partition(seed: int, part: Partition, inst: Instrument) -> PartitionData:
    """Generate the trades and book snapshots of one partition."""
    key = (part.day.isoformat(), part.exchange, part.sym)
    rng = stream(seed, "partition", *key)
    day0 = (part.day - EPOCH).days * 86_400 * 1_000_000  # µs
    lam = _intensity(seed, part.day, part.sym)
    path = common_path(seed, part.day, inst)
    ticks_per_unit = 10**inst.price_decimals

    # Book snapshot times, unique per (exchange, sym).
    bt = _unique_increasing(_arrivals(rng, lam, part.book))
    bt = bt[bt < SECONDS * 1_000_000]
    n = bt.size

    # Mid seen by this venue: the common path delayed by its latency, shifted by its offset.
    lat_us = int(VENUE_LATENCY_MS.get(part.exchange, 0.0) * 1000)
    grid = np.clip((bt - lat_us) * US // GRID_NS, 0, GRID_POINTS - 1)
    offset = VENUE_OFFSET_BP.get(part.exchange, 0.0) * 1e-4
    mid = np.exp(path[grid] + offset) * ticks_per_unit
    vol = np.exp(0.5 * _log_vol(seed, part.day, part.sym))[np.minimum(bt // 60_000_000, 1439)]

    spread = rng.geometric(1 / (1 + inst.spread_ticks * vol))  # ticks, at least one
    spread = _persist(rng, spread[:, None], np.array([0.5]))[0]
    b1 = np.floor(mid - spread / 2).astype(np.int64)
    a1 = b1 + spread

    # Levels are (level, snapshot): one contiguous array per column of the table.
    gap_p = 1 / (1 + inst.gap_ticks)
    bid = np.empty((LEVELS, n), np.int64)
    ask = np.empty((LEVELS, n), np.int64)
    bid[0], ask[0] = b1, a1
    np.cumsum(_persist(rng, rng.geometric(gap_p, (n, LEVELS - 1)), np.array([0.25])), axis=0, out=bid[1:])
    np.cumsum(_persist(rng, rng.geometric(gap_p, (n, LEVELS - 1)), np.array([0.25])), axis=0, out=ask[1:])
    np.subtract(b1, bid[1:], out=bid[1:])
    np.add(a1, ask[1:], out=ask[1:])
    if bid.min() <= 0:
        raise ValueError(f"partition {part.name}: a bid level fell to zero; widen the tick grid")

    depth = inst.size_scale * (1 + 0.25 * np.arange(LEVELS))
    p_size = np.linspace(0.6, 0.2, LEVELS)
    sizes = []
    for _side in ("bid", "ask"):
        fresh = rng.lognormal(0, 1.0, (n, LEVELS))
        fresh *= depth
        sizes.append(_round_sizes(rng, _persist(rng, fresh, p_size), inst))
    bsz, asz = sizes

    book_ts = (day0 + bt) * US
    cols: dict[str, np.ndarray] = {}
    for i in range(LEVELS):
        cols[f"b{i + 1}price"] = bid[i] / ticks_per_unit
        cols[f"b{i + 1}size"] = bsz[i]
        cols[f"a{i + 1}price"] = ask[i] / ticks_per_unit
        cols[f"a{i + 1}size"] = asz[i]
    book = pa.Table.from_arrays(
        [
            pa.array(book_ts, pa.int64()).view(BOOK_SCHEMA.field("ts").type),  # a cast is 100x slower
            _repeat(part.exchange, n),
            _repeat(part.sym, n),
        ]
        + [_float_column(cols[c]) for c in book_level_columns()],
        schema=BOOK_SCHEMA,
    )

    # Taker orders: arrive after the first snapshot, never at a snapshot's exact time.
    fills_mean = 1.35
    ot = _arrivals(rng, lam, max(1, round(part.trades / fills_mean)), start_us=int(bt[0]) + 1)
    # A same-µs tie with a snapshot would leave it ambiguous which came first: nudge by 1 µs.
    for _ in range(8):
        # np.isin(ot, bt) for the sorted, unique snapshot times, by binary search.
        at = np.minimum(np.searchsorted(bt, ot), n - 1)
        clash = bt[at] == ot
        if not clash.any():
            break
        ot = np.sort(ot + clash)
    ot = ot[ot < SECONDS * 1_000_000]
    prevailing = np.searchsorted(bt, ot, side="right") - 1
    m = ot.size
    buy = rng.random(m) < 0.5
    nfill = np.minimum(rng.geometric(1 / fills_mean, m), 5)
    order = np.repeat(np.arange(m), nfill)
    level = np.arange(order.size) - np.repeat(np.cumsum(nfill) - nfill, nfill)
    snap = prevailing[order]
    is_buy = buy[order]
    price_ticks = np.where(is_buy, ask[level, snap], bid[level, snap])
    raw = (rng.pareto(1.4, order.size) + 0.05) * inst.size_scale * 0.3
    amount = _round_sizes(rng, raw, inst)
    k = order.size
    trade_ts = (day0 + ot[order]) * US
    trade_id = (part.day - EPOCH).days * TRADE_ID_STRIDE + np.arange(k, dtype=np.int64)
    trades = pa.Table.from_arrays(
        [
            pa.array(trade_ts, pa.int64()).view(TRADES_SCHEMA.field("ts").type),
            _repeat(part.exchange, k),
            _repeat(part.sym, k),
            pc.if_else(pa.array(is_buy), "buy", "sell"),
            pa.array(price_ticks / ticks_per_unit),
            pa.array(amount),
            pa.array(trade_id),
        ],
        schema=TRADES_SCHEMA,
    )
    return PartitionData(trades=trades, book=book)
