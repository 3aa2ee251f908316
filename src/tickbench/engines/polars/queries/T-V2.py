# Every instrument's frame sliced to M, grouped by (sym, side, day).
from typing import Any

import polars as pl

from tickbench.engines.polars.adapter import Store


def query(store: Store, params: dict[str, Any]) -> pl.LazyFrame:
    return (
        store.range("trades", params["month_start"], params["month_end"], labels=True)
        .group_by("sym", "side", day=pl.col("ts").dt.truncate("1d"))
        .agg(volume=pl.col("amount").sum())
        .select("sym", pl.col("side").cast(pl.String), "day", "volume")
        .sort("sym", "side", "day")
    )
