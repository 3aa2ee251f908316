"""QueryBuilder: date_range + groupby(exchange) max(bid) per symbol of B (read_batch); Polars: max over venues."""

from typing import Any

import polars as pl
from arcticdb import QueryBuilder

from tickbench.engines.arcticdb.market import MarketStore


def query(store: MarketStore, params: dict[str, Any]) -> pl.DataFrame:
    per_venue = QueryBuilder().groupby("exchange").agg({"bid": "max"})
    quotes = store.frame("quotes", params["b_syms"], params["d_range"], query=per_venue, schema={"bid": pl.Float64})
    return quotes.group_by("sym").agg(max_bid=pl.col("bid").max()).sort("sym")
