"""QueryBuilder: date_range + apply mid + resample 1h last; Polars: ln returns, 4-hourly sample stddev."""

from typing import Any

import polars as pl
from arcticdb import QueryBuilder

from tickbench.engines.arcticdb.layout import Store


def query(store: Store, params: dict[str, Any]) -> pl.DataFrame:
    q = QueryBuilder()
    q = q.apply("mid", (q["a1price"] + q["b1price"]) / 2)
    q = q.resample("1h").agg({"close": ("mid", "last")})
    closes = store.read(store.symbol("book", params["sym"]), date_range=params["week_range"], query_builder=q)
    returns = closes.sort("ts").select("ts", ret=pl.col("close").log().diff()).slice(1)
    return (
        returns.group_by(bucket4h=pl.col("ts").dt.truncate("4h"))
        .agg(vol=pl.col("ret").std(ddof=1), n=pl.len())
        .filter(pl.col("n") >= 2)
        .select("bucket4h", "vol")
        .sort("bucket4h")
    )
