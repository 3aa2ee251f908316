"""QueryBuilder: date_range [t - w, t] + tail(1) per probe, w = 1 min, 1 h, month (read_batch); Polars: stacking."""

# tail(1) decodes every segment in its date_range, so each probe first looks back a short window
# (index-pruned to a segment or two) and only the probes that found nothing look further back.
from typing import Any

import pandas as pd
import polars as pl
from arcticdb import QueryBuilder, ReadRequest

from tickbench.engines.arcticdb.layout import Store

COLUMNS = ["b1price", "b1size", "a1price", "a1size"]
LOOKBACKS = (pd.Timedelta(minutes=1), pd.Timedelta(hours=1), None)  # None: back to the month's start


def query(store: Store, params: dict[str, Any]) -> pl.DataFrame:
    symbol = store.symbol("book", params["sym"])
    start = pd.Timestamp(params["month_start"])
    found: dict[Any, pl.DataFrame] = {}
    pending = list(params["ot_times"])
    for lookback in LOOKBACKS:
        if not pending:
            break
        lows = [start if lookback is None else max(start, pd.Timestamp(t) - lookback) for t in pending]
        requests = [ReadRequest(symbol, date_range=(lo, t), columns=COLUMNS, query_builder=QueryBuilder().tail(1))
                    for lo, t in zip(lows, pending, strict=True)]
        for t, frame in zip(pending, store.read_batch(requests), strict=True):
            if frame.height:
                found[t] = frame
        pending = [t for t in pending if t not in found]
    rows = [f.select(pl.lit(t).cast(pl.Datetime("ns")).alias("t"), "ts", *COLUMNS) for t, f in found.items()]
    if not rows:  # no probe has a snapshot before it: the empty answer (pl.concat refuses an empty list)
        return pl.DataFrame(schema={"t": pl.Datetime("ns"), "ts": pl.Datetime("ns"),
                                    **dict.fromkeys(COLUMNS, pl.Float64)})
    return pl.concat(rows).sort("t")
