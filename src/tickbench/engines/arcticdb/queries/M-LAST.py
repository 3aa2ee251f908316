"""QueryBuilder: date_range [end - w, end] of M per symbol, w = 1 h, 1 day, M, venues: metadata; Polars: last."""

# A read decodes every segment its date_range touches, so each instrument's last hour is read first
# and only the instruments missing a venue they quoted in M (the symbol's metadata) look further back.
from typing import Any

import pandas as pd
import polars as pl

from tickbench.engines.arcticdb.market import MarketStore

LOOKBACKS = (pd.Timedelta(hours=1), pd.Timedelta(days=1), None)  # None: back to M's start
COLUMNS = ["exchange", "bid", "bsize", "ask", "asize"]


def query(store: MarketStore, params: dict[str, Any]) -> pl.DataFrame:
    start, end = params["m_range"]
    days = [d.date().isoformat() for d in pd.date_range(start.normalize(), end, freq="D")]
    venues = store.venues("quotes", store.syms("quotes"), days)
    found: dict[str, pl.DataFrame] = {}
    pending = [s for s, n in venues.items() if n]
    for lookback in LOOKBACKS:
        if not pending:
            break
        lo = start if lookback is None else max(start, end - lookback)
        for sym, frame in store.read("quotes", pending, (lo, end), columns=COLUMNS).items():
            found[sym] = frame.group_by("exchange").agg(pl.all().last()).with_columns(sym=pl.lit(sym))
        pending = [s for s in pending if found[s].height < venues[s]]
    rows = pl.concat(list(found.values()), how="diagonal_relaxed")
    return (rows.select("sym", "exchange", pl.col("ts").dt.replace_time_zone("UTC"), *COLUMNS[1:])
            .sort("sym", "exchange"))
