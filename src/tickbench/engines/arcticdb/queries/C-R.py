"""QueryBuilder: date_range + apply mid + resample 5min last; Polars: ln returns."""

from typing import Any

import polars as pl
from arcticdb import QueryBuilder

from tickbench.engines.arcticdb.layout import Store


def query(store: Store, params: dict[str, Any]) -> pl.DataFrame:
    q = QueryBuilder()
    q = q.apply("mid", (q["a1price"] + q["b1price"]) / 2)
    q = q.resample("5min").agg({"close": ("mid", "last")})
    closes = store.read(store.symbol("book", params["sym"]), date_range=params["day_range"], query_builder=q)
    return closes.sort("ts").select(bucket="ts", ret=pl.col("close").log().diff()).slice(1)
