"""QueryBuilder: date_range of D per symbol of B (read_batch); Polars: the consolidated book step by step."""

# The steps need every quote in (ts, exchange, seq) order, the stored order: per venue its latest
# bid and ask carried forward within the instrument, then max/min across the venues' columns.
from typing import Any

import polars as pl

from tickbench.engines.arcticdb.market import MarketStore


def query(store: MarketStore, params: dict[str, Any]) -> pl.DataFrame:
    quotes = store.frame("quotes", params["b_syms"], params["d_range"], columns=["exchange", "bid", "ask"],
                         schema={"exchange": pl.String, "bid": pl.Float64, "ask": pl.Float64})
    venues = sorted(quotes["exchange"].unique().to_list())
    held = [pl.when(pl.col("exchange") == v).then(pl.col(side)).forward_fill().over("sym").alias(f"{side}:{v}")
            for v in venues for side in ("bid", "ask")]
    book = quotes.with_columns(held).select(
        "sym", nbb=pl.max_horizontal([f"bid:{v}" for v in venues]), nbo=pl.min_horizontal([f"ask:{v}" for v in venues]))
    moved = (pl.col("nbb").ne_missing(pl.col("nbb").shift(1).over("sym"))
             | pl.col("nbo").ne_missing(pl.col("nbo").shift(1).over("sym")))
    return book.with_columns(changed=moved).group_by("sym").agg(
        n_changes=pl.col("changed").sum().cast(pl.Int64),
        mean_spread=(pl.col("nbo") - pl.col("nbb")).filter(pl.col("changed")).mean(),
        n_locked=(pl.col("changed") & (pl.col("nbo") <= pl.col("nbb"))).sum().cast(pl.Int64),
    ).sort("sym")
