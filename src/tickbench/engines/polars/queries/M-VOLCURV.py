# bucket: minutes since the session's open (14:30 UTC generated) of the trade's own day, floored to 5;
# the average divides by M's days (20 generated): both are bindings, an import's calendar differs.
from typing import Any

import polars as pl

from tickbench.engines.polars.market import MarketStore, named


def query(store: MarketStore, params: dict[str, Any]) -> pl.LazyFrame:
    trades = store.basket("trades", params["b_syms"], params["m_start"], params["m_end"], ["ts", "amount"])
    ts = pl.col("ts")
    minute = (ts.dt.hour().cast(pl.Int64) * 60 + ts.dt.minute().cast(pl.Int64)) - params["session_open_minute"]
    avg = pl.col("amount").sum() / params["m_day_count"]
    return named(trades.group_by("sym", bucket=minute // 5 * 5).agg(avg_volume=avg).sort("sym", "bucket"))
