# P's trades found in their instruments' D, then one as-of join per horizon against the quotes of
# the trade's own (sym, exchange) on D (by (ts, seq): the greatest seq is the last row at a ts).
from typing import Any

import polars as pl

from tickbench.engines.polars.market import MarketStore, named

HORIZONS_S = (1, 10, 60, 300)


def query(store: MarketStore, params: dict[str, Any]) -> pl.LazyFrame:
    wanted = pl.LazyFrame({"exchange": params["p_exchanges"], "sym": params["p_syms"],
                           "trade_id": params["p_trade_ids"]},
                          schema={"exchange": pl.String, "sym": pl.String, "trade_id": pl.Int64})
    day = params["d_start"], params["d_end"]
    syms = sorted(set(params["p_syms"]))
    trades = (named(store.basket("trades", syms, *day, ["ts", "exchange", "trade_id", "side", "price", "amount"]),
                    "exchange")
              .join(wanted, on=["exchange", "sym", "trade_id"], how="semi"))
    quotes = named(store.basket("quotes", syms, *day, ["ts", "exchange", "bid", "ask"]), "exchange")
    probes = pl.concat([trades.with_columns(h=pl.lit(h, pl.Int64),
                                            at=pl.col("ts") + pl.duration(seconds=h, time_unit="ns"))
                        for h in HORIZONS_S]).sort("at")
    marked = probes.join_asof(quotes.rename({"ts": "qts"}), left_on="at", right_on="qts", by=["sym", "exchange"],
                              strategy="backward", check_sortedness=False)
    sign = pl.when(pl.col("side") == "buy").then(1.0).otherwise(-1.0)
    mark = (pl.col("bid") + pl.col("ask")) / 2
    return (marked.filter(pl.col("qts").is_not_null())
            .select("exchange", "sym", "trade_id", "h", pnl=sign * pl.col("amount") * (mark - pl.col("price")))
            .sort("exchange", "sym", "trade_id", "h"))
