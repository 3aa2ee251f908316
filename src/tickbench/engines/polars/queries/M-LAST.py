# A tick store's last-value read: each (instrument, venue)'s latest quote lies at the end of the
# instrument's frame, so only its tail is read (store.latest walks back until every venue is seen).
from typing import Any

import polars as pl

from tickbench.engines.polars.market import MarketStore


def query(store: MarketStore, params: dict[str, Any]) -> pl.LazyFrame:
    cols = ["exchange", "ts", "bid", "bsize", "ask", "asize"]
    tails = [store.latest(sym, params["m_start"], params["m_end"]).select(cols).with_columns(sym=pl.lit(sym))
             for sym in store.syms("quotes")]
    rows = pl.concat(tails).lazy() if tails else pl.LazyFrame(schema={c: store.schema("quotes")[c] for c in cols})
    return (rows.group_by("sym", "exchange").agg(pl.all().last())
            .select("sym", pl.col("exchange").cast(pl.String), "ts", "bid", "bsize", "ask", "asize")
            .sort("sym", "exchange"))
