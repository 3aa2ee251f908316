"""The market dataset's generator (SPEC §1.3 with the rules of §1.2).

One call of :func:`generate_unit` builds the quotes and trades of one (trading day, instrument)
unit, on every venue that quotes it, from named random streams only: a unit regenerates alone,
in any process, with identical values. :func:`generate_block` concatenates the units of a fixed
range of ranks (one part file per table and day).

The model, in brief:

* Daily: an instrument's opens and closes are a random walk (with overnight gaps and a mild pull
  back to its first price), its daily volatility and activity share an AR(1) log factor
  (volatility clustering across days, busier days more volatile).
* Intraday: a per-minute log-volatility AR(1) over the 390 minutes of the session times a U-shaped
  profile (busy open and close) gives the arrival intensity; events arrive in clusters (a Poisson
  number of bursts placed by that intensity, each a geometric number of events a few hundred µs to
  ms apart), so arrivals are bursty at every scale.
* The common price: a jump at each *innovation* (its own clustered arrivals), sized by the
  minute's volatility and bridged so the session ends at the day's close. The common inside
  (bid, ask) is the price floored to the tick grid with a spread in ticks that scales with the
  instrument's typical spread in basis points, widens with volatility and persists between
  innovations.
* Venues: every venue that quotes the instrument reacts to each innovation after its own feed
  latency (plus jitter), quoting the common inside widened by its own offset (0 ticks with the
  venue's at-inside probability, else a few ticks back), so which venues set the consolidated
  best bid and offer changes all the time, and a fast venue's new quote can lock or cross a slow
  venue's stale one for the latency between them; a venue never crosses itself. Between
  reactions, venues send size-only updates at their share of the flow.
* Trades: clustered arrivals, one side per burst; a buy is routed to a venue whose ask is the
  best across venues at that moment and executes at that venue's prevailing ask (a sell at the
  best bid), now and then swept across every venue at that price at once; a fill may print as
  several trades at one timestamp. Sizes are whole shares: quotes in round lots of 100 with a few
  mixed lots, trades a mix of odd lots and round lots, heavy-tailed and clustered on round
  numbers.

Timestamps are whole microseconds (as feeds stamp them), so quotes of several venues, and of one
venue, can share a timestamp; ``seq`` orders one venue's quotes. ``seq`` and ``trade_id`` of day d
start at (days since the epoch) * 10**8 and count up per (exchange, sym) in time order.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa

from tickbench.datasets.market import calendar as mc
from tickbench.datasets.market.schema import MARKET_SCHEMAS
from tickbench.rng import stream

US = 1_000  # ns per µs
SESSION_US = mc.SESSION_S * 1_000_000
MINUTES = mc.SESSION_S // 60
EDGES_US = np.arange(MINUTES + 1, dtype=np.float64) * 60e6
ID_STRIDE = 100_000_000  # seq and trade_id of day d start at (days since the epoch) * stride
EXCHANGES = tuple(sorted(mc.VENUES))  # exchange codes in byte order (the tie order of SPEC §2.3)
EXCHANGE_CODE = {v: i for i, v in enumerate(EXCHANGES)}
BIG = np.int64(1) << np.int64(40)  # > the µs of a day: (venue, time) as one sortable integer
PRICE_SHARE = 0.5  # share of quote updates that react to a move of the common price
FILLS_PER_ORDER = 1.88  # trades per order: sweeps across venues and several prints per fill
TAKEN_OUT = 0.99  # chance that a quote the price runs over is taken out at once (else it locks for a moment)


@dataclass(frozen=True)
class Unit:
    """The rows of one instrument-day as columns, in output order: quotes by (ts, exchange, seq),
    trades by (ts, exchange, trade_id); exchanges as codes into :data:`EXCHANGES`."""

    q_ts: np.ndarray
    q_ex: np.ndarray
    q_bid: np.ndarray
    q_ask: np.ndarray
    q_bsize: np.ndarray
    q_asize: np.ndarray
    q_seq: np.ndarray
    t_ts: np.ndarray
    t_ex: np.ndarray
    t_buy: np.ndarray
    t_price: np.ndarray
    t_amount: np.ndarray
    t_id: np.ndarray


def _ar1(rng: np.random.Generator, n: int, phi: float, sd: float) -> np.ndarray:
    """A stationary AR(1) series of ``n`` values with coefficient ``phi`` and marginal sd ``sd``,
    computed without a Python loop: h_t = phi**t * (h_0 + sum_k phi**-k e_k)."""
    e = rng.standard_normal(n) * (sd * math.sqrt(1 - phi * phi))
    e[0] = e[0] / math.sqrt(1 - phi * phi)
    k = np.arange(n, dtype=np.float64)
    return phi**k * np.cumsum(e * phi**-k)


@dataclass(frozen=True)
class DailyPath:
    """Per trading day: open and close price, volatility factor and activity factor."""

    opens: np.ndarray
    closes: np.ndarray
    vol: np.ndarray
    act: np.ndarray


def _price_bounds(inst: mc.Instrument) -> tuple[float, float]:
    """Log-price bounds that keep an instrument on its tick grid's side of 1 and above zero."""
    if inst.tick < 0.01:
        return math.log(0.01), math.log(0.97)
    return math.log(1.05), math.log(50_000.0)


@lru_cache(maxsize=4_096)
def daily_path(seed: int, inst: mc.Instrument) -> DailyPath:
    """The instrument's 20 trading days (cached: every unit of the instrument needs them)."""
    rng = stream(seed, "market", "daily", inst.rank)
    n = len(mc.DAYS)
    g = _ar1(rng, n, 0.8, 0.25)
    e, z, zg = rng.standard_normal((3, n))
    vol = np.exp(g - 0.5 * 0.25**2)
    act = np.exp(0.6 * g + 0.25 * e - 0.5 * (0.15**2 + 0.25**2))
    lo, hi = _price_bounds(inst)
    base = math.log(inst.start_price)
    opens, closes = np.empty(n), np.empty(n)
    logo = base
    for d in range(n):  # 20 steps
        ret = inst.daily_vol * vol[d] * z[d] - 0.05 * (logo - base)
        logc = min(max(logo + ret, lo), hi)
        opens[d], closes[d] = logo, logc
        logo = min(max(logc + 0.3 * inst.daily_vol * zg[d], lo), hi)
    return DailyPath(np.exp(opens), np.exp(closes), vol, act)


def _arrivals(rng: np.random.Generator, cdf: np.ndarray, expected: float, cluster_mean: float,
              gap_us: float) -> tuple[np.ndarray, np.ndarray]:
    """Sorted event times (µs since the session open) of about ``expected`` events in bursts,
    and each event's burst number: a Poisson number of bursts placed by the intensity whose
    cumulative share per minute edge is ``cdf``, each a geometric number of events (mean
    ``cluster_mean``) with exponential gaps (mean ``gap_us``)."""
    bursts = int(rng.poisson(expected / cluster_mean))
    if bursts == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    centre = np.interp(rng.random(bursts), cdf, EDGES_US)
    sizes = rng.geometric(1 / cluster_mean, bursts)
    gaps = rng.exponential(gap_us, int(sizes.sum()))
    gaps[np.cumsum(sizes) - sizes] = 0.0  # a burst starts at its centre
    within = np.cumsum(gaps)
    within -= np.repeat(within[np.cumsum(sizes) - sizes], sizes)
    t = (np.repeat(centre, sizes) + within).astype(np.int64)
    burst = np.repeat(np.arange(bursts, dtype=np.int64), sizes)
    keep = t < SESSION_US
    t, burst = t[keep], burst[keep]
    order = np.argsort(t, kind="stable")
    return t[order], burst[order]


def _round_number(k: np.ndarray) -> np.ndarray:
    """True where a positive integer is 1, 2, 3 or 5 times a power of ten (numbers traders use)."""
    mag = 10 ** np.floor(np.log10(k)).astype(np.int64)
    return np.isin(k // mag, (1, 2, 3, 5)) & (k % mag == 0)


@lru_cache(maxsize=256)
def _size_table(kind: str, lots: int) -> tuple[np.ndarray, np.ndarray]:
    """Sizes in shares and their cumulative probabilities (a discrete, heavy-tailed law with extra
    weight on round numbers), for quotes or trades of an instrument whose typical quote is ``lots``
    round lots of 100 shares."""
    k = np.arange(1, 5_001, dtype=np.int64)
    bonus = np.where(_round_number(k), 4.0, 1.0)
    if kind == "quote":
        values = 100.0 * k
        weight = (k / lots + 0.4) ** -2.4 * bonus
    else:  # about a third odd lots (1-99 shares), the rest round lots
        odd = np.arange(1, 100, dtype=np.int64)
        odd_w = odd**-0.6 * np.where(np.isin(odd, (10, 20, 25, 50)), 4.0, 1.0)
        lot_w = (k[:2_000] / (0.5 * lots) + 0.3) ** -2.3 * bonus[:2_000]
        values = np.concatenate((odd, 100 * k[:2_000])).astype(np.float64)
        weight = np.concatenate((0.35 * odd_w / odd_w.sum(), 0.65 * lot_w / lot_w.sum()))
    cdf = np.cumsum(weight)
    return values, cdf / cdf[-1]


def _sizes(rng: np.random.Generator, kind: str, n: int, lots: float) -> np.ndarray:
    values, cdf = _size_table(kind, round(lots))
    return values[np.minimum(np.searchsorted(cdf, rng.random(n), side="right"), values.size - 1)]


def _quote_sizes(rng: np.random.Generator, n: int, lots: float) -> np.ndarray:
    """Displayed sizes in shares: round lots of 100, heavy-tailed, often a round number of lots,
    sometimes a mixed lot."""
    size = _sizes(rng, "quote", n, lots)
    mixed = np.flatnonzero(rng.random(n) < 0.08)
    size[mixed] += rng.integers(1, 100, mixed.size)
    return size


def generate_unit(seed: int, day_index: int, inst: mc.Instrument, scale: float) -> Unit:
    """The quotes and trades of instrument ``inst`` on trading day ``day_index``."""
    day = mc.DAYS[day_index]
    rng = stream(seed, "market", day.isoformat(), inst.rank)
    path = daily_path(seed, inst)
    venues = inst.venues
    nv = len(venues)
    per_tick = round(1 / inst.tick)
    quotes = mc.quotes_per_day(inst.rank, scale) * path.act[day_index]
    trades = mc.trades_per_day(inst.rank, scale) * path.act[day_index]

    # Intraday intensity: a U-shaped profile times the minute's volatility factor.
    h = _ar1(rng, MINUTES, 0.95, 0.45)
    m = np.arange(MINUTES)
    lam = (1 + 1.5 * np.exp(-m / 25.0) + 1.0 * np.exp(-(MINUTES - 1 - m) / 20.0)) * np.exp(h)
    cdf = np.concatenate(([0.0], np.cumsum(lam)))
    cdf /= cdf[-1]

    # The common price: one jump per innovation, bridged from the day's open to its close.
    tau, _ = _arrivals(rng, cdf, PRICE_SHARE * quotes / nv, 2.0, 2_000.0)
    k = tau.size
    minute = np.minimum(tau // 60_000_000, MINUTES - 1)
    w = np.exp(h[minute])
    z = rng.standard_normal(k)
    logo, logc = math.log(path.opens[day_index]), math.log(path.closes[day_index])
    logp = np.full(k + 1, logo)
    if k:
        w *= inst.daily_vol * path.vol[day_index] / math.sqrt(float(np.sum(w * w)))
        walk = np.cumsum(z * w)
        share = np.cumsum(w * w) / float(np.sum(w * w))
        logp[1:] = logo + walk - share * (walk[-1] - (logc - logo))
    lo, hi = _price_bounds(inst)
    np.minimum(np.maximum(logp, lo, out=logp), hi, out=logp)
    state_t = np.concatenate(([0], tau))  # state 0: the opening quote at 14:30:00
    state_min = np.concatenate(([0], minute))

    # The common inside, in ticks: the spread persists between innovations unless renewed.
    base = max(1.0, inst.spread_bp * 1e-4 * path.opens[day_index] / inst.tick)
    fresh = np.maximum(1, np.rint(base * np.exp(0.3 * h[state_min] + 0.35 * rng.standard_normal(k + 1))))
    renew = rng.random(k + 1) < 0.4
    renew[0] = True
    spread = fresh[np.maximum.accumulate(np.where(renew, np.arange(k + 1), 0))].astype(np.int64)
    mid = np.exp(logp) * per_tick
    inside_bid = np.maximum(np.floor(mid - spread / 2).astype(np.int64), 1)
    inside_ask = inside_bid + spread

    # Each venue reacts to every innovation after its latency, at the inside or some ticks back.
    at_inside = np.array([mc.PRIMARY_AT_INSIDE if v == inst.primary else mc.VENUE_AT_INSIDE[v] for v in venues])
    back = np.maximum(1, np.rint(spread / 2)).astype(np.int64)
    offsets = []
    for _side in ("bid", "ask"):
        away = rng.random((nv, k + 1)) >= at_inside[:, None]
        offsets.append(np.where(away, rng.geometric(0.6, (nv, k + 1)) * back[None, :], 0))
    vbid = np.maximum(inside_bid[None, :] - offsets[0], 1)
    vask = inside_ask[None, :] + offsets[1]
    lat = np.array([mc.VENUE_LATENCY_US[v] for v in venues], np.int64)
    jitter = np.rint(rng.exponential(30.0, (nv, k + 1))).astype(np.int64)
    react_t = np.maximum.accumulate(state_t[None, :] + lat[:, None] + jitter, axis=1)
    # A quote the move runs over (its ask at or below the new inside bid, or its bid at or above
    # the new ask) is usually taken out at the move, by the trading that moves the price: only that
    # side moves, to the venue's new level, before the venue's own reaction arrives. The others
    # stay until their reaction: the consolidated book locks or crosses now and then, for the
    # latency between venues. Events per venue: (take-out of innovation i, reaction to i), in time.
    up = vask[:, :-1] <= inside_bid[None, 1:]
    down = vbid[:, :-1] >= inside_ask[None, 1:]
    taken = (up | down) & (rng.random((nv, k)) < TAKEN_OUT)
    ev_t = np.empty((nv, k + 1, 2), np.int64)
    ev_bid = np.empty((nv, k + 1, 2), np.int64)
    ev_ask = np.empty((nv, k + 1, 2), np.int64)
    ev_t[:, :, 1], ev_bid[:, :, 1], ev_ask[:, :, 1] = react_t, vbid, vask
    ev_t[:, 1:, 0] = np.maximum(state_t[None, 1:], react_t[:, :-1])
    ev_bid[:, 1:, 0] = np.where(down, vbid[:, 1:], vbid[:, :-1])
    ev_ask[:, 1:, 0] = np.where(down, vask[:, :-1], vask[:, 1:])
    events = np.ones((nv, k + 1, 2), bool)
    events[:, 0, 0] = False
    events[:, 1:, 0] = taken
    valid = events.ravel()
    react_v = np.repeat(np.arange(nv, dtype=np.int64), 2 * (k + 1))[valid]
    react_tt = ev_t.ravel()[valid]
    react_bid, react_ask = ev_bid.ravel()[valid], ev_ask.ravel()[valid]
    react_key = react_v * BIG + react_tt  # sorted: each venue's events in time

    # Size-only updates between reactions, at each venue's share of the flow (take-outs count
    # among them: at a low scale, moves are larger and run over more quotes).
    share = np.array([mc.VENUE_SHARE[v] * (mc.PRIMARY_BOOST if v == inst.primary else 1.0) for v in venues])
    share /= share.sum()
    su_t, _ = _arrivals(rng, cdf, max(0.0, (1 - PRICE_SHARE) * quotes - float(taken.sum())), 3.0, 300.0)
    su_v = np.minimum(np.searchsorted(np.cumsum(share), rng.random(su_t.size), side="right"), nv - 1)
    pos = np.searchsorted(react_key, su_v * BIG + su_t, side="right") - 1
    ok = (pos >= 0) & (react_v[np.maximum(pos, 0)] == su_v)  # none before the venue's opening quote
    su_t, su_v, pos = su_t[ok], su_v[ok], pos[ok]

    qv = np.concatenate((react_v, su_v))
    qt = np.concatenate((react_tt, su_t))
    qbid = np.concatenate((react_bid, react_bid[pos]))
    qask = np.concatenate((react_ask, react_ask[pos]))
    order = np.argsort(qv * BIG + qt, kind="stable")  # per venue in time, a reaction first
    qv, qt, qbid, qask = qv[order], qt[order], qbid[order], qask[order]
    keep = qt < SESSION_US
    qv, qt, qbid, qask = qv[keep], qt[keep], qbid[keep], qask[keep]
    n = qt.size
    counts = np.bincount(qv, minlength=nv)
    if counts.max(initial=0) >= ID_STRIDE:
        raise ValueError(f"{inst.sym} {day}: {counts.max()} quotes on one venue exceed the seq stride")
    start = np.cumsum(counts) - counts
    day_base = (day - mc.EPOCH).days * ID_STRIDE
    qseq = day_base + np.arange(n, dtype=np.int64) - start[qv]
    bsize = _quote_sizes(rng, n, inst.lots)
    asize = _quote_sizes(rng, n, inst.lots)
    code = np.array([EXCHANGE_CODE[v] for v in venues], np.int64)
    out = np.argsort(qt * 8 + code[qv], kind="stable")  # (ts, exchange, seq)

    # Trades: at a venue with the best price across venues, at its prevailing quote.
    tt, burst = _arrivals(rng, cdf, trades / FILLS_PER_ORDER, 2.5, 800.0)
    first = tt >= react_t[:, 0].max()  # every venue has quoted
    tt, burst = tt[first], burst[first]
    nb = int(burst.max(initial=-1)) + 1
    buy = (rng.random(nb) < 0.5)[burst]
    tpos = np.searchsorted(react_key, np.arange(nv, dtype=np.int64)[:, None] * BIG + tt[None, :], side="right") - 1
    vask, vbid = react_ask[tpos], react_bid[tpos]
    best = np.where(buy, vask.min(axis=0, initial=np.iinfo(np.int64).max),
                    vbid.max(axis=0, initial=0))
    cand = np.where(buy[None, :], vask, vbid) == best[None, :]
    weight = np.cumsum(cand * share[:, None], axis=0)
    pick = np.argmax(weight > rng.random(tt.size) * weight[-1], axis=0) if tt.size else np.empty(0, np.int64)
    sweep = rng.random(tt.size) < 0.1
    fills = cand & (sweep[None, :] | (np.arange(nv)[:, None] == pick[None, :]))
    fj, fv = np.nonzero(fills.T)
    nfill = np.minimum(rng.geometric(0.7, fj.size), 4)
    fj, fv = np.repeat(fj, nfill), np.repeat(fv, nfill)
    t_ticks = np.where(buy[fj], vask[fv, fj], vbid[fv, fj])
    t_ts = tt[fj]
    t_amount = _sizes(rng, "trade", fj.size, inst.lots)
    torder = np.argsort(fv * BIG + t_ts, kind="stable")
    fv, fj, t_ts, t_ticks, t_amount = fv[torder], fj[torder], t_ts[torder], t_ticks[torder], t_amount[torder]
    tcounts = np.bincount(fv, minlength=nv)
    tid = day_base + np.arange(fv.size, dtype=np.int64) - (np.cumsum(tcounts) - tcounts)[fv]
    tout = np.argsort(t_ts * 8 + code[fv], kind="stable")

    day0 = mc.day_ns(day) + mc.SESSION_OPEN_S * mc.NS_PER_S
    return Unit(
        q_ts=day0 + qt[out] * US, q_ex=code[qv[out]], q_bid=qbid[out] / per_tick, q_ask=qask[out] / per_tick,
        q_bsize=bsize[out], q_asize=asize[out], q_seq=qseq[out],
        t_ts=day0 + t_ts[tout] * US, t_ex=code[fv[tout]], t_buy=buy[fj[tout]], t_price=t_ticks[tout] / per_tick,
        t_amount=t_amount[tout], t_id=tid[tout],
    )


def _strings(values: tuple[str, ...] | list[str], codes: np.ndarray) -> pa.Array:
    """A string column of ``values[codes]`` (through a dictionary, without a Python object per row)."""
    return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(values, pa.string())).cast(pa.string())


def _ts(ns: np.ndarray) -> pa.Array:
    return pa.array(ns, pa.int64()).view(MARKET_SCHEMAS["quotes"].field("ts").type)


@dataclass(frozen=True)
class BlockData:
    quotes: pa.Table
    trades: pa.Table


def generate_block(seed: int, block: mc.Block, universe: int, scale: float) -> BlockData:
    """The quotes and trades of one part file: the block's instruments by rank (so by ``sym``),
    each instrument's rows in time order."""
    day_index = mc.DAYS.index(block.day)
    units = [generate_unit(seed, day_index, mc.instrument(seed, r, universe), scale)
             for r in range(block.first_rank, block.last_rank + 1)]
    syms = [mc.sym_of(r, universe) for r in range(block.first_rank, block.last_rank + 1)]

    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(u, name) for u in units])

    qn = np.array([u.q_ts.size for u in units])
    tn = np.array([u.t_ts.size for u in units])
    unit_codes = np.arange(len(units), dtype=np.int64)
    quotes = pa.Table.from_arrays([
        _ts(cat("q_ts")), _strings(EXCHANGES, cat("q_ex")), _strings(syms, np.repeat(unit_codes, qn)),
        pa.array(cat("q_bid")), pa.array(cat("q_ask")), pa.array(cat("q_bsize")), pa.array(cat("q_asize")),
        pa.array(cat("q_seq")),
    ], schema=MARKET_SCHEMAS["quotes"])
    trades = pa.Table.from_arrays([
        _ts(cat("t_ts")), _strings(EXCHANGES, cat("t_ex")), _strings(syms, np.repeat(unit_codes, tn)),
        _strings(("sell", "buy"), cat("t_buy").astype(np.int64)),
        pa.array(cat("t_price")), pa.array(cat("t_amount")), pa.array(cat("t_id")),
    ], schema=MARKET_SCHEMAS["trades"])
    return BlockData(quotes, trades)


def block_of(day: dt.date, rank: int, universe: int) -> mc.Block:
    """The block (part file) that holds ``rank`` on ``day``."""
    for i, (lo, hi) in enumerate(mc.rank_blocks(universe)):
        if lo <= rank <= hi:
            return mc.Block(day, i, lo, hi)
    raise KeyError(rank)
