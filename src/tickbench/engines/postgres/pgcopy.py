"""PostgreSQL's binary COPY format written from Arrow with numpy, and query results read into
Arrow, for the PostgreSQL adapter.

Binary COPY skips the server's text parsing of every float (``float8in``), the largest cost of
a text COPY of the 80-float book rows. A tuple is ``int16 field count`` then, per field,
``int32 byte length`` and the value in network byte order; a run of rows whose string fields
all have the same lengths therefore has one fixed layout, which a numpy structured array fills
column by column with no per-row Python.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tickbench.datasets.paper.schema import SCHEMAS

HEADER = b"PGCOPY\n\xff\r\n\x00" + (0).to_bytes(4, "big") + (0).to_bytes(4, "big")
TRAILER = (-1).to_bytes(2, "big", signed=True)
# PostgreSQL's timestamps count microseconds from 2000-01-01 00:00:00 UTC.
PG_EPOCH_US = 946_684_800_000_000


def encodable(table: pa.Table) -> bool:
    """Whether :func:`encode` handles ``table``: no nulls, and only timestamps, float64,
    int64 and strings (the tickbench schema); anything else goes through text COPY."""
    for f, col in zip(table.schema, table.columns, strict=True):
        if col.null_count:
            return False
        t = f.type
        if not (pa.types.is_timestamp(t) or pa.types.is_float64(t) or pa.types.is_int64(t)
                or pa.types.is_string(t) or pa.types.is_large_string(t)):
            return False
    return True


def encode(table: pa.Table) -> Iterator[bytes]:
    """The rows of ``table`` as binary COPY tuples (no header or trailer), in chunks.

    Rows are grouped by the byte lengths of their string fields (one group per layout, e.g.
    trades' ``buy``/``sell``); each group keeps the rows' order.
    """
    table = table.combine_chunks()
    strings = [i for i, f in enumerate(table.schema)
               if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
    if not strings or table.num_rows == 0:
        yield _encode_fixed(table)
        return
    lengths = [pc.binary_length(table.column(i)).to_numpy().astype(np.int64) for i in strings]
    if all(n.min() == n.max() for n in lengths):
        yield _encode_fixed(table)
        return
    key = np.zeros(table.num_rows, dtype=np.int64)
    for n in lengths:  # one integer per layout (a string field is shorter than 2**16 bytes here)
        key = (key << 16) | n
    for layout in np.unique(key):
        yield _encode_fixed(table.take(pa.array(np.flatnonzero(key == layout))))


def _encode_fixed(table: pa.Table) -> bytes:
    """Binary COPY tuples of ``table``, whose string fields each have one length throughout."""
    n = table.num_rows
    fields: list[tuple[str, str]] = [("n", ">i2")]
    values: list[tuple[str, np.ndarray[Any, Any], int]] = []
    for i, (f, col) in enumerate(zip(table.schema, table.columns, strict=True)):
        arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        if pa.types.is_timestamp(f.type):
            unit = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": 1}[f.type.unit]
            raw = arr.cast(pa.int64()).to_numpy()
            # The data are whole microseconds, so ns // 1000 drops nothing.
            us = raw // 1_000 if f.type.unit == "ns" else raw * unit
            data, width, code = us - PG_EPOCH_US, 8, ">i8"
        elif pa.types.is_float64(f.type):
            data, width, code = arr.to_numpy(), 8, ">f8"
        elif pa.types.is_int64(f.type):
            data, width, code = arr.to_numpy(), 8, ">i8"
        else:
            data, width = _string_bytes(arr, n)
            code = f"S{width}"
        fields.append((f"l{i}", ">i4"))
        if width:
            fields.append((f"v{i}", code))
        values.append((f"v{i}", data, width))
    rec = np.empty(n, dtype=np.dtype(fields))
    rec["n"] = table.num_columns
    for i, (name, data, width) in enumerate(values):
        rec[f"l{i}"] = width
        if width:
            rec[name] = data
    return rec.tobytes()


def _string_bytes(arr: pa.Array, n: int) -> tuple[np.ndarray[Any, Any], int]:
    """The values of a string array whose strings all have one byte length, as an
    ``(n,)`` array of fixed-width bytes, and that width."""
    arr = arr.cast(pa.large_string())
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=n + 1, offset=arr.offset * 8)
    width = int(offsets[1] - offsets[0]) if n else 0
    if width == 0:
        return np.empty(0, dtype="S1"), 0
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8, count=n * width, offset=int(offsets[0]))
    return data.view(f"S{width}"), width


# -- query results ----------------------------------------------------------------------------

# Arrow types of the PostgreSQL type OIDs a query can return.
ARROW_TYPES: dict[int, pa.DataType] = {
    1184: pa.timestamp("us", tz="UTC"),  # timestamptz (the session's TimeZone is UTC)
    1114: pa.timestamp("us"),  # timestamp
    1082: pa.date32(),
    701: pa.float64(),
    700: pa.float32(),
    20: pa.int64(),
    23: pa.int32(),
    21: pa.int16(),
    25: pa.string(),  # text
    1043: pa.string(),  # varchar
}


def to_arrow(names: list[str], oids: list[int], rows: list[tuple[Any, ...]]) -> pa.Table:
    """A result set (column names, type OIDs, rows) as an Arrow table."""
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in names]
    arrays = []
    for oid, values in zip(oids, columns, strict=True):
        # Aware datetimes are converted to UTC by Arrow itself.
        arrays.append(pa.array(values, type=ARROW_TYPES.get(oid)))
    return pa.table(arrays, names=names)


def result_arrow(table: str | None, cur: psycopg.Cursor[Any]) -> pa.Table:
    """A result set as Arrow: ``table``'s SPEC schema (``ts`` in ns) when given."""
    if cur.description is None:
        raise RuntimeError("the query returned no result set")
    names = [d.name for d in cur.description]
    out = to_arrow(names, [d.type_code for d in cur.description], cur.fetchall())
    return out.cast(SCHEMAS[table]) if table is not None else out


def parquet_chunks(files: list[Path]) -> Callable[[], Iterator[bytes]]:
    """Binary COPY data of the Parquet ``files``, in file order (a stream per COPY: a callable,
    so a retried COPY starts it again)."""
    def chunks() -> Iterator[bytes]:
        yield HEADER
        for f in files:
            data = pq.read_table(f)
            if not encodable(data):
                raise RuntimeError(f"{f}: nulls or unexpected types; binary COPY needs the SPEC schema")
            yield from encode(data)
        yield TRAILER
    return chunks
