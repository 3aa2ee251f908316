# Per probe and venue, one binary search in that venue's frame of S; then max bid, min ask.
from typing import Any

import polars as pl

from tickbench.engines.polars.adapter import Store


def query(store: Store, params: dict[str, Any]) -> pl.LazyFrame:
    rows = []
    for t in sorted(params["nbbo_times"]):
        if t >= params["multi_end"]:
            continue
        quotes = pl.concat([store.asof("book", s, e, t, params["multi_start"]).select("b1price", "a1price")
                            for s, e in store.keys("book", params["sym"])])
        if quotes.height:
            rows.append(quotes.select(t=pl.lit(t).cast(pl.Datetime("ns", "UTC")),
                                      nbb=pl.col("b1price").max(), nbo=pl.col("a1price").min()))
    return pl.concat(rows).lazy()
