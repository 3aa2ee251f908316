from typing import Any

import polars as pl


def query(tables: dict[str, pl.LazyFrame], params: dict[str, Any]) -> pl.LazyFrame:
    mid = (pl.col("a1price") + pl.col("b1price")) / 2
    return (
        tables["book"]
        .filter(pl.col("sym") == params["sym"], pl.col("ts") >= params["day_start"], pl.col("ts") < params["day_end"])
        .group_by_dynamic("ts", every="5m")
        .agg(close=mid.last())
        .select(bucket="ts", ret=pl.col("close").log().diff())
        .slice(1)
    )
