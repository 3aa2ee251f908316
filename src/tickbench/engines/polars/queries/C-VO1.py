from typing import Any

import polars as pl


def query(tables: dict[str, pl.LazyFrame], params: dict[str, Any]) -> pl.LazyFrame:
    mid = (pl.col("a1price") + pl.col("b1price")) / 2
    returns = (
        tables["book"]
        .filter(pl.col("sym") == params["sym"], pl.col("ts") >= params["day_start"], pl.col("ts") < params["day_end"])
        .group_by_dynamic("ts", every="5m")
        .agg(close=mid.last())
        .select("ts", ret=pl.col("close").log().diff())
        .slice(1)
    )
    return (
        returns.group_by_dynamic("ts", every="1h")
        .agg(vol=pl.col("ret").std(ddof=1), n=pl.len())
        .filter(pl.col("n") >= 2)
        .select(hour="ts", vol="vol")
    )
