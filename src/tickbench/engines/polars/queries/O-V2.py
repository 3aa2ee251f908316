from typing import Any

import polars as pl


def query(tables: dict[str, pl.LazyFrame], params: dict[str, Any]) -> pl.LazyFrame:
    bid5 = pl.sum_horizontal(f"b{i}size" for i in range(1, 6))
    ask5 = pl.sum_horizontal(f"a{i}size" for i in range(1, 6))
    return (
        tables["book"]
        .filter(pl.col("sym") == params["sym"],
                pl.col("ts") >= params["month_start"], pl.col("ts") < params["month_end"])
        .group_by_dynamic("ts", every="1h")
        .agg(bid_depth=bid5.mean(), ask_depth=ask5.mean())
        .select(bucket="ts", bid_depth="bid_depth", ask_depth="ask_depth")
    )
