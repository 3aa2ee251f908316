"""QueryBuilder: date_range + apply price*amount + resample 1min sums + apply the division; Polars: column selection."""

from typing import Any

import polars as pl
from arcticdb import QueryBuilder

from tickbench.engines.arcticdb.layout import Store


def query(store: Store, params: dict[str, Any]) -> pl.DataFrame:
    q = QueryBuilder()
    q = q.apply("pv", q["price"] * q["amount"])
    q = q.resample("1min").agg({"pv": ("pv", "sum"), "volume": ("amount", "sum")})
    q = q.apply("vwap", q["pv"] / q["volume"])
    # A column selection cannot be combined with resample: the sums come back too.
    frame = store.read(store.symbol("trades", params["sym"]), date_range=params["day_range"], query_builder=q)
    return frame.select(bucket="ts", vwap="vwap")
