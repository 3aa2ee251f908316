from typing import Any

import polars as pl


def query(tables: dict[str, pl.LazyFrame], params: dict[str, Any]) -> pl.LazyFrame:
    return (
        tables["book"]
        .filter(pl.col("sym") == params["sym"], pl.col("ts") >= params["week_start"], pl.col("ts") < params["week_end"])
        .group_by_dynamic("ts", every="1m")
        .agg(bid_depth=pl.col("b1size").mean(), ask_depth=pl.col("a1size").mean())
        .select(bucket="ts", bid_depth="bid_depth", ask_depth="ask_depth")
    )
