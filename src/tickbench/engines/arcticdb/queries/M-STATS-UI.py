"""QueryBuilder: each request's window as date_range per symbol of its basket (read_batch); Polars: the statistics."""

# Open/close are first/last of the slices, which are in (ts, exchange, trade_id) order.
from collections import defaultdict
from typing import Any

import pandas as pd
import polars as pl

from tickbench.engines.arcticdb.market import MarketStore


def query(store: MarketStore, params: dict[str, Any]) -> pl.DataFrame:
    baskets: dict[int, list[str]] = defaultdict(list)
    for req, sym in zip(params["ui_pair_req"], params["ui_pair_sym"], strict=True):
        baskets[req].append(sym)
    parts = [store.frame("trades", baskets[req], (pd.Timestamp(start), pd.Timestamp(end) - pd.Timedelta(1, "ns")),
                         columns=["price", "amount"], schema={"price": pl.Float64, "amount": pl.Float64})
             .with_columns(req=pl.lit(req, pl.Int64))
             for req, start, end in zip(params["ui_req"], params["ui_from"], params["ui_to"], strict=True)]
    price, amount = pl.col("price"), pl.col("amount")
    return pl.concat(parts, how="diagonal_relaxed").group_by("req", "sym").agg(
        n=pl.len().cast(pl.Int64), volume=amount.sum(), vwap=(price * amount).sum() / amount.sum(),
        open=price.first(), high=price.max(), low=price.min(), close=price.last(), sd=price.std(ddof=1),
    ).sort("req", "sym")
