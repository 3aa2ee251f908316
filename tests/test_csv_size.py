"""The manifest's CSV sizes and the bulk-load CSV's timestamps are computed without the CSV
writer's formatting (it was the generator's largest cost); they must equal the writer's, byte
for byte, on the generated data and on values the generator never makes."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from tickbench.data.dataset import CSV_OPTIONS, Dataset, _ts_text, csv_size
from tickbench.data.schema import TS_TYPE


def _written(table: pa.Table) -> int:
    sink = io.BytesIO()
    pacsv.write_csv(table, sink, CSV_OPTIONS)
    return len(sink.getvalue())


def test_every_tiny_partition_has_the_writers_size(tiny: Dataset) -> None:
    for entry in tiny.manifest.partitions:
        table = pq.read_table(tiny.root / entry["path"])
        assert entry["csv_bytes"] == csv_size(table) == _written(table), entry["path"]


@pytest.mark.parametrize("decimals", range(0, 11))
def test_floats_on_any_decimal_grid_and_magnitude(decimals: int) -> None:
    rng = np.random.default_rng(decimals)
    for magnitude in (1e-9, 1e-6, 1e-3, 1.0, 1e3, 1e6, 1e9, 1e12):
        v = np.rint(rng.lognormal(0, 3, 3000) * magnitude * 10**decimals) / 10**decimals
        v[::7] *= -1
        table = pa.table({"v": v, "i": rng.integers(-(10**12), 10**12, v.size),
                          "s": np.where(v > 0, "buy", "sell")})
        assert csv_size(table) == _written(table), magnitude


@pytest.mark.parametrize("value", [0.0, -0.0, 1e-6, 9.99e-7, 1e7, 1e10, 123456789.125, 0.1 + 0.2,
                                   float("nan"), float("inf"), -float("inf"), 5e-324, 1.7e308])
def test_edge_values(value: float) -> None:
    for values in ([value], [value, 1.25, 30000.0], [1.25] * 3 + [value]):
        table = pa.table({"v": pa.array(values, pa.float64())})
        assert csv_size(table) == _written(table), values


def test_arbitrary_floats_and_empty_tables() -> None:
    table = pa.table({"v": np.random.default_rng(1).standard_normal(5000)})
    assert csv_size(table) == _written(table)
    assert csv_size(table.slice(0, 0)) == _written(table.slice(0, 0))


def test_timestamps_as_the_writer_writes_them() -> None:
    rng = np.random.default_rng(3)
    ns = np.sort(rng.integers(0, 4_000_000_000_000_000_000, 5000))
    ns[:3] = [0, 1, 86_399_999_999_999]
    column = pa.array(ns, pa.int64()).view(TS_TYPE)
    table = pa.table({"ts": column, "x": np.arange(ns.size)})
    assert csv_size(table) == _written(table)
    text = pa.table({"ts": _ts_text(ns), "x": np.arange(ns.size)})
    sink_a, sink_b = io.BytesIO(), io.BytesIO()
    pacsv.write_csv(table, sink_a, CSV_OPTIONS)
    pacsv.write_csv(text, sink_b, CSV_OPTIONS)
    assert sink_a.getvalue() == sink_b.getvalue()
