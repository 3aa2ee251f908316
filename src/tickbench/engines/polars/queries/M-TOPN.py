# D's frame of trades, one grouped pass (sym is an Enum in byte order: ties sort as names do).
from typing import Any

import polars as pl

from tickbench.engines.polars.market import MarketStore, named

TOP_N = 20


def query(store: MarketStore, params: dict[str, Any]) -> pl.LazyFrame:
    trades = store.market("trades", params["d_start"], params["d_end"], ["price", "amount"])
    top = (trades.group_by("sym").agg(notional=(pl.col("price") * pl.col("amount")).sum())
           .sort(["notional", "sym"], descending=[True, False]).head(TOP_N))
    return named(top.select(pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("rank"), "sym", "notional"))
