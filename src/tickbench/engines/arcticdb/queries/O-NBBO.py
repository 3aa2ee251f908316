"""QueryBuilder: date_range [t - w, t] per probe, w = 1 min, 1 h, day (read_batch), venues: metadata; Polars: last."""

# A read decodes every segment its date_range touches, so each probe first reads its last minute
# (index-pruned to a segment or two) and only the probes that miss a venue of S on X look further
# back; QueryBuilder's groupby has no `last`, so each venue's latest row is picked in Polars.
from typing import Any

import pandas as pd
import polars as pl
from arcticdb import ReadRequest

from tickbench.engines.arcticdb.layout import Store

COLUMNS = ["exchange", "b1price", "a1price"]
LOOKBACKS = (pd.Timedelta(minutes=1), pd.Timedelta(hours=1), None)  # None: back to the day's start


def query(store: Store, params: dict[str, Any]) -> pl.DataFrame:
    symbol = store.symbol("book", params["sym"])
    start, end = params["multi_range"]
    # The venues of S on X, from the symbol's metadata (written with its rows): grouping the
    # day's rows by venue read two columns of the whole day, the one part that grew with its rows.
    days = [d.date().isoformat() for d in pd.date_range(start.normalize(), end, freq="D")]
    venues = len(store.venues(symbol, days))
    probes = [pd.Timestamp(t) for t in params["nbbo_times"] if start <= pd.Timestamp(t) <= end]
    quotes: dict[pd.Timestamp, pl.DataFrame] = {}
    pending = probes
    for lookback in LOOKBACKS:
        if not pending:
            break
        lows = [start if lookback is None else max(start, t - lookback) for t in pending]
        requests = [ReadRequest(symbol, date_range=(lo, t), columns=COLUMNS)
                    for lo, t in zip(lows, pending, strict=True)]
        for t, frame in zip(pending, store.read_batch(requests), strict=True):
            quotes[t] = frame.group_by("exchange").agg(pl.col("b1price", "a1price").last())
        pending = [t for t in pending if quotes[t].height < venues]
    rows = [q.select(t=pl.lit(t).cast(pl.Datetime("ns")), nbb=pl.col("b1price").max(), nbo=pl.col("a1price").min())
            for t, q in sorted(quotes.items()) if q.height]
    empty = pl.DataFrame(schema={"t": pl.Datetime("ns"), "nbb": pl.Float64, "nbo": pl.Float64})
    return pl.concat([empty, *rows])
