from typing import Any

import polars as pl

from tickbench.engines.polars.adapter import Store


def query(store: Store, params: dict[str, Any]) -> pl.LazyFrame:
    return (
        store.range("book", params["month_start"], params["month_end"], labels=True)
        .group_by("sym")
        .agg(max_bid=pl.col("b1price").max())
        .sort("sym")
    )
