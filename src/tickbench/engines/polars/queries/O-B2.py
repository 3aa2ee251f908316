from typing import Any

import polars as pl


def query(tables: dict[str, pl.LazyFrame], params: dict[str, Any]) -> pl.LazyFrame:
    return (
        tables["book"]
        .filter(pl.col("ts") >= params["month_start"], pl.col("ts") < params["month_end"])
        .group_by("sym")
        .agg(max_bid=pl.col("b1price").max())
        .sort("sym")
    )
