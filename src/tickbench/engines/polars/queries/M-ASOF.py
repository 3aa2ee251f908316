# One as-of join of D's trades of B50 against D's quotes by (sym, exchange): each trade meets its own
# venue's latest quote (by (ts, seq): the greatest seq is the last row at a ts, which a backward
# join_asof takes); a symbol that does not exist has no frame and so no rows.
from typing import Any

import polars as pl

from tickbench.engines.polars.market import MarketStore, named


def query(store: MarketStore, params: dict[str, Any]) -> pl.LazyFrame:
    day = params["d_start"], params["d_end"]
    trades = store.basket("trades", params["b50_syms"], *day, ["ts", "exchange", "price"])
    quotes = store.basket("quotes", params["b50_syms"], *day, ["ts", "exchange", "bid", "ask"])
    joined = trades.join_asof(quotes.rename({"ts": "qts"}), left_on="ts", right_on="qts", by=["sym", "exchange"],
                              strategy="backward", check_sortedness=False)
    mid = (pl.col("bid") + pl.col("ask")) / 2
    spread = (2 * (pl.col("price") - mid).abs() / mid).mean()
    return named(joined.filter(pl.col("qts").is_not_null())
                 .group_by("sym").agg(n=pl.len().cast(pl.Int64), eff_spread=spread).sort("sym"))
