from typing import Any

import polars as pl

from tickbench.engines.polars.adapter import Store


def query(store: Store, params: dict[str, Any]) -> pl.LazyFrame:
    return (
        store.range("book", params["week_start"], params["week_end"], params["sym"])
        .group_by_dynamic("ts", every="1m")
        .agg(bid_depth=pl.col("b1size").mean(), ask_depth=pl.col("a1size").mean())
        .select(bucket="ts", bid_depth="bid_depth", ask_depth="ask_depth")
    )
