"""QueryBuilder: date_range of D + resample 5min first/max/min/last/sum per symbol of B50; Polars: stacking."""

# first/last follow the stored (ts, exchange, trade_id) order; buckets are epoch-aligned, as SPEC's.
from typing import Any

import polars as pl
from arcticdb import QueryBuilder

from tickbench.engines.arcticdb.market import MarketStore


def query(store: MarketStore, params: dict[str, Any]) -> pl.DataFrame:
    q = QueryBuilder().resample("5min").agg({"open": ("price", "first"), "high": ("price", "max"),
                                            "low": ("price", "min"), "close": ("price", "last"),
                                            "volume": ("amount", "sum")})
    bars = store.frame("trades", params["b50_syms"], params["d_range"], query=q,
                       schema={"ts": pl.Datetime("ns"), **dict.fromkeys(("open", "high", "low", "close", "volume"),
                                                                          pl.Float64)})
    return bars.select("sym", pl.col("ts").dt.replace_time_zone("UTC").alias("bucket"),
                       "open", "high", "low", "close", "volume").sort("sym", "bucket")
