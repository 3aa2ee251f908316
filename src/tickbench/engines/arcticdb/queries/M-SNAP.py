"""QueryBuilder: date_range of D to the last probe per symbol of B, trades and quotes; Polars: as-of joins."""

# One read of B's day (to the last probe) instead of a lookback read per (t, sym, venue): each read
# decodes whole segments, and 100 probes touch about as many segments as the day holds for B.
# The stored orders make ties right: a backward join_asof takes the last equal row, i.e. the last
# trade in (ts, exchange, trade_id) order and each venue's quote of greatest seq at a ts.
from typing import Any

import polars as pl

from tickbench.engines.arcticdb.market import MarketStore

TS = pl.Datetime("ns")


def query(store: MarketStore, params: dict[str, Any]) -> pl.DataFrame:
    times = sorted(params["t_times"])
    span = (params["d_range"][0], min(params["d_range"][1], max(times))) if times else params["d_range"]
    trades = store.frame("trades", params["b_syms"], span, columns=["price", "amount"],
                         schema={"ts": TS, "price": pl.Float64, "amount": pl.Float64})
    quotes = store.frame("quotes", params["b_syms"], span, columns=["exchange", "bid", "ask"],
                         schema={"ts": TS, "exchange": pl.String, "bid": pl.Float64, "ask": pl.Float64})
    grid = pl.DataFrame({"t": times}, schema={"t": TS}).join(
        pl.DataFrame({"sym": params["b_syms"]}, schema={"sym": pl.String}), how="cross")
    last = grid.join_asof(trades, left_on="t", right_on="ts", by="sym", strategy="backward", check_sortedness=False)
    venues = quotes.select(pl.col("exchange").unique())
    book = (grid.join(venues, how="cross")
            .join_asof(quotes, left_on="t", right_on="ts", by=["sym", "exchange"], strategy="backward",
                       check_sortedness=False)
            .group_by("t", "sym").agg(nbb=pl.col("bid").max(), nbo=pl.col("ask").min()))
    return (last.select(pl.col("t").dt.replace_time_zone("UTC"), "sym", last_price="price", last_amount="amount")
            .join(book.with_columns(pl.col("t").dt.replace_time_zone("UTC")), on=["t", "sym"], how="left")
            .sort("t", "sym"))
