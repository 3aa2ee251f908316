"""QueryBuilder: date_range of M + resample 5min sum(amount) per symbol of B; Polars: buckets across days."""

# The 5-minute buckets are epoch-aligned and the session opens at 14:30, on a 5-minute boundary:
# a resample bucket's minutes since its day's 14:30 is the SPEC's bucket.
from typing import Any

import polars as pl
from arcticdb import QueryBuilder

from tickbench.engines.arcticdb.market import MarketStore

DAYS = 20  # SPEC §2.3: the curve averages over M's 20 trading days
OPEN_MIN = 14 * 60 + 30


def query(store: MarketStore, params: dict[str, Any]) -> pl.DataFrame:
    q = QueryBuilder().resample("5min").agg({"amount": "sum"})  # a bucket with no trade has no row
    trades = store.frame("trades", params["b_syms"], params["m_range"], query=q,
                         schema={"ts": pl.Datetime("ns"), "amount": pl.Float64})
    ts = pl.col("ts")
    minute = ts.dt.hour().cast(pl.Int64) * 60 + ts.dt.minute().cast(pl.Int64) - OPEN_MIN
    return (trades.group_by("sym", bucket=minute // 5 * 5).agg(avg_volume=pl.col("amount").sum() / DAYS)
            .sort("sym", "bucket"))
