"""QueryBuilder: date_range + bid*bsize, groupby(exchange) sums per symbol of B (read_batch); Polars: the ratio."""

from typing import Any

import polars as pl
from arcticdb import QueryBuilder

from tickbench.engines.arcticdb.market import MarketStore


def query(store: MarketStore, params: dict[str, Any]) -> pl.DataFrame:
    q = QueryBuilder()
    q["notional"] = q["bid"] * q["bsize"]
    q = q.groupby("exchange").agg({"notional": "sum", "bsize": "sum"})
    quotes = store.frame("quotes", params["b_syms"], params["d_range"], query=q,
                         schema={"notional": pl.Float64, "bsize": pl.Float64})
    return quotes.group_by("sym").agg(vwab=pl.col("notional").sum() / pl.col("bsize").sum()).sort("sym")
