"""The Arrow schemas of the market dataset's three tables (SPEC §1.3): its trades have the paper's
trades schema."""

from __future__ import annotations

import pyarrow as pa

from tickbench.data.schema import TRADES_SCHEMA, TS_TYPE

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

INSTRUMENTS_PATH = "instruments.parquet"  # the instruments table, beside the day directories
MARKET_ROW_GROUP = 131_072  # rows per Parquet row group of a market part file (sym-ordered: readers skip groups)
