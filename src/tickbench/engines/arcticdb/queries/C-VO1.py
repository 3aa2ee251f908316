"""QueryBuilder: date_range + apply mid + resample 5min last; Polars: ln returns, hourly sample stddev."""

from typing import Any

import polars as pl
from arcticdb import QueryBuilder

from tickbench.engines.arcticdb.layout import Store


def query(store: Store, params: dict[str, Any]) -> pl.DataFrame:
    q = QueryBuilder()
    q = q.apply("mid", (q["a1price"] + q["b1price"]) / 2)
    q = q.resample("5min").agg({"close": ("mid", "last")})
    closes = store.read(store.symbol("book", params["sym"]), date_range=params["day_range"], query_builder=q)
    returns = closes.sort("ts").select("ts", ret=pl.col("close").log().diff()).slice(1)
    return (
        returns.group_by(hour=pl.col("ts").dt.truncate("1h"))
        .agg(vol=pl.col("ret").std(ddof=1), n=pl.len())
        .filter(pl.col("n") >= 2)
        .select("hour", "vol")
        .sort("hour")
    )
