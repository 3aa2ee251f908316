"""QueryBuilder: date_range + column projection; Polars: as-of join per venue, max bid / min ask."""

# QueryBuilder has no as-of join and its groupby has no `last`, so the per-venue latest quote is
# matched in Polars over the one day read from the instrument's symbol.
from typing import Any

import polars as pl

from tickbench.engines.arcticdb.layout import Store


def query(store: Store, params: dict[str, Any]) -> pl.DataFrame:
    book = store.read(store.symbol("book", params["sym"]), date_range=params["multi_range"],
                      columns=["exchange", "b1price", "a1price"])
    probes = (
        pl.DataFrame({"t": params["nbbo_times"]})
        .select(pl.col("t").cast(pl.Datetime("ns")))
        .join(book.select("exchange").unique(), how="cross")
        .sort("t")
    )
    # Stored in time order; the sortedness check cannot see through the `by` groups.
    return (
        probes.join_asof(book, left_on="t", right_on="ts", by="exchange", strategy="backward",
                         check_sortedness=False)
        .group_by("t")
        .agg(nbb=pl.col("b1price").max(), nbo=pl.col("a1price").min())
        .drop_nulls("nbb")
        .sort("t")
    )
