"""The Arrow types every dataset kind shares: the timestamp type and the trades table (the paper's
SPEC §1 and the market's §1.3 have the same trades schema)."""

from __future__ import annotations

import pyarrow as pa

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
