"""ArcticDB: one read of D from the trades' cross-section symbol (sym, price, amount); Polars: the statistics."""

# The cross-section symbol holds every instrument's trades in time order, ties in (exchange,
# trade_id) order, so each instrument's rows are in the SPEC's order and open/close are
# first/last; QueryBuilder's groupby has no first/last or stddev.
from typing import Any

import polars as pl

from tickbench.engines.arcticdb.market import MarketStore


def query(store: MarketStore, params: dict[str, Any]) -> pl.DataFrame:
    trades = store.market("trades", params["d_range"], columns=["sym", "price", "amount"])
    price, amount = pl.col("price"), pl.col("amount")
    return trades.group_by("sym").agg(
        n=pl.len().cast(pl.Int64), volume=amount.sum(), vwap=(price * amount).sum() / amount.sum(),
        open=price.first(), high=price.max(), low=price.min(), close=price.last(), sd=price.std(ddof=1),
    ).sort("sym")
