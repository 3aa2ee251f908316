"""QueryBuilder: D of the trades' cross-section symbol, price*amount, groupby(sym) sum; Polars: top 20."""

from typing import Any

import polars as pl
from arcticdb import QueryBuilder

from tickbench.engines.arcticdb.market import MarketStore

TOP_N = 20


def query(store: MarketStore, params: dict[str, Any]) -> pl.DataFrame:
    q = QueryBuilder()
    q["notional"] = q["price"] * q["amount"]
    q = q.groupby("sym").agg({"notional": "sum"})
    per_sym = store.market("trades", params["d_range"], query=q)
    if per_sym.is_empty():
        per_sym = pl.DataFrame(schema={"sym": pl.String, "notional": pl.Float64})
    top = per_sym.select("sym", "notional").sort(["notional", "sym"], descending=[True, False]).head(TOP_N)
    return top.select(pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("rank"), "sym", "notional")
