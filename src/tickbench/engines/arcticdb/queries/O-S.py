"""QueryBuilder: date_range + running min/max over the 20 levels (where) + apply spread; Polars: nothing (rename)."""

from typing import Any

import polars as pl
from arcticdb import QueryBuilder, where

from tickbench.engines.arcticdb.layout import Store


def query(store: Store, params: dict[str, Any]) -> pl.DataFrame:
    # QueryBuilder has no min/max across columns: fold the levels with where(), one column each.
    q = QueryBuilder()
    ask, bid = "a1price", "b1price"
    for i in range(2, 21):
        a, b = f"a{i}price", f"b{i}price"
        q = q.apply(f"min_ask{i}", where(q[a] < q[ask], q[a], q[ask]))
        q = q.apply(f"max_bid{i}", where(q[b] > q[bid], q[b], q[bid]))
        ask, bid = f"min_ask{i}", f"max_bid{i}"
    q = q.apply("spread", q[ask] - q[bid])
    frame = store.read(store.symbol("book", params["sym"]), date_range=params["day_range"],
                       columns=["spread"], query_builder=q)
    return frame.select("ts", "spread")
