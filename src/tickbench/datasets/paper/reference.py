"""The reference implementation: one plain function per query id, the ground truth.

Written straight from SPEC §2.1 over the Parquet files with Polars and numpy, with integer
bucket arithmetic (``floor(ts / w) * w`` on nanoseconds) and no engine-specific shortcut. Every
engine's answer is compared with these.

Out of core, so the runner's memory does not grow with the dataset: every query is a lazy scan
of only the partitions (days, instrument) and columns it reads, collected with Polars' streaming
engine, which aggregates batch by batch; an as-of lookup (O-T, O-NBBO) keeps only the rows at or
before its probe time, pushed down to the Parquet reader, and of those the latest.

Answer types: bucket and time columns are ``Datetime("ns", "UTC")``, numbers ``Float64``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import polars as pl

from tickbench.data.dataset import Dataset
from tickbench.datasets.paper.params import QueryParams

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


def _scan(ds: Dataset, table: str, days: list[str], cols: list[str], sym: str | None = None) -> pl.LazyFrame:
    """The columns ``cols`` of ``table`` over ``days`` (and instrument ``sym``), lazily."""
    return ds.scan(table, days, sym).select(cols)


def _collect(lf: pl.LazyFrame) -> pl.DataFrame:
    """Run ``lf`` on the streaming engine: batch by batch, not the whole input in memory."""
    return lf.collect(engine="streaming")


def _volume(ds: Dataset, days: list[str], width: int, name: str) -> pl.DataFrame:
    t = _scan(ds, "trades", days, ["ts", "sym", "side", "amount"])
    return _collect(
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
    t = _scan(ds, "trades", p.days("day"), ["ts", "price", "amount"], p.symbol)
    return _collect(
        t.group_by(bucket(MINUTE).alias("bucket"))
        .agg(vwap=(pl.col("price") * pl.col("amount")).sum() / pl.col("amount").sum())
        .sort("bucket")
    )


def _latest_at(lf: pl.LazyFrame, t: int) -> dict[str, Any] | None:
    """The row of ``lf`` with the greatest ts at or before ``t`` (ts as integer ns), or None."""
    # top_k keeps one row per batch, where a sort would hold every row at or before t
    at = _collect(lf.filter(pl.col("ts") <= pl.lit(t).cast(TS)).top_k(1, by="ts"))
    return at.with_columns(pl.col("ts").cast(pl.Int64)).row(0, named=True) if at.height else None


@reference("O-T")
def o_t(ds: Dataset, p: QueryParams) -> pl.DataFrame:
    cols = ["b1price", "b1size", "a1price", "a1size"]
    month = p.days("month")
    rows = []
    for t in p.ot_times:
        # A day's partition holds that day's rows: later days cannot hold rows at or before t,
        # and a row of t's own day at or before t is later than any earlier day's. So t's day
        # is read first, and the earlier days only when it has no such row.
        days = [d for d in month if day_ns(d) <= t]
        r = _latest_at(_scan(ds, "book", days[-1:], ["ts", *cols], p.symbol), t)
        if r is None and len(days) > 1:
            r = _latest_at(_scan(ds, "book", days[:-1], ["ts", *cols], p.symbol), t)
        if r is not None:
            rows.append({"t": t, **r})
    out = pl.DataFrame(rows, schema={"t": pl.Int64, "ts": pl.Int64, **{c: pl.Float64 for c in cols}})
    return out.with_columns(pl.col("t").cast(TS), pl.col("ts").cast(TS)).sort("t")


def day_ns(iso: str) -> int:
    """Nanoseconds since the epoch at the start of UTC day ``iso``."""
    return (dt.date.fromisoformat(iso) - dt.date(1970, 1, 1)).days * 24 * HOUR


def _max_bid(ds: Dataset, days: list[str]) -> pl.DataFrame:
    b = _scan(ds, "book", days, ["sym", "b1price"])
    return _collect(b.group_by("sym").agg(max_bid=pl.col("b1price").max()).sort("sym"))


@reference("O-B1")
def o_b1(ds: Dataset, p: QueryParams) -> pl.DataFrame:
    return _max_bid(ds, p.days("week"))


@reference("O-B2")
def o_b2(ds: Dataset, p: QueryParams) -> pl.DataFrame:
    return _max_bid(ds, p.days("month"))


@reference("O-S")
def o_s(ds: Dataset, p: QueryParams) -> pl.DataFrame:
    asks = [f"a{i}price" for i in range(1, 21)]
    bids = [f"b{i}price" for i in range(1, 21)]
    b = _scan(ds, "book", p.days("day"), ["ts", *asks, *bids], p.symbol)
    return _collect(b.select("ts", spread=pl.min_horizontal(asks) - pl.max_horizontal(bids)).sort("ts"))


def _depth(ds: Dataset, days: list[str], sym: str, width: int, levels: int) -> pl.DataFrame:
    bids = [f"b{i}size" for i in range(1, levels + 1)]
    asks = [f"a{i}size" for i in range(1, levels + 1)]
    b = _scan(ds, "book", days, ["ts", *bids, *asks], sym)
    bid, ask = pl.sum_horizontal(bids), pl.sum_horizontal(asks)
    return _collect(
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
    days = p.days("multi_day")
    venues = sorted({r["exchange"] for r in ds.manifest.partitions
                     if r["table"] == "book" and r["day"] in days and r["sym"] == p.symbol})
    rows = []
    for t in p.nbbo_times:
        bids, asks = [], []
        for venue in venues:
            lf = pl.scan_parquet(ds.files("book", days, p.symbol, venue)).select("ts", "b1price", "a1price")
            r = _latest_at(lf, t)
            if r is not None:
                bids.append(r["b1price"])
                asks.append(r["a1price"])
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
    b = _scan(ds, "book", days, ["ts", "b1price", "a1price"], sym)
    return _collect(b.group_by(bucket(width).alias("bucket")).agg(
        close=((pl.col("a1price") + pl.col("b1price")) / 2).sort_by("ts").last()
    ))


def _trade_closes(ds: Dataset, days: list[str], sym: str, width: int) -> pl.DataFrame:
    t = _scan(ds, "trades", days, ["ts", "trade_id", "price"], sym)
    # ties on ts: the highest trade_id is last
    return _collect(t.group_by(bucket(width).alias("bucket")).agg(
        close=pl.col("price").sort_by("ts", "trade_id").last()))


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
