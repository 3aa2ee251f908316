# One probe per (time, venue), each matched by an as-of join to that venue's latest snapshot.
from typing import Any

import polars as pl


def query(tables: dict[str, pl.LazyFrame], params: dict[str, Any]) -> pl.LazyFrame:
    book = tables["book"].filter(
        pl.col("sym") == params["sym"], pl.col("ts") >= params["multi_start"], pl.col("ts") < params["multi_end"]
    ).select("ts", "exchange", "b1price", "a1price")
    probes = (
        pl.LazyFrame({"t": params["nbbo_times"]})
        .select(pl.col("t").cast(pl.Datetime("ns", "UTC")))
        .join(book.select("exchange").unique(), how="cross")
        .sort("t")
    )
    return (
        # Sorted by ts at load: the check cannot see that through the `by` groups.
        probes.join_asof(book, left_on="t", right_on="ts", by="exchange", strategy="backward",
                         check_sortedness=False)
        .group_by("t")
        .agg(nbb=pl.col("b1price").max(), nbo=pl.col("a1price").min())
        .drop_nulls("nbb")
        .sort("t")
    )
