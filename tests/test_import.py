"""Importers of real data: the published layouts, the policies, the round trip, bounded memory."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tickbench.cli import app
from tickbench.data.dataset import Dataset, DatasetError, combine_hashes
from tickbench.data.importers import ImportFailure
from tickbench.datasets.base import import_dataset, open_dataset, validate
from tickbench.datasets.paper import validate as v

FIX = Path(__file__).parent / "fixtures"
TARDIS = FIX / "tardis"
TRADES = TARDIS / "coinbase_trades_2022-06-18_BTC-USD.csv"
SNAPSHOTS = TARDIS / "coinbase_book_snapshot_25_2022-06-18_BTC-USD.csv"
INCREMENTAL = TARDIS / "coinbase_incremental_book_L2_2022-06-18_BTC-USD.csv"
BAD = TARDIS / "bad" / "coinbase_book_snapshot_25_2022-06-18_BTC-USD.csv"
LOBSTER = FIX / "lobster"
T0 = dt.datetime(2022, 6, 18, tzinfo=dt.UTC)


def _book(out: Path, day: str = "2022-06-18", name: str = "COINBASE__BTC-USD") -> pl.DataFrame:
    return pl.read_parquet(out / "book" / day / f"{name}.parquet")


def _trades(out: Path, day: str = "2022-06-18", name: str = "COINBASE__BTC-USD") -> pl.DataFrame:
    return pl.read_parquet(out / "trades" / day / f"{name}.parquet")


def test_tardis_trades_and_snapshots(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    res = import_dataset("tardis", [TRADES, SNAPSHOTS], out)
    m = res.manifest
    assert m.source == "import:tardis" and res.dropped == {}
    assert {p["path"]: p["rows"] for p in m.partitions} == {
        "book/2022-06-18/COINBASE__BTC-USD.parquet": 3, "book/2022-06-19/COINBASE__BTC-USD.parquet": 1,
        "trades/2022-06-18/COINBASE__BTC-USD.parquet": 4, "trades/2022-06-19/COINBASE__BTC-USD.parquet": 1,
    }
    t = _trades(out)
    assert t.row(1) == (T0 + dt.timedelta(microseconds=1500), "COINBASE", "BTC-USD", "sell", 19999.5, 0.25, 1002)
    b = _book(out)
    assert b.columns[:5] == ["ts", "exchange", "sym", "b1price", "b1size"]
    r = b.row(2, named=True)  # the shallower snapshot: 22 bid / 21 ask levels, the top 20 kept
    assert (r["b1price"], r["b20price"], r["a1price"], r["a20size"]) == (20000.5, 19991.0, 20001.5, 4.0)
    assert m.params == {"day": "2022-06-18", "week": ["2022-06-18", "2022-06-19"],
                        "month": ["2022-06-18", "2022-06-19"], "symbol": "BTC-USD",
                        "multi_day": "2022-06-18", "bulk_day": "2022-06-18"}
    assert open_dataset(out, verify_content=True).csv_file("book").read_text().count("\n") == 1 + 3
    assert validate(out).ok


def test_gzip_input_gives_the_same_dataset(tmp_path: Path) -> None:
    gz = tmp_path / (TRADES.name + ".gz")
    gz.write_bytes(gzip.compress(TRADES.read_bytes()))
    a = import_dataset("tardis", [TRADES], tmp_path / "a").manifest.content_hash
    assert import_dataset("tardis", [gz], tmp_path / "b").manifest.content_hash == a


def test_tardis_incremental_book_is_rebuilt_and_sampled(tmp_path: Path) -> None:
    res = import_dataset("tardis", [INCREMENTAL], tmp_path / "every", sample=1)
    b = _book(tmp_path / "every")
    assert b.height == 5  # the snapshot message and four updates
    assert res.manifest.extra["import"]["skipped_before_first_snapshot"] == {INCREMENTAL.name: 1}
    assert b["b1size"].to_list()[:2] == [0.1, 0.7]
    assert (b["a1price"][2], b["a1size"][2], b["a20price"][2]) == (20000.75, 0.4, 20010.0)
    assert b["b1price"].to_list() == [19999.5, 19999.5, 19999.5, 19999.75, 19999.5]
    assert b["ts"][1] == T0 + dt.timedelta(microseconds=1000)
    import_dataset("tardis", [INCREMENTAL], tmp_path / "half", sample=2)
    half = _book(tmp_path / "half")
    assert half["ts"].to_list() == b["ts"].to_list()[1::2]
    assert half.equals(b[1::2])


def test_policy_fail_names_the_row_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(ImportFailure) as exc:
        import_dataset("tardis", [BAD], tmp_path / "ds")
    assert exc.value.violation.row == 1 and exc.value.violation.reason == v.CROSSED
    assert BAD.name in str(exc.value) and "row 1" in str(exc.value)
    assert list(tmp_path.iterdir()) == []  # neither the dataset nor its staging directory


def test_policy_drop_counts_each_reason(tmp_path: Path) -> None:
    res = import_dataset("tardis", [BAD], tmp_path / "ds", policy="drop")
    assert res.dropped == {v.CROSSED: 1, v.BIDS_UNSORTED: 1, v.BACKWARDS: 1, v.DUPLICATE_TS: 1, v.MISSING_LEVEL: 1}
    assert res.manifest.extra["import"]["dropped"] == res.dropped
    b = _book(tmp_path / "ds")
    assert [t.microsecond for t in b["ts"]] == [10, 40, 50, 70]  # rows 0, 3, 5, 8
    assert validate(tmp_path / "ds").ok


def test_cryptofeed_csv_and_parquet(tmp_path: Path) -> None:
    files = [FIX / "cryptofeed" / "trades.csv", FIX / "cryptofeed" / "book.csv"]
    res = import_dataset("cryptofeed", files, tmp_path / "csv", sample=1)
    assert res.manifest.source == "import:cryptofeed"
    t = _trades(tmp_path / "csv", name="COINBASE__ETH-USD")
    assert t["ts"][0] == T0 + dt.timedelta(seconds=1, microseconds=123)
    assert t.row(1)[3:] == ("sell", 1099.99, 1.25, 555002)
    assert _trades(tmp_path / "csv", name="BINANCEUS__ETH-USD")["trade_id"].to_list() == [777]
    b = _book(tmp_path / "csv", name="COINBASE__ETH-USD")
    assert b.height == 3
    assert (b["a1price"][1], b["a1size"][1]) == (1100.5, 3.0)
    assert (b["b1price"][2], b["b20price"][2], b["b20size"][2]) == (1099.0, 1089.5, 9.0)
    pq_files = []
    for f in files:
        dest = tmp_path / f.with_suffix(".parquet").name
        pq.write_table(pacsv.read_csv(f), dest)
        pq_files.append(dest)
    again = import_dataset("cryptofeed", pq_files, tmp_path / "parquet", sample=1)
    assert again.manifest.content_hash == res.manifest.content_hash


def test_sequence_trade_ids(tmp_path: Path) -> None:
    guid = tmp_path / "guid.csv"
    lines = TRADES.read_text().splitlines()
    guid.write_text("\n".join([lines[0]] + [ln.replace(",100", ",ab-100") for ln in lines[1:]]) + "\n")
    with pytest.raises(ImportFailure, match="--trade-ids sequence"):
        import_dataset("tardis", [guid], tmp_path / "a")
    import_dataset("tardis", [guid], tmp_path / "b", trade_ids="sequence")
    assert _trades(tmp_path / "b")["trade_id"].to_list() == [1, 2, 3, 4]
    assert _trades(tmp_path / "b", day="2022-06-19")["trade_id"].to_list() == [5]


def test_lobster(tmp_path: Path) -> None:
    files = sorted(LOBSTER.glob("*_20.csv"))
    with pytest.raises(ImportFailure) as exc:  # every row: two messages share the first timestamp
        import_dataset("lobster", files, tmp_path / "every", sample=1)
    assert exc.value.violation.row == 1 and exc.value.violation.reason == v.DUPLICATE_TS
    import_dataset("lobster", files, tmp_path / "ds", sample=2)
    out = tmp_path / "ds"
    t = _trades(out, "2012-06-21", "NASDAQ__TEST")
    open_utc = dt.datetime(2012, 6, 21, 13, 30, tzinfo=dt.UTC)  # 9:30 in New York (EDT)
    day_ids = (dt.date(2012, 6, 21) - dt.date(1970, 1, 1)).days * 10**10
    assert t.row(0) == (open_utc + dt.timedelta(microseconds=500_000), "NASDAQ", "TEST", "buy", 120.05, 50.0,
                        day_ids + 2)
    assert t.row(1)[3:] == ("sell", 120.02, 30.0, day_ids + 4)
    assert pl.read_parquet(out / "trades/2012-06-21/NASDAQ__TEST.parquet")["ts"][0].microsecond == 500_000
    b = _book(out, "2012-06-21", "NASDAQ__TEST")
    # update groups: {0,1} {2} {3} {4} {5}; every second one: after messages 2 and 4
    assert b.height == 2
    assert (b["a1price"][0], b["a1size"][0], b["b1price"][0], b["b20price"][0]) == (120.05, 102.0, 120.0, 119.81)
    assert (b["b1price"][1], b["a20price"][1]) == (119.99, 120.24)
    assert validate(out).ok


def test_lobster_shallow_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"5 levels.*20 levels"):
        import_dataset("lobster", sorted(LOBSTER.glob("*_5.csv")), tmp_path / "ds")
    assert not (tmp_path / "ds").exists()
    only_messages = [LOBSTER / "TEST_2012-06-21_34200000_57600000_message_20.csv"]
    res = import_dataset("lobster", only_messages, tmp_path / "trades")
    assert [p["table"] for p in res.manifest.partitions] == ["trades"]


def test_bad_arguments(tmp_path: Path) -> None:
    runner = CliRunner()
    for args in (["nasdaq-itch", str(TRADES)], ["tardis", str(TRADES), "--policy", "fix"],
                 ["tardis", str(tmp_path / "none.csv")], ["tardis", str(FIX / "cryptofeed" / "book.csv")]):
        res = runner.invoke(app, ["import", *args, "--out", str(tmp_path / "ds")])
        assert res.exit_code == 2, (args, res.output)
    assert not (tmp_path / "ds").exists()
    res = runner.invoke(app, ["import", "tardis", str(BAD), "--out", str(tmp_path / "ds"), "--policy", "drop"])
    assert res.exit_code == 0 and "dropped 1 rows: crossed book" in res.output
    assert len(res.output.strip().splitlines()[-1]) == 32  # the content hash


# --- the round trip: generated data written in Tardis's layout imports to the same hash ------------

VENUE_IDS = {"BINANCEUS": "binance-us"}


def _to_tardis(root: Path, entry: dict[str, object], out: Path) -> Path:
    """One generated partition as a Tardis trades or book_snapshot_25 CSV (levels 21-25 empty)."""
    df = pl.read_parquet(root / str(entry["path"]))
    ex = VENUE_IDS.get(str(entry["exchange"]), str(entry["exchange"]).lower())
    us = pl.col("ts").cast(pl.Int64) // 1000
    head = [pl.lit(ex).alias("exchange"), pl.col("sym").alias("symbol"), us.alias("timestamp"),
            (us + 250).alias("local_timestamp")]
    if entry["table"] == "trades":
        kind = "trades"
        o = df.select(*head, pl.col("trade_id").alias("id"), "side", "price", "amount")
    else:
        kind = "book_snapshot_25"
        cols = [(pl.col(f"{d}{i + 1}{k2}") if i < 20 else pl.lit(None, pl.Float64)).alias(f"{s}[{i}].{k}")
                for i in range(25) for s, d in (("asks", "a"), ("bids", "b"))
                for k, k2 in (("price", "price"), ("amount", "size"))]
        o = df.select(*head, *cols)
    path = out / f"{ex}_{kind}_{entry['day']}_{entry['sym']}.csv"
    o.write_csv(path)
    return path


def test_round_trip_through_tardis_layout_keeps_the_content_hash(tiny: Dataset, tmp_path: Path) -> None:
    parts = [p for p in tiny.manifest.partitions if p["sym"] == "USDT-USD"]
    src = tmp_path / "tardis"
    src.mkdir()
    files = [_to_tardis(tiny.root, p, src) for p in parts]
    res = import_dataset("tardis", files, tmp_path / "ds", memory_limit_mb=32)
    assert res.dropped == {}
    assert res.manifest.content_hash == combine_hashes({p["path"]: p["hash"] for p in parts})
    got = {p["path"]: p for p in res.manifest.partitions}
    for p in parts:
        assert (got[p["path"]]["rows"], got[p["path"]]["hash"]) == (p["rows"], p["hash"])
    assert res.manifest.params["symbol"] == "USDT-USD" and res.manifest.params["multi_day"] == "2022-07-20"
    assert validate(tmp_path / "ds").ok


# --- bounded memory ------------------------------------------------------------------------------

MEASURE = """
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], capture_output=True, text=True)
sys.stderr.write(r.stdout[-2000:] + r.stderr[-2000:])
print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
"""


def _peak_mb(args: list[str]) -> tuple[int, int]:
    """Exit code and peak RSS (MB) of ``tickbench ARGS`` run in a fresh process of its own."""
    cmd = [sys.executable, "-c", MEASURE, sys.executable, "-m", "tickbench.cli", *args]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    code, peak = res.stdout.split()
    assert code == "0", res.stderr
    return int(code), int(peak)


def _write_big_snapshots(path: Path, rows: int, chunk: int = 20_000) -> None:
    """A book_snapshot_25 file of ``rows`` rows (about 1 kB each), written a chunk at a time."""
    rng = np.random.default_rng(1)
    us0 = int(T0.timestamp()) * 1_000_000
    with path.open("w") as f:
        f.write(SNAPSHOTS.read_text().splitlines()[0] + "\n")
        for start in range(0, rows, chunk):
            n = min(chunk, rows - start)
            ts = us0 + np.arange(start, start + n) * 300_000  # 0.3 s apart: 288k rows a day
            data: dict[str, object] = {"exchange": ["coinbase"] * n, "symbol": ["BTC-USD"] * n,
                                       "timestamp": ts, "local_timestamp": ts + 100}
            for i in range(25):
                data[f"asks[{i}].price"] = np.full(n, 20000.5 + 0.5 * i)
                data[f"asks[{i}].amount"] = np.round(rng.uniform(0.001, 5, n), 8)
                data[f"bids[{i}].price"] = np.full(n, 19999.5 - 0.5 * i)
                data[f"bids[{i}].amount"] = np.round(rng.uniform(0.001, 5, n), 8)
            f.write(pl.DataFrame(data).write_csv(include_header=False))


@pytest.mark.slow
def test_file_four_times_the_memory_limit_imports_within_it(tmp_path: Path) -> None:
    """A 200 MB file under ``--memory-limit 50``. The bound: the peak RSS of a run importing a
    4 kB file (the interpreter, Polars, pyarrow and one of everything) plus twice the limit; the
    limit bounds the importer's buffers (its Arrow allocations peak near half of it) and the
    allocators keep about as much again. Holding the input would need four limits (200 MB) more."""
    big = tmp_path / "big.csv"
    _write_big_snapshots(big, 220_000)
    size_mb = big.stat().st_size >> 20
    limit = 50
    assert size_mb >= 4 * limit
    _, base = _peak_mb(["import", "tardis", str(SNAPSHOTS), "--out", str(tmp_path / "small"),
                        "--memory-limit", str(limit)])
    _, peak = _peak_mb(["import", "tardis", str(big), "--out", str(tmp_path / "big"),
                        "--memory-limit", str(limit)])
    manifest = json.loads((tmp_path / "big" / "manifest.json").read_text())
    assert sum(p["rows"] for p in manifest["partitions"]) == 220_000
    assert manifest["csv"]["book"]["rows"] == 220_000
    assert peak < base + 2 * limit, (base, peak)
    shutil.rmtree(tmp_path)
