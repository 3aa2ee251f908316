# bucket: minutes since the session's 14:30 UTC open of the trade's own day, floored to 5.
from typing import Any

import polars as pl

from tickbench.engines.polars.market import MarketStore

DAYS = 20  # SPEC §2.3: the curve averages over M's 20 trading days
OPEN_MIN = 14 * 60 + 30


def query(store: MarketStore, params: dict[str, Any]) -> pl.LazyFrame:
    trades = store.basket("trades", params["b_syms"], params["m_start"], params["m_end"], ["ts", "amount"])
    ts = pl.col("ts")
    minute = (ts.dt.hour().cast(pl.Int64) * 60 + ts.dt.minute().cast(pl.Int64)) - OPEN_MIN
    return (trades.group_by("sym", bucket=minute // 5 * 5).agg(avg_volume=pl.col("amount").sum() / DAYS)
            .sort("sym", "bucket"))
