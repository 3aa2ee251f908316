# Every instrument's frame sliced to D, grouped by (sym, side, minute).
from typing import Any

import polars as pl

from tickbench.engines.polars.adapter import Store


def query(store: Store, params: dict[str, Any]) -> pl.LazyFrame:
    return (
        store.range("trades", params["day_start"], params["day_end"], labels=True)
        .group_by("sym", "side", bucket=pl.col("ts").dt.truncate("1m"))
        .agg(volume=pl.col("amount").sum())
        .select("sym", pl.col("side").cast(pl.String), "bucket", "volume")
        .sort("sym", "side", "bucket")
    )
