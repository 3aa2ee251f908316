"""QueryBuilder: date_range per instrument, concat, groupby sym max; Polars: ordering."""

from typing import Any

import arcticdb as adb
import polars as pl
from arcticdb import ReadRequest

from tickbench.engines.arcticdb.layout import Store


def query(store: Store, params: dict[str, Any]) -> pl.DataFrame:
    lazy = store.lib.read_batch([ReadRequest(s, date_range=params["month_range"], columns=["sym", "b1price"])
                                 for s in store.symbols("book").values()], lazy=True)
    frame: pl.DataFrame = adb.concat(lazy).groupby("sym").agg({"max_bid": ("b1price", "max")}).collect().data
    return frame.select("sym", "max_bid").sort("sym")
