from typing import Any

import polars as pl

from tickbench.engines.polars.market import MarketStore, named


def query(store: MarketStore, params: dict[str, Any]) -> pl.LazyFrame:
    quotes = store.basket("quotes", params["vwab_syms"], params["vwab_start"], params["vwab_end"],
                          ["ts", "bid", "bsize"])
    vwab = (pl.col("bid") * pl.col("bsize")).sum() / pl.col("bsize").sum()
    return named(quotes.group_by("sym", day=pl.col("ts").dt.date()).agg(vwab=vwab).sort("sym", "day"))
