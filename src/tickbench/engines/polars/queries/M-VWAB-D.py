from typing import Any

import polars as pl

from tickbench.engines.polars.market import MarketStore, named


def query(store: MarketStore, params: dict[str, Any]) -> pl.LazyFrame:
    quotes = store.basket("quotes", params["b_syms"], params["d_start"], params["d_end"], ["bid", "bsize"])
    vwab = (pl.col("bid") * pl.col("bsize")).sum() / pl.col("bsize").sum()
    return named(quotes.group_by("sym").agg(vwab=vwab).sort("sym"))
