"""The reference implementation: one plain function per query id, the ground truth.

Written straight from SPEC §2.1 over the Parquet files with Polars and numpy, with integer
bucket arithmetic (``floor(ts / w) * w`` on nanoseconds) and no engine-specific shortcut. Every
engine's answer is compared with these.

Answer types: bucket and time columns are ``Datetime("ns", "UTC")``, numbers ``Float64``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

from tickbench.data.dataset import Dataset
from tickbench.params import QueryParams

MINUTE = 60 * 1_000_000_000
HOUR = 60 * MINUTE
TS = pl.Datetime("ns", "UTC")

Reference = Callable[[Dataset, QueryParams], pl.DataFrame]
REFERENCES: dict[str, Reference] = {}


def reference(qid: str) -> Callable[[Reference], Reference]:
    def register(fn: Reference) -> Reference:
        REFERENCES[qid] = fn
        return fn

    return register


def bucket(width_ns: int, col: str = "ts") -> pl.Expr:
    """Start of the width-``width_ns`` bucket holding ``col``: floor(ts / w) * w, in UTC."""
    return ((pl.col(col).cast(pl.Int64) // width_ns) * width_ns).cast(TS)


def _trades(ds: Dataset, days: list[str], sym: str | None = None) -> pl.DataFrame:
    return ds.scan("trades", days, sym).collect()


def _book(ds: Dataset, days: list[str], sym: str | None = None, cols: list[str] | None = None) -> pl.DataFrame:
    lf = ds.scan("book", days, sym)
    if cols is not None:
        lf = lf.select(["ts", "exchange", "sym", *cols])
    return lf.collect()


def _volume(ds: Dataset, days: list[str], width: int, name: str) -> pl.DataFrame:
    t = _trades(ds, days)
    return (
        t.group_by("sym", "side", bucket(width).alias(name))
        .agg(volume=pl.col("amount").sum())
        .sort("sym", "side", name)
    )


@reference("T-V1")
def t_v1(ds: Dataset, p: QueryParams) -> pl.DataFrame:
    return _volume(ds, p.days("day"), MINUTE, "bucket")


@reference("T-V2")
def t_v2(ds: Dataset, p: QueryParams) -> pl.DataFrame:
    return _volume(ds, p.days("month"), 24 * HOUR, "day")


@reference("T-VWAP")
def t_vwap(ds: Dataset, p: QueryParams) -> pl.DataFrame:
    t = _trades(ds, p.days("day"), p.symbol)
    return (
        t.group_by(bucket(MINUTE).alias("bucket"))
        .agg(vwap=(pl.col("price") * pl.col("amount")).sum() / pl.col("amount").sum())
        .sort("bucket")
    )


def _latest_before(ts: np.ndarray, t: int) -> int:
    """Index of the last element of sorted ``ts`` that is <= t, or -1."""
    return int(np.searchsorted(ts, t, side="right")) - 1


@reference("O-T")
def o_t(ds: Dataset, p: QueryParams) -> pl.DataFrame:
    b = _book(ds, p.days("month"), p.symbol, ["b1price", "b1size", "a1price", "a1size"]).sort("ts")
    ts = b["ts"].cast(pl.Int64).to_numpy()
    rows = []
    for t in p.ot_times:
        i = _latest_before(ts, t)
        if i >= 0:
            r = b.row(i, named=True)
            rows.append({"t": t, "ts": int(ts[i]), **{k: r[k] for k in ("b1price", "b1size", "a1price", "a1size")}})
    out = pl.DataFrame(rows, schema={"t": pl.Int64, "ts": pl.Int64, "b1price": pl.Float64,
                                     "b1size": pl.Float64, "a1price": pl.Float64, "a1size": pl.Float64})
    return out.with_columns(pl.col("t").cast(TS), pl.col("ts").cast(TS)).sort("t")


def _max_bid(ds: Dataset, days: list[str]) -> pl.DataFrame:
    b = _book(ds, days, cols=["b1price"])
    return b.group_by("sym").agg(max_bid=pl.col("b1price").max()).sort("sym")


@reference("O-B1")
def o_b1(ds: Dataset, p: QueryParams) -> pl.DataFrame:
    return _max_bid(ds, p.days("week"))


@reference("O-B2")
def o_b2(ds: Dataset, p: QueryParams) -> pl.DataFrame:
    return _max_bid(ds, p.days("month"))


@reference("O-S")
def o_s(ds: Dataset, p: QueryParams) -> pl.DataFrame:
    b = _book(ds, p.days("day"), p.symbol)
    asks = [f"a{i}price" for i in range(1, 21)]
    bids = [f"b{i}price" for i in range(1, 21)]
    return b.select("ts", spread=pl.min_horizontal(asks) - pl.max_horizontal(bids)).sort("ts")


def _depth(ds: Dataset, days: list[str], sym: str, width: int, levels: int) -> pl.DataFrame:
    b = _book(ds, days, sym)
    bid = pl.sum_horizontal([f"b{i}size" for i in range(1, levels + 1)])
    ask = pl.sum_horizontal([f"a{i}size" for i in range(1, levels + 1)])
    return (
        b.group_by(bucket(width).alias("bucket"))
        .agg(bid_depth=bid.mean(), ask_depth=ask.mean())
        .sort("bucket")
    )


@reference("O-V1")
def o_v1(ds: Dataset, p: QueryParams) -> pl.DataFrame:
    return _depth(ds, p.days("week"), p.symbol, MINUTE, 1)


@reference("O-V2")
def o_v2(ds: Dataset, p: QueryParams) -> pl.DataFrame:
    return _depth(ds, p.days("month"), p.symbol, HOUR, 5)


@reference("O-NBBO")
def o_nbbo(ds: Dataset, p: QueryParams) -> pl.DataFrame:
    b = _book(ds, p.days("multi_day"), p.symbol, ["b1price", "a1price"])
    venues = []
    for _, g in b.sort("ts").group_by("exchange", maintain_order=True):
        venues.append((g["ts"].cast(pl.Int64).to_numpy(), g["b1price"].to_numpy(), g["a1price"].to_numpy()))
    rows = []
    for t in p.nbbo_times:
        bids, asks = [], []
        for ts, bid, ask in venues:
            i = _latest_before(ts, t)
            if i >= 0:
                bids.append(bid[i])
                asks.append(ask[i])
        if bids:
            rows.append({"t": t, "nbb": float(max(bids)), "nbo": float(min(asks))})
    out = pl.DataFrame(rows, schema={"t": pl.Int64, "nbb": pl.Float64, "nbo": pl.Float64})
    return out.with_columns(pl.col("t").cast(TS)).sort("t")


def _returns(closes: pl.DataFrame, name: str) -> pl.DataFrame:
    """``ln(close) - ln(previous non-empty bucket's close)``, the first bucket dropped."""
    return (
        closes.sort(name)
        .with_columns(ret=pl.col("close").log() - pl.col("close").log().shift(1))
        .slice(1)
        .select(name, "ret")
    )


def _mid_closes(ds: Dataset, days: list[str], sym: str, width: int) -> pl.DataFrame:
    b = _book(ds, days, sym, ["b1price", "a1price"]).sort("ts")
    return b.group_by(bucket(width).alias("bucket")).agg(
        close=((pl.col("a1price") + pl.col("b1price")) / 2).last()
    )


def _trade_closes(ds: Dataset, days: list[str], sym: str, width: int) -> pl.DataFrame:
    t = _trades(ds, days, sym).sort("ts", "trade_id")  # ties on ts: the highest trade_id is last
    return t.group_by(bucket(width).alias("bucket")).agg(close=pl.col("price").last())


def _volatility(returns: pl.DataFrame, width: int, name: str) -> pl.DataFrame:
    """Sample standard deviation of the returns per ``width`` bucket; fewer than two: no row."""
    return (
        returns.group_by(bucket(width, "bucket").alias(name))
        .agg(vol=pl.col("ret").std(ddof=1), n=pl.len())
        .filter(pl.col("n") >= 2)
        .select(name, "vol")
        .sort(name)
    )


@reference("C-R")
def c_r(ds: Dataset, p: QueryParams) -> pl.DataFrame:
    return _returns(_mid_closes(ds, p.days("day"), p.symbol, 5 * MINUTE), "bucket")


@reference("C-VT")
def c_vt(ds: Dataset, p: QueryParams) -> pl.DataFrame:
    ret = _returns(_trade_closes(ds, p.days("day"), p.symbol, 5 * MINUTE), "bucket")
    return _volatility(ret, HOUR, "hour")


@reference("C-VO1")
def c_vo1(ds: Dataset, p: QueryParams) -> pl.DataFrame:
    ret = _returns(_mid_closes(ds, p.days("day"), p.symbol, 5 * MINUTE), "bucket")
    return _volatility(ret, HOUR, "hour")


@reference("C-VO2")
def c_vo2(ds: Dataset, p: QueryParams) -> pl.DataFrame:
    ret = _returns(_mid_closes(ds, p.days("week"), p.symbol, HOUR), "bucket")
    return _volatility(ret, 4 * HOUR, "bucket4h")


def answer(qid: str, ds: Dataset, p: QueryParams) -> pl.DataFrame:
    """The reference answer of query ``qid``."""
    return REFERENCES[qid](ds, p)


class ReferenceAnswers:
    """Reference answers, computed once per run and shared by every engine."""

    def __init__(self, ds: Dataset, params: QueryParams) -> None:
        self.ds = ds
        self.params = params
        self.cache: dict[str, pl.DataFrame] = {}

    def __getitem__(self, qid: str) -> pl.DataFrame:
        if qid not in self.cache:
            self.cache[qid] = answer(qid, self.ds, self.params)
        return self.cache[qid]
