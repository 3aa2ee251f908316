"""The Arrow schemas of the paper dataset's two tables (SPEC §1) and of the market dataset's
three (SPEC §1.3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

LEVELS = 20
TS_TYPE = pa.timestamp("ns", tz="UTC")

TRADES_SCHEMA = pa.schema(
    [
        ("ts", TS_TYPE),
        ("exchange", pa.string()),
        ("sym", pa.string()),
        ("side", pa.string()),
        ("price", pa.float64()),
        ("amount", pa.float64()),
        ("trade_id", pa.int64()),
    ]
)


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

# The market dataset (SPEC §1.3): its trades have the paper's trades schema.
QUOTES_SCHEMA = pa.schema(
    [
        ("ts", TS_TYPE),
        ("exchange", pa.string()),
        ("sym", pa.string()),
        ("bid", pa.float64()),
        ("ask", pa.float64()),
        ("bsize", pa.float64()),
        ("asize", pa.float64()),
        ("seq", pa.int64()),
    ]
)
INSTRUMENTS_SCHEMA = pa.schema(
    [
        ("sym", pa.string()),
        ("rank", pa.int32()),
        ("tick", pa.float64()),
        ("lot", pa.float64()),
        ("primary", pa.string()),
        ("venues", pa.int32()),
    ]
)
MARKET_SCHEMAS = {"quotes": QUOTES_SCHEMA, "trades": TRADES_SCHEMA, "instruments": INSTRUMENTS_SCHEMA}
MARKET_TABLES = ("quotes", "trades")  # the tables partitioned by day


def rows_to_table(table: str, rows: Sequence[tuple[Any, ...]]) -> pa.Table:
    """Ingest rows (tuples in SPEC column order, ``ts`` as integer nanoseconds since the
    epoch) as an Arrow table of ``table``'s schema."""
    schema = SCHEMAS[table]
    cols = list(zip(*rows, strict=True))
    arrays = [pa.array(cols[0], pa.int64()).cast(schema.field("ts").type)]
    arrays += [pa.array(c, schema.field(i + 1).type) for i, c in enumerate(cols[1:])]
    return pa.Table.from_arrays(arrays, schema=schema)
