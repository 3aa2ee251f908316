"""QueryBuilder: date_range of M + resample 5min sum(amount) per symbol of B; Polars: buckets across days."""

# The 5-minute buckets are epoch-aligned and the session opens on a 5-minute boundary (14:30
# generated; an import's open is floored to one): a resample bucket's minutes since its day's
# open is the SPEC's bucket. The open and M's day count are bindings.
from typing import Any

import polars as pl
from arcticdb import QueryBuilder

from tickbench.engines.arcticdb.market import MarketStore


def query(store: MarketStore, params: dict[str, Any]) -> pl.DataFrame:
    q = QueryBuilder().resample("5min").agg({"amount": "sum"})  # a bucket with no trade has no row
    trades = store.frame("trades", params["b_syms"], params["m_range"], query=q,
                         schema={"ts": pl.Datetime("ns"), "amount": pl.Float64})
    ts = pl.col("ts")
    minute = ts.dt.hour().cast(pl.Int64) * 60 + ts.dt.minute().cast(pl.Int64) - params["session_open_minute"]
    avg = pl.col("amount").sum() / params["m_day_count"]
    return trades.group_by("sym", bucket=minute // 5 * 5).agg(avg_volume=avg).sort("sym", "bucket")
