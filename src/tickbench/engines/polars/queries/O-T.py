# The 10 probe times as a frame, matched to the book with an as-of (backward) join.
from typing import Any

import polars as pl


def query(tables: dict[str, pl.LazyFrame], params: dict[str, Any]) -> pl.LazyFrame:
    book = tables["book"].filter(
        pl.col("sym") == params["sym"], pl.col("ts") >= params["month_start"], pl.col("ts") < params["month_end"]
    ).select("ts", "b1price", "b1size", "a1price", "a1size")
    probes = pl.LazyFrame({"t": params["ot_times"]}).select(pl.col("t").cast(pl.Datetime("ns", "UTC")).sort())
    return (
        probes.join_asof(book, left_on="t", right_on="ts", strategy="backward", coalesce=False)
        .drop_nulls("ts")
        .select("t", "ts", "b1price", "b1size", "a1price", "a1size")
    )
