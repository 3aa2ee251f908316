# Each instrument's block of each day's frame sliced to the span by binary search; no scan of the
# other instruments.
from typing import Any

import polars as pl

from tickbench.engines.polars.market import MarketStore, named


def query(store: MarketStore, params: dict[str, Any]) -> pl.LazyFrame:
    quotes = store.basket("quotes", params["b_syms"], params["w_start"], params["w_end"], ["bid"])
    return named(quotes.group_by("sym").agg(max_bid=pl.col("bid").max()).sort("sym"))
