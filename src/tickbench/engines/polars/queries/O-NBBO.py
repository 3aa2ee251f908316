# Per probe and venue, one binary search in that venue's frame of S; then max bid, min ask.
from typing import Any

import polars as pl

from tickbench.engines.polars.adapter import Store

# No probe with a snapshot before it (or no probe at all) is an empty answer of the answer's
# columns: pl.concat refuses an empty list.
EMPTY = pl.DataFrame(schema={"t": pl.Datetime("ns", "UTC"), "nbb": pl.Float64, "nbo": pl.Float64})


def query(store: Store, params: dict[str, Any]) -> pl.LazyFrame:
    rows = [EMPTY]
    venues = store.keys("book", params["sym"])
    for t in sorted(params["nbbo_times"]):
        if t >= params["multi_end"] or not venues:
            continue
        quotes = pl.concat([store.asof("book", s, e, t, params["multi_start"]).select("b1price", "a1price")
                            for s, e in venues])
        if quotes.height:
            rows.append(quotes.select(t=pl.lit(t).cast(pl.Datetime("ns", "UTC")),
                                      nbb=pl.col("b1price").max(), nbo=pl.col("a1price").min()))
    return pl.concat(rows).lazy()
