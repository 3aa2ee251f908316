"""`tickbench validate` on a market dataset (SPEC §1.3): a generated one passes; each broken
invariant is reported with its file and row."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
from typer.testing import CliRunner

from tests.market_fixtures import D, at, write_market
from tickbench.cli import app
from tickbench.data.dataset import Dataset
from tickbench.datasets.base import validate
from tickbench.datasets.market import validate as mv
from tickbench.datasets.paper import validate as v

FIRST = "2024-01-02"


def test_generated_market_dataset_is_valid(market_tiny: Dataset) -> None:
    report = validate(market_tiny.root)
    assert report.ok, [s.describe() for s in report.samples]
    parts = len(market_tiny.manifest.partitions)
    assert report.files == parts and report.spec == "SPEC §1.3"
    assert report.rows == sum(p["rows"] for p in market_tiny.manifest.partitions)


def test_each_broken_quote_and_trade_invariant_is_reported(tmp_path: Path) -> None:
    t = at(D, "15:00:00")
    quotes = [
        (t, "XNAS", "A", 10.00, 10.01, 100.0, 100.0, 1),
        (t + 1, "XNAS", "A", 10.01, 10.01, 100.0, 100.0, 2),  # locked within one venue
        (t + 2, "XNAS", "A", 10.00, 10.01, 0.0, 100.0, 3),  # size 0
        (t + 3, "XNAS", "A", 10.005, 10.01, 100.0, 100.0, 4),  # off the tick grid
        (t + 4, "XNAS", "A", 10.00, 10.01, 100.5, 100.0, 10),  # off the lot grid
        (t + 5, "XNAS", "A", 10.00, 10.01, 100.0, 100.0, 6),
        (t + 6, "XNAS", "A", 10.00, 10.01, 100.0, 100.0, 6),  # seq not increasing
        (at(D, "21:00:00"), "XNAS", "A", 10.00, 10.01, 100.0, 100.0, 9),  # at the close: outside the session
        (t, "XNAS", "Q", 10.00, 10.01, 100.0, 100.0, 1),  # not an instrument
        (at(FIRST, "15:00:00"), "XNAS", "B", 10.00, 10.01, 100.0, 100.0, 7),  # day 1: B's seq 7 ...
        (t, "XNAS", "B", 10.00, 10.01, 100.0, 100.0, 1),  # ... then seq 1 on D: not increasing
        (t + 1, "XNAS", "B", -1.0, 10.01, 100.0, 100.0, 8),  # price not > 0
    ]
    trades = [
        (t + 10, "XNAS", "A", "buy", 10.01, 100.0, 1),
        (t + 11, "XNAS", "A", "hold", 10.01, 100.0, 2),  # bad side
        (t + 12, "XNAS", "A", "buy", 10.01, -5.0, 3),  # amount not > 0
        (t + 13, "XNAS", "A", "buy", 10.01, 5.0, 1),  # trade_id not increasing
        (t + 14, "BATS", "A", "sell", 10.00, 5.0, 1),  # BATS never quotes A
        (at(FIRST, "15:00:00"), "XNAS", "B", "buy", 10.01, 5.0, 4),
        (t, "XNAS", "B", "buy", 10.01, 5.0, 4),  # the same id as on day 1
    ]
    ds = write_market(tmp_path / "ds", ["A", "B"], [q for q in quotes if q[2] != "Q"], trades)
    # Q is written by hand into D's part file.
    rel = f"quotes/{D}/block-0.parquet"
    part = pl.read_parquet(ds.root / rel)
    row = dict(zip(part.columns, quotes[8], strict=True))
    extra = pl.DataFrame([row]).with_columns(pl.col("ts").cast(pl.Datetime("ns", "UTC"))).cast(dict(part.schema))
    pq.write_table(pl.concat([part, extra]).to_arrow(), ds.root / rel)
    report = validate(ds.root)
    reasons = {(s.file, s.values.get("sym"), s.values.get("seq", s.values.get("trade_id"))): s.reason
               for s in report.samples}
    q, tr = rel, f"trades/{D}/block-0.parquet"
    assert reasons[(q, "A", 2)] == mv.VENUE_CROSSED
    assert reasons[(q, "A", 3)] == v.SIZE_NOT_POSITIVE
    assert reasons[(q, "A", 4)] == mv.OFF_TICK
    assert reasons[(q, "A", 10)] == mv.OFF_LOT
    assert reasons[(q, "A", 6)] == mv.SEQ_NOT_INCREASING
    assert reasons[(q, "A", 9)] == mv.OUTSIDE_SESSION
    assert reasons[(q, "B", 1)] == mv.SEQ_NOT_INCREASING  # below the day before's 7
    assert reasons[(q, "B", 8)] == mv.PRICE_NOT_POSITIVE
    assert reasons[(q, "Q", 1)] == mv.UNKNOWN_SYM
    assert reasons[(tr, "A", 2)] == v.BAD_SIDE
    assert reasons[(tr, "A", 3)] == v.AMOUNT_NOT_POSITIVE
    assert reasons[(tr, "A", 1)] == v.ID_NOT_INCREASING
    assert reasons[(tr, "B", 4)] == v.ID_NOT_INCREASING  # the same id as the day before
    assert report.counts[mv.SEQ_NOT_INCREASING] == 2 and report.counts[v.ID_NOT_INCREASING] == 2
    assert report.counts[mv.TRADE_WITHOUT_QUOTES] == 1
    assert report.counts[v.HASH_MISMATCH] == 1  # the rewritten part file
    assert not report.counts[v.BACKWARDS]


def test_time_going_backwards_and_rows_outside_their_block(tmp_path: Path) -> None:
    t = at(D, "15:00:00")
    ds = write_market(tmp_path / "ds", ["A", "B"], [
        (t, "XNAS", "A", 10.00, 10.01, 100.0, 100.0, 1), (t + 5, "XNAS", "A", 10.00, 10.01, 100.0, 100.0, 2)])
    rel = f"quotes/{D}/block-0.parquet"
    part = pl.read_parquet(ds.root / rel)
    pq.write_table(part.reverse().to_arrow(), ds.root / rel)  # seq 2 before seq 1, ts going backwards
    found = {s.values["seq"]: s.reason for s in validate(ds.root).samples if s.file == rel and "seq" in s.values}
    assert found == {1: v.BACKWARDS}
    entry = next(e for e in ds.manifest.partitions if e["path"] == rel)
    assert entry["syms"] == ["A", "B"]


def test_instruments_table_must_match_the_data(tmp_path: Path) -> None:
    t = at(D, "15:00:00")
    ds = write_market(tmp_path / "ds", ["A", "B", "C"], [
        (t, "XNAS", "A", 10.00, 10.01, 100.0, 100.0, 1), (t, "BATS", "A", 10.00, 10.01, 100.0, 100.0, 1)])
    inst = pl.read_parquet(ds.root / "instruments.parquet").with_columns(
        venues=pl.when(pl.col("sym") == "A").then(3).otherwise("venues").cast(pl.Int32),
        rank=pl.when(pl.col("sym") == "C").then(2).otherwise("rank").cast(pl.Int32))
    pq.write_table(inst.to_arrow(), ds.root / "instruments.parquet")
    report = validate(ds.root)
    assert report.counts[mv.VENUES_MISMATCH] == 1  # A: quoted on 2 venues, the table says 3
    mismatch = next(s for s in report.samples if s.reason == mv.VENUES_MISMATCH)
    assert mismatch.values == {"sym": "A", "venues": 3, "quoted_on": ["BATS", "XNAS"]}
    assert any(s.reason == mv.BAD_INSTRUMENT and "ranks" in s.values["problem"] for s in report.samples)


def test_cli_on_a_market_dataset(market_tiny: Dataset, tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["validate", str(market_tiny.root)])
    assert res.exit_code == 0 and "every invariant of SPEC §1.3 holds" in res.output
    broken = tmp_path / "broken"
    shutil.copytree(market_tiny.root, broken)
    rel = f"quotes/{D}/block-0.parquet"
    part = pl.read_parquet(broken / rel)
    pq.write_table(part.with_columns(ask=pl.col("bid")).to_arrow(), broken / rel)
    res = runner.invoke(app, ["validate", str(broken), "--show", "3"])
    assert res.exit_code == 1 and mv.VENUE_CROSSED in res.output and f"{rel} row 0" in res.output
