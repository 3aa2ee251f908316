from typing import Any

import polars as pl

from tickbench.engines.polars.adapter import Store


def query(store: Store, params: dict[str, Any]) -> pl.LazyFrame:
    mid = (pl.col("a1price") + pl.col("b1price")) / 2
    return (
        store.range("book", params["day_start"], params["day_end"], params["sym"])
        .group_by_dynamic("ts", every="5m")
        .agg(close=mid.last())
        .select(bucket="ts", ret=pl.col("close").log().diff())
        .slice(1)
    )
