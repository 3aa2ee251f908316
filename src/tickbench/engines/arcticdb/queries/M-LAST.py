"""ArcticDB: M's pairs, then [end - w, end] of the quotes' cross-section symbol (w = 1 h, 1 day, M); Polars: last."""

# One read decodes the segments of its date_range (the cross-section symbol is in time order), so
# M's last hour is read first and only the instruments still missing a pair that quoted in M (the
# quote_pairs symbol, one row per day and pair) are read further back, filtered in QueryBuilder.
# Within a (sym, exchange) the rows are in (ts, seq) order: the last row is the latest quote.
from typing import Any

import pandas as pd
import polars as pl
from arcticdb import QueryBuilder

from tickbench.engines.arcticdb.market import PAIRS, MarketStore

LOOKBACKS = (pd.Timedelta(hours=1), pd.Timedelta(days=1), None)  # None: back to M's start
COLUMNS = ["sym", "exchange", "bid", "bsize", "ask", "asize"]
KEY = ["sym", "exchange"]


def query(store: MarketStore, params: dict[str, Any]) -> pl.DataFrame:
    start, end = params["m_range"]
    pending = store.market(PAIRS, (start.normalize(), end), columns=KEY).select(KEY).unique()
    found: list[pl.DataFrame] = []
    for lookback in LOOKBACKS:
        if pending.is_empty():
            break
        lo = start if lookback is None else max(start, end - lookback)
        q = None
        if found:  # only the instruments still missing a pair
            q = QueryBuilder()
            q = q[q["sym"].isin(pending["sym"].unique().to_list())]
        rows = store.market("quotes", (lo, end), columns=COLUMNS, query=q)
        last = rows.group_by(KEY).agg(pl.all().last()).join(pending, on=KEY, how="semi")
        found.append(last)
        pending = pending.join(last, on=KEY, how="anti")
    schema: dict[str, Any] = {"sym": pl.String, "exchange": pl.String, "ts": pl.Datetime("ns"),
                              **dict.fromkeys(COLUMNS[2:], pl.Float64)}
    rows = pl.concat(found, how="diagonal_relaxed") if found else pl.DataFrame(schema=schema)
    return (rows.select("sym", "exchange", pl.col("ts").dt.replace_time_zone("UTC"), *COLUMNS[2:])
            .sort("sym", "exchange"))
