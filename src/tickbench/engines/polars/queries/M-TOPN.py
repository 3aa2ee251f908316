from typing import Any

import polars as pl

from tickbench.engines.polars.market import MarketStore

TOP_N = 20


def query(store: MarketStore, params: dict[str, Any]) -> pl.LazyFrame:
    trades = store.basket("trades", store.syms("trades"), params["d_start"], params["d_end"], ["price", "amount"])
    top = (trades.group_by("sym").agg(notional=(pl.col("price") * pl.col("amount")).sum())
           .sort(["notional", "sym"], descending=[True, False]).head(TOP_N))
    return top.select(pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("rank"), "sym", "notional")
