"""The verifier: what counts as the same answer, and what does not."""

from __future__ import annotations

import datetime as dt

import polars as pl

from tickbench.verify import compare, normalize

TS = pl.Datetime("ns", "UTC")


def _ref() -> pl.DataFrame:
    return pl.DataFrame({
        "bucket": pl.Series([0, 60_000_000_000], dtype=pl.Int64).cast(TS),
        "vwap": [100.25, 100.5],
    })


def test_identical_and_within_tolerance_pass() -> None:
    ref = _ref()
    assert compare(ref, ref).ok
    near = ref.with_columns(pl.col("vwap") * (1 + 1e-9))
    assert compare(near, ref).ok


def test_float_beyond_tolerance_fails_and_names_the_cell() -> None:
    ref = _ref()
    off = ref.with_columns(pl.Series("vwap", [100.25, 100.5 * (1 + 1e-5)]))
    v = compare(off, ref)
    assert not v.ok and "vwap row 1" in v.reason


def test_order_columns_and_rows_matter() -> None:
    ref = _ref()
    assert not compare(ref.select("vwap", "bucket"), ref).ok
    assert not compare(ref.reverse(), ref).ok
    assert not compare(ref.head(1), ref).ok
    assert not compare(ref.rename({"vwap": "VWAP"}), ref).ok


def test_normalize_accepts_other_time_units_zones_and_dates() -> None:
    ref = _ref()
    naive_us = pl.DataFrame({
        "bucket": [dt.datetime(1970, 1, 1), dt.datetime(1970, 1, 1, 0, 1)],
        "vwap": [100.25, 100.5],
    })
    assert compare(normalize(naive_us, ref), ref).ok
    day_ref = pl.DataFrame({"day": pl.Series([0], dtype=pl.Int64).cast(TS), "v": [1.0]})
    as_date = pl.DataFrame({"day": [dt.date(1970, 1, 1)], "v": [1]})
    assert compare(normalize(as_date, day_ref), day_ref).ok


def test_wrong_timestamp_fails() -> None:
    ref = _ref()
    shifted = ref.with_columns(pl.col("bucket").dt.offset_by("1m"))
    assert not compare(shifted, ref).ok


def _with_nulls() -> pl.DataFrame:
    return pl.DataFrame({"sym": ["A", "B", None], "n": [3, None, 1], "sd": [0.5, None, 2.0],
                         "day": [dt.date(2024, 1, 2), dt.date(2024, 1, 3), None]},
                        schema={"sym": pl.String, "n": pl.Int64, "sd": pl.Float64, "day": pl.Date})


def test_nulls_verify_only_against_nulls() -> None:
    ref = _with_nulls()
    assert compare(ref, ref).ok
    for col, value in (("sym", "B"), ("n", 0), ("sd", 0.0), ("day", dt.date(2024, 1, 4))):
        filled = ref.with_columns(pl.col(col).fill_null(value))
        v = compare(filled, ref)
        assert not v.ok and f"column {col}" in v.reason and "nulls" in v.reason, col
        v = compare(ref, filled)  # a null where the reference has a value
        assert not v.ok and "nulls" in v.reason, col


def test_nan_is_not_a_null() -> None:
    ref = _with_nulls()
    nan = ref.with_columns(pl.col("sd").fill_null(float("nan")))
    assert not compare(nan, ref).ok
    assert not compare(ref, nan).ok


def test_normalize_counts_of_any_integer_width_and_dates_as_midnights() -> None:
    ref = _with_nulls()
    other = ref.with_columns(pl.col("n").cast(pl.UInt32),
                             pl.col("day").cast(pl.Datetime("us")))  # naive midnight = UTC
    assert compare(normalize(other, ref), ref).ok
    not_midnight = ref.with_columns(pl.col("day").cast(pl.Datetime("us")).dt.offset_by("1h"))
    assert not compare(normalize(not_midnight, ref), ref).ok
