from typing import Any

import polars as pl

from tickbench.engines.polars.adapter import Store


def query(store: Store, params: dict[str, Any]) -> pl.LazyFrame:
    return (
        store.range("trades", params["day_start"], params["day_end"], params["sym"])
        .group_by_dynamic("ts", every="1m")
        .agg(vwap=(pl.col("price") * pl.col("amount")).sum() / pl.col("amount").sum())
        .select(bucket="ts", vwap="vwap")
    )
