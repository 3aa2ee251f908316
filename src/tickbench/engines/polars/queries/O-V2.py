from typing import Any

import polars as pl

from tickbench.engines.polars.adapter import Store


def query(store: Store, params: dict[str, Any]) -> pl.LazyFrame:
    bid5 = pl.sum_horizontal(f"b{i}size" for i in range(1, 6))
    ask5 = pl.sum_horizontal(f"a{i}size" for i in range(1, 6))
    return (
        store.range("book", params["month_start"], params["month_end"], params["sym"])
        .group_by_dynamic("ts", every="1h")
        .agg(bid_depth=bid5.mean(), ask_depth=ask5.mean())
        .select(bucket="ts", bid_depth="bid_depth", ask_depth="ask_depth")
    )
