"""QueryBuilder: date_range + bid*bsize, resample 1D sums per symbol of the block (read_batch); Polars: the ratio."""

from typing import Any

import polars as pl
from arcticdb import QueryBuilder

from tickbench.engines.arcticdb.market import MarketStore


def query(store: MarketStore, params: dict[str, Any]) -> pl.DataFrame:
    q = QueryBuilder()
    q["notional"] = q["bid"] * q["bsize"]
    q = q.resample("1D").agg({"notional": "sum", "bsize": "sum"})  # a day with no quote has no bucket
    quotes = store.frame("quotes", params["vwab_syms"], params["vwab_range"], query=q,
                         schema={"ts": pl.Datetime("ns"), "notional": pl.Float64, "bsize": pl.Float64})
    vwab = pl.col("notional") / pl.col("bsize")
    return quotes.select("sym", day=pl.col("ts").dt.date(), vwab=vwab).sort("sym", "day")
