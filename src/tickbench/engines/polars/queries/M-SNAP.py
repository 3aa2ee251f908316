# As-of joins on D's rows of B: the (t, sym) grid against the trades (the last in (ts, exchange,
# trade_id) order wins a tie on ts: a backward join_asof takes the last equal row), and the
# (t, sym, venue) grid against each venue's quotes (by (ts, seq): the greatest seq is the last row).
from typing import Any

import polars as pl

from tickbench.engines.polars.market import MarketStore, named


def query(store: MarketStore, params: dict[str, Any]) -> pl.LazyFrame:
    day = params["d_start"], params["d_end"]
    trades = named(store.basket("trades", params["b_syms"], *day, ["ts", "price", "amount"]))
    quotes = named(store.basket("quotes", params["b_syms"], *day, ["ts", "exchange", "bid", "ask"]))
    times = pl.LazyFrame({"t": sorted(params["t_times"])}, schema={"t": pl.Datetime("ns", "UTC")})
    grid = times.join(pl.LazyFrame({"sym": params["b_syms"]}, schema={"sym": pl.String}), how="cross")
    last = grid.join_asof(trades, left_on="t", right_on="ts", by="sym", strategy="backward",
                          check_sortedness=False)
    book = (grid.join(store.venues().to_frame().lazy(), how="cross")
            .join_asof(quotes, left_on="t", right_on="ts", by=["sym", "exchange"], strategy="backward",
                       check_sortedness=False)
            .group_by("t", "sym").agg(nbb=pl.col("bid").max(), nbo=pl.col("ask").min()))
    return (last.select("t", "sym", last_price="price", last_amount="amount")
            .join(book, on=["t", "sym"], how="left").sort("t", "sym"))
