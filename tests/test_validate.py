"""`tickbench validate`: a clean dataset passes; each broken invariant is reported with its row."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tickbench.cli import app
from tickbench.datasets.base import import_dataset, validate
from tickbench.datasets.paper import validate as v

FIXTURES = Path(__file__).parent / "fixtures" / "tardis"
SNAPSHOTS = FIXTURES / "coinbase_book_snapshot_25_2022-06-18_BTC-USD.csv"
TRADES = FIXTURES / "coinbase_trades_2022-06-18_BTC-USD.csv"
BOOK_PART = "book/2022-06-18/COINBASE__BTC-USD.parquet"


def test_generated_dataset_is_valid(tiny_dir: Path) -> None:
    report = validate(tiny_dir)
    assert report.ok, [s.describe() for s in report.samples]
    assert report.files == 216 and report.rows > 500_000


@pytest.fixture
def imported(tmp_path: Path) -> Path:
    out = tmp_path / "ds"
    import_dataset("tardis", [SNAPSHOTS, TRADES], out)
    return out


def _rewrite(root: Path, rel: str, df: pl.DataFrame) -> None:
    path = root / rel
    schema = pq.read_schema(path)
    pq.write_table(df.to_arrow().cast(schema), path)


def test_imported_dataset_is_valid(imported: Path) -> None:
    assert validate(imported).ok


def test_each_broken_book_invariant_is_reported_with_its_row(imported: Path) -> None:
    good = pl.read_parquet(imported / BOOK_PART)  # 3 snapshots, 1 ms apart
    row = good.row(0, named=True)
    us = pl.duration(nanoseconds=1_000, time_unit="ns")
    rows = [
        good.slice(0, 1),
        good.slice(1, 1).with_columns(a1price=pl.lit(row["b1price"] - 1.0)),  # 1: crossed
        good.slice(2, 1).with_columns(a3price=pl.col("a2price")),  # 2: asks not increasing
        good.slice(0, 1).with_columns(pl.col("ts") - us),  # 3: time goes backwards
        good.slice(2, 1),  # 4: ok
        good.slice(2, 1),  # 5: duplicate ts
        good.slice(2, 1).with_columns(pl.col("ts") + us, b7size=pl.lit(0.0)),  # 6: size 0
    ]
    _rewrite(imported, BOOK_PART, pl.concat(rows))
    report = validate(imported)
    found = {(s.file, s.row): s.reason for s in report.samples}
    assert found[(BOOK_PART, 1)] == v.CROSSED
    assert found[(BOOK_PART, 2)] == v.ASKS_UNSORTED
    assert found[(BOOK_PART, 3)] == v.BACKWARDS
    assert found[(BOOK_PART, 5)] == v.DUPLICATE_TS
    assert found[(BOOK_PART, 6)] == v.SIZE_NOT_POSITIVE
    assert (BOOK_PART, 0) not in found and (BOOK_PART, 4) not in found
    assert report.counts[v.HASH_MISMATCH] == 1  # the file no longer matches its manifest
    crossed = next(s for s in report.samples if s.reason == v.CROSSED)
    assert crossed.values["a1price"] == row["b1price"] - 1.0
    asks = next(s for s in report.samples if s.reason == v.ASKS_UNSORTED)
    assert set(asks.values) >= {"a2price", "a3price"}


def test_broken_trades_are_reported(imported: Path) -> None:
    day1 = "trades/2022-06-18/COINBASE__BTC-USD.parquet"
    day2 = "trades/2022-06-19/COINBASE__BTC-USD.parquet"
    t1 = pl.read_parquet(imported / day1)
    _rewrite(imported, day1, t1.with_columns(
        side=pl.when(pl.int_range(pl.len()) == 1).then(pl.lit("hold")).otherwise("side"),
        amount=pl.when(pl.int_range(pl.len()) == 2).then(pl.lit(-1.0)).otherwise("amount")))
    _rewrite(imported, day2, pl.read_parquet(imported / day2).with_columns(trade_id=pl.lit(t1["trade_id"][0])))
    found = {(s.file, s.row): s.reason for s in validate(imported).samples}
    assert found[(day1, 1)] == v.BAD_SIDE
    assert found[(day1, 2)] == v.AMOUNT_NOT_POSITIVE
    assert found[(day2, 0)] == v.DUPLICATE_ID  # the same id on the day before


def test_cli_exit_codes(imported: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["validate", str(imported)])
    assert res.exit_code == 0 and "valid" in res.output
    broken = tmp_path / "broken"
    shutil.copytree(imported, broken)
    good = pl.read_parquet(broken / BOOK_PART)
    _rewrite(broken, BOOK_PART, good.with_columns(a1price=pl.col("b1price")))
    res = runner.invoke(app, ["validate", str(broken)])
    assert res.exit_code == 1
    assert "crossed book" in res.output and f"{BOOK_PART} row 0" in res.output
    assert runner.invoke(app, ["validate", str(tmp_path / "nothing")]).exit_code == 2
    (broken / "manifest.json").write_text("{")
    assert runner.invoke(app, ["validate", str(broken)]).exit_code == 2
