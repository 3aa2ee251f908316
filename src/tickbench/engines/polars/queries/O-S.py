from typing import Any

import polars as pl


def query(tables: dict[str, pl.LazyFrame], params: dict[str, Any]) -> pl.LazyFrame:
    asks = [f"a{i}price" for i in range(1, 21)]
    bids = [f"b{i}price" for i in range(1, 21)]
    return (
        tables["book"]
        .filter(pl.col("sym") == params["sym"], pl.col("ts") >= params["day_start"], pl.col("ts") < params["day_end"])
        .select("ts", spread=pl.min_horizontal(asks) - pl.max_horizontal(bids))
        .sort("ts")
    )
