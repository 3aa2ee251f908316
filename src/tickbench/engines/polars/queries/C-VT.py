from typing import Any

import polars as pl

from tickbench.engines.polars.adapter import Store


def query(store: Store, params: dict[str, Any]) -> pl.LazyFrame:
    returns = (
        store.range("trades", params["day_start"], params["day_end"], params["sym"])
        .group_by_dynamic("ts", every="5m")
        # The bucket's last trade: latest ts, and on a tie the highest trade_id.
        .agg(close=pl.col("price").sort_by("ts", "trade_id").last())
        .select("ts", ret=pl.col("close").log().diff())
        .slice(1)
    )
    return (
        returns.group_by_dynamic("ts", every="1h")
        .agg(vol=pl.col("ret").std(ddof=1), n=pl.len())
        .filter(pl.col("n") >= 2)
        .select(hour="ts", vol="vol")
    )
