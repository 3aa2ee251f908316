# A tick store's last-value read: each (instrument, venue)'s latest quote lies in the last day of M
# it quoted, so M's last day is one grouped pass over its frame and only the instruments still
# missing a venue (each day's pairs are kept at load) look a day further back.
from typing import Any

import polars as pl

from tickbench.engines.polars.market import MarketStore, named

COLUMNS = ["ts", "bid", "bsize", "ask", "asize"]


def query(store: MarketStore, params: dict[str, Any]) -> pl.LazyFrame:
    rows = store.latest(params["m_start"], params["m_end"], COLUMNS).lazy()
    return named(rows.select("sym", "exchange", *COLUMNS).sort("sym", "exchange"), "exchange")
