"""QueryBuilder: date_range of D for every instrument's trades symbol (read_batch); Polars: the statistics."""

# QueryBuilder's groupby has no first/last or stddev; the D slices are in (ts, exchange, trade_id)
# order, so open/close are first/last.
from typing import Any

import polars as pl

from tickbench.engines.arcticdb.market import MarketStore


def query(store: MarketStore, params: dict[str, Any]) -> pl.DataFrame:
    trades = store.frame("trades", store.syms("trades"), params["d_range"], columns=["price", "amount"],
                         schema={"price": pl.Float64, "amount": pl.Float64})
    price, amount = pl.col("price"), pl.col("amount")
    return trades.group_by("sym").agg(
        n=pl.len().cast(pl.Int64), volume=amount.sum(), vwap=(price * amount).sum() / amount.sum(),
        open=price.first(), high=price.max(), low=price.min(), close=price.last(), sd=price.std(ddof=1),
    ).sort("sym")
