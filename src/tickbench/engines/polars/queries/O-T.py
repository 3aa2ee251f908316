# Per probe, one binary search in each of S's frames; the latest of those rows wins.
from typing import Any

import polars as pl

from tickbench.engines.polars.adapter import Store, held_empty


def query(store: Store, params: dict[str, Any]) -> pl.LazyFrame:
    cols = ["ts", "b1price", "b1size", "a1price", "a1size"]
    # the empty answer's columns first: no probe (or no frame of S) is an empty answer, and
    # pl.concat refuses an empty list
    rows = [held_empty("book").select(cols).with_columns(t=pl.lit(None, pl.Datetime("ns", "UTC"))).select("t", *cols)]
    venues = store.keys("book", params["sym"])
    for t in sorted(params["ot_times"]):
        if t >= params["month_end"] or not venues:
            continue
        hits = [store.asof("book", s, e, t, params["month_start"]).select(cols) for s, e in venues]
        latest = pl.concat(hits).sort("ts").tail(1)
        rows.append(latest.with_columns(t=pl.lit(t).cast(pl.Datetime("ns", "UTC"))).select("t", *cols))
    return pl.concat(rows).lazy()
