from typing import Any

import polars as pl


def query(tables: dict[str, pl.LazyFrame], params: dict[str, Any]) -> pl.LazyFrame:
    return (
        tables["trades"]
        .filter(pl.col("ts") >= params["day_start"], pl.col("ts") < params["day_end"])
        .group_by_dynamic("ts", every="1m", group_by=["sym", "side"])
        .agg(volume=pl.col("amount").sum())
        .select("sym", "side", bucket="ts", volume="volume")
        .sort("sym", "side", "bucket")
    )
