"""QueryBuilder: date_range + side filter + resample 1min sum per (sym, side) in a batch; Polars: concat, sort."""

from typing import Any

import polars as pl
from arcticdb import QueryBuilder, ReadRequest

from tickbench.engines.arcticdb.layout import Store

SIDES = ("buy", "sell")  # SPEC §1: the taker side is one of these


def query(store: Store, params: dict[str, Any]) -> pl.DataFrame:
    labels, requests = [], []
    for sym, symbol in store.symbols("trades").items():
        for side in SIDES:
            q = QueryBuilder()
            q = q[q["side"] == side].resample("1min").agg({"volume": ("amount", "sum")})
            labels.append((sym, side))
            requests.append(ReadRequest(symbol, date_range=params["day_range"], query_builder=q))
    parts = [
        f.select(pl.lit(sym).alias("sym"), pl.lit(side).alias("side"), pl.col("ts").alias("bucket"), "volume")
        for (sym, side), f in zip(labels, store.read_batch(requests), strict=True)
        if f.height
    ]
    if not parts:  # no trades in range at all (a book-only capture): the empty answer
        return pl.DataFrame(schema={"sym": pl.String, "side": pl.String, "bucket": pl.Datetime("ns"),
                                     "volume": pl.Float64})
    return pl.concat(parts).sort("sym", "side", "bucket")
