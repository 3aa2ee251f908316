"""The Arrow schemas of the paper dataset's two tables (SPEC §1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from tickbench.data.schema import TRADES_SCHEMA, TS_TYPE

LEVELS = 20


def book_level_columns() -> list[str]:
    """``b1price, b1size, …, b20size, a1price, a1size, …, a20size`` in SPEC order."""
    cols = [f"b{i}{k}" for i in range(1, LEVELS + 1) for k in ("price", "size")]
    cols += [f"a{i}{k}" for i in range(1, LEVELS + 1) for k in ("price", "size")]
    return cols


BOOK_SCHEMA = pa.schema(
    [("ts", TS_TYPE), ("exchange", pa.string()), ("sym", pa.string())]
    + [(c, pa.float64()) for c in book_level_columns()]
)

SCHEMAS = {"trades": TRADES_SCHEMA, "book": BOOK_SCHEMA}
TABLES = ("trades", "book")


def rows_to_table(table: str, rows: Sequence[tuple[Any, ...]]) -> pa.Table:
    """Ingest rows (tuples in SPEC column order, ``ts`` as integer nanoseconds since the
    epoch) as an Arrow table of ``table``'s schema."""
    schema = SCHEMAS[table]
    cols = list(zip(*rows, strict=True))
    arrays = [pa.array(cols[0], pa.int64()).cast(schema.field("ts").type)]
    arrays += [pa.array(c, schema.field(i + 1).type) for i, c in enumerate(cols[1:])]
    return pa.Table.from_arrays(arrays, schema=schema)
