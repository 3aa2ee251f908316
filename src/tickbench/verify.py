"""Compare an engine's answer with the reference (SPEC §3).

Same column names in the same order, same number of rows in the same order, equal keys and
timestamps, floats within a relative 1e-6 (with an absolute floor of 1e-12 for values that are
zero up to rounding, such as a return between two equal prices). A null verifies only against a
null, in any column (a NaN is not a null).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

REL_TOL = 1e-6
ABS_FLOOR = 1e-12
TS = pl.Datetime("ns", "UTC")


@dataclass(frozen=True)
class Verdict:
    """The outcome of one comparison; ``reason`` names the first difference."""

    ok: bool
    reason: str = ""


def normalize(answer: pl.DataFrame, like: pl.DataFrame) -> pl.DataFrame:
    """Cast the engine's columns to the reference's types where the values allow it.

    Engines return timestamps in their own unit and zone (naive ones are UTC by tickbench's
    convention), dates for day buckets, midnight timestamps for dates, decimals or integers for
    sums, counts of any integer width: these are representations, not differences, so they are
    unified before comparing. Nulls are left as they are: they verify only against nulls. An
    answer with no rows (nothing to read: a book-only capture's trades) takes the reference's
    types: an engine that builds columns from the values it receives (InfluxDB's JSON) has none
    to go by.
    """
    casts = []
    for name, col in zip(answer.columns, answer.get_columns(), strict=True):
        target = like.schema.get(name)
        if target is None:
            casts.append(col)
            continue
        if col.len() == 0:
            col = pl.Series(name, [], dtype=target)
        elif target == TS:
            if isinstance(col.dtype, pl.Datetime):
                col = col.dt.replace_time_zone("UTC") if col.dtype.time_zone is None else col
                col = col.dt.convert_time_zone("UTC").dt.cast_time_unit("ns")
            elif col.dtype == pl.Date:
                col = col.cast(pl.Datetime("ns")).dt.replace_time_zone("UTC")
        elif target == pl.Float64 and col.dtype.is_numeric():
            col = col.cast(pl.Float64)
        elif target == pl.Int64 and col.dtype.is_integer():
            col = col.cast(pl.Int64, strict=False)  # a count as UInt64 or Int32; out of range becomes null: differs
        elif target == pl.Date and isinstance(col.dtype, pl.Datetime):
            utc = col.dt.replace_time_zone("UTC") if col.dtype.time_zone is None else col.dt.convert_time_zone("UTC")
            if (utc.dt.truncate("1d") == utc).all():  # midnight: a date as a timestamp; anything else differs
                col = utc.dt.date()
        elif target == pl.String and col.dtype in (pl.Categorical, pl.Enum):
            col = col.cast(pl.String)
        casts.append(col)
    return pl.DataFrame(casts)


def compare(answer: pl.DataFrame, expected: pl.DataFrame) -> Verdict:
    """Check ``answer`` against ``expected`` (the reference answer)."""
    if answer.columns != expected.columns:
        return Verdict(False, f"columns {answer.columns} != expected {expected.columns}")
    if answer.height != expected.height:
        return Verdict(False, f"{answer.height} rows, expected {expected.height}")
    for name in expected.columns:
        got, want = answer[name], expected[name]
        if got.dtype != want.dtype:
            return Verdict(False, f"column {name}: type {got.dtype}, expected {want.dtype}")
        if got.null_count() != want.null_count() or not (got.is_null() == want.is_null()).all():
            return Verdict(False, f"column {name}: nulls differ")
        if want.dtype == pl.Float64:
            g, w = got.to_numpy(), want.to_numpy()
            bad = ~(np.isclose(g, w, rtol=REL_TOL, atol=ABS_FLOOR, equal_nan=True))
            if bad.any():
                i = int(np.argmax(bad))
                return Verdict(False, f"column {name} row {i}: {g[i]!r} != expected {w[i]!r}")
        else:
            diff = got.ne_missing(want)
            if diff.any():
                i = int(diff.arg_max() or 0)
                return Verdict(False, f"column {name} row {i}: {got[i]!r} != expected {want[i]!r}")
    return Verdict(True)
