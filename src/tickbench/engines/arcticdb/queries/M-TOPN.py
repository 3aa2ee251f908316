"""QueryBuilder: date_range of D + price*amount, groupby(exchange) sum per trades symbol; Polars: top 20."""

from typing import Any

import polars as pl
from arcticdb import QueryBuilder

from tickbench.engines.arcticdb.market import MarketStore

TOP_N = 20


def query(store: MarketStore, params: dict[str, Any]) -> pl.DataFrame:
    q = QueryBuilder()
    q["notional"] = q["price"] * q["amount"]
    q = q.groupby("exchange").agg({"notional": "sum"})
    per_venue = store.frame("trades", store.syms("trades"), params["d_range"], query=q, schema={"notional": pl.Float64})
    top = (per_venue.group_by("sym").agg(pl.col("notional").sum())
           .sort(["notional", "sym"], descending=[True, False]).head(TOP_N))
    return top.select(pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("rank"), "sym", "notional")
