# Each instrument's D slice is in (ts, exchange, trade_id) order, so open/close are first/last.
from typing import Any

import polars as pl

from tickbench.engines.polars.market import MarketStore, named


def query(store: MarketStore, params: dict[str, Any]) -> pl.LazyFrame:
    trades = store.basket("trades", params["b50_syms"], params["d_start"], params["d_end"], ["ts", "price", "amount"])
    price = pl.col("price")
    return named(trades.group_by("sym", bucket=pl.col("ts").dt.truncate("5m"))
            .agg(open=price.first(), high=price.max(), low=price.min(), close=price.last(),
                 volume=pl.col("amount").sum())
            .sort("sym", "bucket"))
