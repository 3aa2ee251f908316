from typing import Any

import polars as pl

from tickbench.engines.polars.adapter import Store


def query(store: Store, params: dict[str, Any]) -> pl.LazyFrame:
    asks = [f"a{i}price" for i in range(1, 21)]
    bids = [f"b{i}price" for i in range(1, 21)]
    return (
        store.range("book_depth", params["day_start"], params["day_end"], params["sym"])
        .select("ts", spread=pl.min_horizontal(asks) - pl.max_horizontal(bids))
    )
