"""QueryBuilder: date_range of D per symbol of B50, trades and quotes (read_batch); Polars: as-of join."""

# A symbol that does not exist has no ArcticDB symbol and so no read. A backward join_asof takes
# the last equal row: each venue's quote of greatest seq at a ts (the stored order).
from typing import Any

import polars as pl

from tickbench.engines.arcticdb.market import MarketStore

TS = pl.Datetime("ns")


def query(store: MarketStore, params: dict[str, Any]) -> pl.DataFrame:
    trades = store.frame("trades", params["b50_syms"], params["d_range"], columns=["exchange", "price"],
                         schema={"ts": TS, "exchange": pl.String, "price": pl.Float64})
    quotes = store.frame("quotes", params["b50_syms"], params["d_range"], columns=["exchange", "bid", "ask"],
                         schema={"ts": TS, "exchange": pl.String, "bid": pl.Float64, "ask": pl.Float64})
    joined = trades.join_asof(quotes.rename({"ts": "qts"}), left_on="ts", right_on="qts", by=["sym", "exchange"],
                              strategy="backward", check_sortedness=False)
    mid = (pl.col("bid") + pl.col("ask")) / 2
    return (joined.filter(pl.col("qts").is_not_null())
            .group_by("sym").agg(n=pl.len().cast(pl.Int64), eff_spread=(2 * (pl.col("price") - mid).abs() / mid).mean())
            .sort("sym"))
