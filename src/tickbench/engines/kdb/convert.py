"""Arrow tables into q, for the kdb+ adapter and its market module (q to Arrow stays in the
adapter, beside the query path)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa


def to_q(kx: Any, table: pa.Table) -> Any:
    """An Arrow table (the dataset's schema) as a q table: timestamps as q timestamps, strings
    as symbols (through a dictionary, so each distinct string is interned once)."""
    cols: dict[str, Any] = {}
    for name, col in zip(table.column_names, table.columns, strict=True):
        arr = col.combine_chunks()
        if pa.types.is_timestamp(arr.type):
            ns = arr.cast(pa.int64()).to_numpy(zero_copy_only=False)
            cols[name] = kx.toq(ns.view("datetime64[ns]"))
        elif pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
            enc = arr.dictionary_encode()
            words = kx.toq(enc.dictionary.to_numpy(zero_copy_only=False), kx.SymbolVector)
            cols[name] = kx.q("{x y}", words, kx.toq(enc.indices.to_numpy(zero_copy_only=False)))
        else:
            cols[name] = kx.toq(arr.to_numpy(zero_copy_only=False))
    return kx.q("{flip x}", kx.toq(cols))
