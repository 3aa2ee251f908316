"""QueryBuilder: date_range + resample 1min mean; Polars: nothing (rename)."""

from typing import Any

import polars as pl
from arcticdb import QueryBuilder

from tickbench.engines.arcticdb.layout import Store


def query(store: Store, params: dict[str, Any]) -> pl.DataFrame:
    q = QueryBuilder().resample("1min").agg({"bid_depth": ("b1size", "mean"), "ask_depth": ("a1size", "mean")})
    frame = store.read(store.symbol("book", params["sym"]), date_range=params["week_range"], query_builder=q)
    return frame.select(bucket="ts", bid_depth="bid_depth", ask_depth="ask_depth")
