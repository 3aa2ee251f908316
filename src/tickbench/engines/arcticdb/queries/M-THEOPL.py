"""QueryBuilder: date_range of D per symbol of P's instruments, trades and quotes; Polars: P's trades, as-of."""

# A backward join_asof takes the last equal row: the quote of greatest seq at a ts (stored order).
from typing import Any

import polars as pl

from tickbench.engines.arcticdb.market import MarketStore

HORIZONS_S = (1, 10, 60, 300)
TS = pl.Datetime("ns")


def query(store: MarketStore, params: dict[str, Any]) -> pl.DataFrame:
    wanted = pl.DataFrame({"exchange": params["p_exchanges"], "sym": params["p_syms"],
                           "trade_id": params["p_trade_ids"]},
                          schema={"exchange": pl.String, "sym": pl.String, "trade_id": pl.Int64})
    syms = sorted(set(params["p_syms"]))
    trades = store.frame("trades", syms, params["d_range"], columns=["exchange", "trade_id", "side", "price", "amount"],
                         schema={"ts": TS, "exchange": pl.String, "trade_id": pl.Int64, "side": pl.String,
                                 "price": pl.Float64, "amount": pl.Float64})
    quotes = store.frame("quotes", syms, params["d_range"], columns=["exchange", "bid", "ask"],
                         schema={"ts": TS, "exchange": pl.String, "bid": pl.Float64, "ask": pl.Float64})
    picked = trades.join(wanted, on=["exchange", "sym", "trade_id"], how="semi")
    probes = pl.concat([picked.with_columns(h=pl.lit(h, pl.Int64),
                                            at=pl.col("ts") + pl.duration(seconds=h, time_unit="ns"))
                        for h in HORIZONS_S]).sort("at")
    marked = probes.join_asof(quotes.rename({"ts": "qts"}), left_on="at", right_on="qts", by=["sym", "exchange"],
                              strategy="backward", check_sortedness=False)
    sign = pl.when(pl.col("side") == "buy").then(1.0).otherwise(-1.0)
    mark = (pl.col("bid") + pl.col("ask")) / 2
    return (marked.filter(pl.col("qts").is_not_null())
            .select("exchange", "sym", "trade_id", "h", pnl=sign * pl.col("amount") * (mark - pl.col("price")))
            .sort("exchange", "sym", "trade_id", "h"))
