from typing import Any

import polars as pl


def query(tables: dict[str, pl.LazyFrame], params: dict[str, Any]) -> pl.LazyFrame:
    return (
        tables["trades"]
        .filter(pl.col("ts") >= params["month_start"], pl.col("ts") < params["month_end"])
        .group_by_dynamic("ts", every="1d", group_by=["sym", "side"])
        .agg(volume=pl.col("amount").sum())
        .select("sym", "side", day="ts", volume="volume")
        .sort("sym", "side", "day")
    )
