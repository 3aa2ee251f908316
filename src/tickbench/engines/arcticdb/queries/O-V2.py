"""QueryBuilder: date_range + apply 5-level sums + resample 1h mean; Polars: nothing (rename)."""

from typing import Any

import polars as pl
from arcticdb import QueryBuilder

from tickbench.engines.arcticdb.layout import Store


def query(store: Store, params: dict[str, Any]) -> pl.DataFrame:
    q = QueryBuilder()
    q = q.apply("bid5", q["b1size"] + q["b2size"] + q["b3size"] + q["b4size"] + q["b5size"])
    q = q.apply("ask5", q["a1size"] + q["a2size"] + q["a3size"] + q["a4size"] + q["a5size"])
    q = q.resample("1h").agg({"bid_depth": ("bid5", "mean"), "ask_depth": ("ask5", "mean")})
    frame = store.read(store.symbol("book", params["sym"]), date_range=params["month_range"], query_builder=q)
    return frame.select(bucket="ts", bid_depth="bid_depth", ask_depth="ask_depth")
