# The consolidated book after each quote: per venue, its latest bid and ask carried forward within the
# instrument (forward_fill over sym), then max/min across the venues' columns; a step changes the
# book when (nbb, nbo) differs from the previous step's (the first step of an instrument does).
from typing import Any

import polars as pl

from tickbench.engines.polars.market import MarketStore, named


def query(store: MarketStore, params: dict[str, Any]) -> pl.LazyFrame:
    quotes = store.basket("quotes", params["b_syms"], params["d_start"], params["d_end"], ["exchange", "bid", "ask"])
    venues = store.venue_type.categories.to_list()
    held = [pl.when(pl.col("exchange") == v).then(pl.col(side)).forward_fill().over("sym").alias(f"{side}:{v}")
            for v in venues for side in ("bid", "ask")]
    book = quotes.with_columns(held).select(
        "sym", nbb=pl.max_horizontal([f"bid:{v}" for v in venues]), nbo=pl.min_horizontal([f"ask:{v}" for v in venues]))
    moved = (pl.col("nbb").ne_missing(pl.col("nbb").shift(1).over("sym"))
             | pl.col("nbo").ne_missing(pl.col("nbo").shift(1).over("sym")))
    spread = pl.col("nbo") - pl.col("nbb")
    return named(book.with_columns(changed=moved).group_by("sym").agg(
        n_changes=pl.col("changed").sum().cast(pl.Int64),
        mean_spread=spread.filter(pl.col("changed")).mean(),
        n_locked=(pl.col("changed") & (pl.col("nbo") <= pl.col("nbb"))).sum().cast(pl.Int64),
    ).sort("sym"))
