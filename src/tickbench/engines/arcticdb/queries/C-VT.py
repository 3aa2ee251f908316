"""QueryBuilder: date_range + resample 5min last price; Polars: ln returns, hourly sample stddev."""

from typing import Any

import polars as pl
from arcticdb import QueryBuilder

from tickbench.engines.arcticdb.layout import Store


def query(store: Store, params: dict[str, Any]) -> pl.DataFrame:
    # Rows are stored in (ts, trade_id) order, so `last` is the highest trade_id on a tie.
    q = QueryBuilder().resample("5min").agg({"close": ("price", "last")})
    closes = store.read(store.symbol("trades", params["sym"]), date_range=params["day_range"], query_builder=q)
    returns = closes.sort("ts").select("ts", ret=pl.col("close").log().diff()).slice(1)
    return (
        returns.group_by(hour=pl.col("ts").dt.truncate("1h"))
        .agg(vol=pl.col("ret").std(ddof=1), n=pl.len())
        .filter(pl.col("n") >= 2)
        .select("hour", "vol")
        .sort("hour")
    )
