# Each request's basket sliced to its own window by binary search; open/close are first/last of the
# (ts, exchange, trade_id)-ordered slices.
from collections import defaultdict
from typing import Any

import polars as pl

from tickbench.engines.polars.market import MarketStore, named


def query(store: MarketStore, params: dict[str, Any]) -> pl.LazyFrame:
    baskets: dict[int, list[str]] = defaultdict(list)
    for req, sym in zip(params["ui_pair_req"], params["ui_pair_sym"], strict=True):
        baskets[req].append(sym)
    parts = [store.basket("trades", baskets[req], start, end, ["price", "amount"], req=req)
             for req, start, end in zip(params["ui_req"], params["ui_from"], params["ui_to"], strict=True)]
    price, amount = pl.col("price"), pl.col("amount")
    return named(pl.concat(parts).with_columns(pl.col("req").cast(pl.Int64)).group_by("req", "sym").agg(
        n=pl.len().cast(pl.Int64), volume=amount.sum(), vwap=(price * amount).sum() / amount.sum(),
        open=price.first(), high=price.max(), low=price.min(), close=price.last(), sd=price.std(ddof=1),
    ).sort("req", "sym"))
