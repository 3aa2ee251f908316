# D's frame of trades, one grouped pass; each instrument's rows are in (ts, exchange, trade_id) order,
# so open/close are first/last.
from typing import Any

import polars as pl

from tickbench.engines.polars.market import MarketStore, named


def query(store: MarketStore, params: dict[str, Any]) -> pl.LazyFrame:
    trades = store.market("trades", params["d_start"], params["d_end"], ["price", "amount"])
    price, amount = pl.col("price"), pl.col("amount")
    return named(trades.group_by("sym").agg(
        n=pl.len().cast(pl.Int64), volume=amount.sum(), vwap=(price * amount).sum() / amount.sum(),
        open=price.first(), high=price.max(), low=price.min(), close=price.last(), sd=price.std(ddof=1),
    ).sort("sym"))
