from typing import Any

import polars as pl


def query(tables: dict[str, pl.LazyFrame], params: dict[str, Any]) -> pl.LazyFrame:
    return (
        tables["trades"]
        .filter(pl.col("sym") == params["sym"], pl.col("ts") >= params["day_start"], pl.col("ts") < params["day_end"])
        .group_by_dynamic("ts", every="1m")
        .agg(vwap=(pl.col("price") * pl.col("amount")).sum() / pl.col("amount").sum())
        .select(bucket="ts", vwap="vwap")
    )
