"""Hostile and real-world input to ``tickbench import``, run as a user runs it (the command line,
or a real ``tickbench import`` process and a real signal).

Daily TAQ files are written from the specification's field lists (``tests/taq_spec.py``), not
from the importer: a BBO and TRADE pair imports, validates and runs the market suite on every
embedded engine; the trailer is the file's own integrity check (a file cut at a line boundary,
a wrong count or date, an END line in the middle are refused, naming both values); a header of
the wrong kind is told what its kind lacks; one-sided quotes are counted; times of 24:00 or
later, days no engine holds and implausible values are refused naming file, row and field.
Tardis quotes without trades are refused. A first line without a line break is refused after a
bounded read; corrupt gzip data, a disk that fills up and Ctrl-C are one line each (exit 2, 2,
130), leaving nothing half-written. Each case checks the exit status, the message, that nothing
beside ``--out`` changed and that nothing is left running.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from tests.taq_spec import TRADE_FIELDS, Day, write_day
from tests.test_hostile_data import Guard, Outcome, _cli
from tests.test_hostile_run import small_tmpfs
from tickbench.data.dataset import STAGE_OWNER, Dataset
from tickbench.datasets.base import open_dataset, validate
from tickbench.datasets.market.reference import REFERENCES
from tickbench.engines.registry import adapter_class, availability, engine_infos

DAYS = ["2024-01-02", "2024-01-03", "2024-01-04"]
T0_US = 1_704_205_800_000_000  # 2024-01-02 14:30:00 UTC


def _import(out: Path, *files: Path, fmt: str = "taq", policy: str = "fail") -> Outcome:
    return _cli("import", fmt, *files, "--out", out, "--policy", policy)


@pytest.fixture(scope="module")
def busy_syms(market_tiny: Dataset) -> list[str]:
    """The twelve most active instruments: a small capture that still fills a basket of ten."""
    return market_tiny.instruments().sort("rank")["sym"].head(12).to_list()


@pytest.fixture
def one_day(market_tiny: Dataset, busy_syms: list[str], tmp_path: Path) -> Day:
    """One day's BBO and TRADE files as the specification lays them out, in ``tmp_path/files``."""
    return write_day(market_tiny, tmp_path / "files", DAYS[0], one_sided_every=50, syms=busy_syms)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _write(path: Path, lines: list[str]) -> None:
    path.write_text("\n".join(lines) + "\n")


# ---- real Daily TAQ files --------------------------------------------------------------------


def test_a_pair_laid_out_as_the_specification_shows_imports_and_counts_one_sided_quotes(
        one_day: Day, market_tiny: Dataset, busy_syms: list[str], tmp_path: Path) -> None:
    """The TRADE header's spaces, the BBO header's underscores, the padded trailers: every
    record is read, the trailers are not records, one-sided quotes are left out and counted."""
    out = tmp_path / "data"
    guard = Guard(tmp_path, out)
    res = _import(out, one_day.bbo, one_day.trade)
    assert res.code == 0, res.output
    assert f"dropped {one_day.one_sided:,} rows: one-sided quote" in res.output
    assert f"{one_day.quotes:,} quotes rows read" in res.output and f"{one_day.trades:,} trades rows read" in res.output
    assert "timestamp" not in res.output  # the trailer is not a record with a bad time
    guard.unchanged()
    ds = open_dataset(out)
    assert validate(out).ok
    mine = pl.concat([pl.read_parquet(f) for f in ds.files("quotes")])
    theirs = pl.concat([pl.read_parquet(f) for f in market_tiny.files("quotes", DAYS[:1])]).filter(
        pl.col("sym").is_in(busy_syms))
    # New York time back to UTC; every two-sided quote (the re-quotes after a one-sided one too).
    cols = ["ts", "exchange", "sym", "bid", "ask"]
    assert mine.height == one_day.quotes and (mine["bid"] > 0).all()
    assert mine.select(cols).unique().sort(cols).equals(theirs.select(cols).unique().sort(cols))
    trades = pl.concat([pl.read_parquet(f) for f in ds.files("trades")])
    original = pl.concat([pl.read_parquet(f) for f in market_tiny.files("trades", DAYS[:1])]).filter(
        pl.col("sym").is_in(busy_syms))
    tcols = ["ts", "exchange", "sym", "price", "amount"]
    assert trades.select(tcols).sort(tcols).equals(original.select(tcols).sort(tcols))
    assert ds.manifest.extra["import"]["dropped"] == {
        "one-sided quote (TAQ: a side with price 0 and size 0, no quote on that side), not kept": one_day.one_sided}


def _cut(day: Day, bbo: bool) -> tuple[Path, list[str]]:
    path = day.bbo if bbo else day.trade
    return path, _lines(path)


@pytest.mark.parametrize("damage", ["cut", "no trailer", "count", "date", "end in the middle"])
def test_the_trailer_is_enforced(damage: str, one_day: Day, tmp_path: Path) -> None:
    """A file cut at a line boundary (half its records and no trailer), a trailer alone
    missing, a wrong count, a wrong date, an END line in the middle: refused, naming the file
    and both values, nothing written."""
    path, lines = _cut(one_day, bbo=damage in ("cut", "count", "end in the middle"))
    records = len(lines) - 2
    stamp = DAYS[0].replace("-", "")
    if damage == "cut":
        _write(path, lines[: 1 + records // 2])
        words = [f"no trailer line END|{stamp}|<records> after its {records // 2:,} records", "cut short"]
    elif damage == "no trailer":
        _write(path, lines[:-1])
        words = [f"after its {records:,} records", "cut short"]
    elif damage == "count":
        _write(path, [*lines[:-1], lines[-1].replace(f"|{records}|", f"|{records + 7}|")])
        words = [f"its trailer counts {records + 7:,} records, the file holds {records:,}"]
    elif damage == "date":
        _write(path, [*lines[:-1], lines[-1].replace(stamp, "20240103")])
        words = [f"its trailer says day 20240103, its name {stamp}"]
    else:
        middle = 1 + records // 2
        _write(path, [*lines[:middle], lines[-1], *lines[middle:]])
        words = [f"an END line (line {middle + 1:,}) with records after it", "on the last line alone"]
    out = tmp_path / "data"
    guard = Guard(tmp_path, out)
    line = _import(out, one_day.bbo, one_day.trade).one_line_error(str(path), *words)
    assert "Traceback" not in line
    assert not out.exists() and not list(tmp_path.glob(".data.partial-*"))
    guard.unchanged()


@pytest.mark.parametrize("which", ["trade", "bbo"])
def test_a_header_of_the_wrong_kind_is_told_what_its_kind_lacks(which: str, one_day: Day, tmp_path: Path) -> None:
    """A TRADE file without ``Trade Price`` is told so, not that it lacks ``Bid_Price``."""
    path = one_day.trade if which == "trade" else one_day.bbo
    lines = _lines(path)
    gone = "Trade Price" if which == "trade" else "Offer_Size"
    _write(path, [lines[0].replace(gone, "Whatever"), *lines[1:]])
    out = tmp_path / "data"
    guard = Guard(tmp_path, out)
    kind = "TRADE" if which == "trade" else "BBO (quote)"
    line = _import(out, one_day.bbo, one_day.trade).one_line_error(
        str(path), f"not a Daily TAQ {kind} file: its header lacks {gone}")
    other = "Bid_Price" if which == "trade" else "Trade"
    assert other not in line.split("lacks", 1)[1]
    assert not out.exists()
    guard.unchanged()


def test_a_time_of_24_00_or_later_is_said_to_be_one(one_day: Day, tmp_path: Path) -> None:
    lines = _lines(one_day.trade)
    fields = lines[3].split("|")
    fields[0] = "240000000000000"
    lines[3] = "|".join(fields)
    _write(one_day.trade, lines)
    out = tmp_path / "data"
    guard = Guard(tmp_path, out)
    line = _import(out, one_day.bbo, one_day.trade).one_line_error(one_day.trade.name, "row 2", "24:00 or later")
    assert "int64" not in line
    guard.unchanged()


@pytest.mark.parametrize("field,value", [("Trade Price", "1e300"), ("Trade Volume", "1e300"),
                                         ("Trade Price", "0.000000000001")])
def test_an_implausible_value_is_refused_naming_file_row_and_field(field: str, value: str, one_day: Day,
                                                                   tmp_path: Path) -> None:
    lines = _lines(one_day.trade)
    fields = lines[5].split("|")
    fields[TRADE_FIELDS.index(field)] = value
    lines[5] = "|".join(fields)
    _write(one_day.trade, lines)
    out = tmp_path / "data"
    guard = Guard(tmp_path, out)
    column = "price" if field == "Trade Price" else "amount"
    line = _import(out, one_day.bbo, one_day.trade).one_line_error(
        one_day.trade.name, "row 4", f"{column} outside the plausible")
    assert "nothing was written" in line
    assert not out.exists()
    guard.unchanged()


@pytest.mark.parametrize("stamp", ["16780101", "19691231"])
def test_a_day_no_engine_holds_is_refused(stamp: str, one_day: Day, tmp_path: Path) -> None:
    """1678-01-01 fits int64 nanoseconds but not chDB's DateTime64 (it became 2036-11-12), nor
    QuestDB's designated timestamp (nothing before 1970)."""
    files = []
    for p in (one_day.bbo, one_day.trade):
        lines = _lines(p)
        moved = p.with_name(p.name.replace(DAYS[0].replace("-", ""), stamp))
        _write(moved, [*lines[:-1], lines[-1].replace(DAYS[0].replace("-", ""), stamp)])
        p.unlink()
        files.append(moved)
    out = tmp_path / "data"
    guard = Guard(tmp_path, out)
    day = f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:]}"
    _import(out, *files).one_line_error(f"its day {day} is outside 1970-01-01", "every engine")
    assert not out.exists()
    guard.unchanged()


# ---- Tardis quotes without trades ------------------------------------------------------------


def _tardis_quotes(path: Path, n: int = 5, bid: float = 100.0) -> Path:
    us = T0_US + np.arange(n, dtype=np.int64) * 1_000_000
    pacsv.write_csv(pa.table({"exchange": ["coinbase"] * n, "symbol": ["BTC-USD"] * n, "timestamp": us,
                              "local_timestamp": us, "ask_amount": [1.0] * n, "ask_price": [bid + 1] * n,
                              "bid_price": [bid] * n, "bid_amount": [2.0] * n}),
                    path, pacsv.WriteOptions(quoting_style="none"))
    return path


def _tardis_trades(path: Path, n: int) -> Path:
    us = T0_US + np.arange(n, dtype=np.int64) * 1000
    pacsv.write_csv(pa.table({"exchange": ["coinbase"] * n, "symbol": ["BTC-USD"] * n, "timestamp": us,
                              "local_timestamp": us, "id": np.arange(1, n + 1), "side": ["buy"] * n,
                              "price": np.full(n, 20_000.5), "amount": np.full(n, 0.25)}),
                    path, pacsv.WriteOptions(quoting_style="none"))
    return path


def test_tardis_quotes_without_trades_are_refused(tmp_path: Path) -> None:
    quotes = _tardis_quotes(tmp_path / "coinbase_quotes_2024-01-02.csv")
    out = tmp_path / "data"
    guard = Guard(tmp_path, out)
    _import(out, quotes, fmt="tardis").one_line_error(str(quotes), "without a trades file",
                                                      "a market dataset needs quotes and trades")
    assert not out.exists()
    guard.unchanged()


# ---- bounded reads, corrupt gzip, a full disk, Ctrl-C -----------------------------------------


@pytest.mark.parametrize("fmt,name", [("taq", "EQY_US_ALL_BBO_20240102"), ("tardis", "trades.csv"),
                                      ("cryptofeed", "trades.csv")])
def test_a_first_line_without_a_line_break_is_refused_after_a_bounded_read(fmt: str, name: str,
                                                                           tmp_path: Path) -> None:
    """512 MiB without a line break (a sparse file: no disk used) once took twice its size in
    memory; now the header read stops after 64 KiB, naming the file."""
    src = tmp_path / name
    with src.open("wb") as f:
        f.truncate(512 << 20)
    out = tmp_path / "data"
    guard = Guard(tmp_path, out)
    # A small parent measures the import's peak memory: a child forked from this test process
    # would count the test's own pages in its ru_maxrss.
    measure = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
               "sys.stderr.write(done.stderr); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
               "sys.exit(done.returncode)")
    done = subprocess.run([sys.executable, "-c", measure, sys.executable, "-m", "tickbench.cli", "import", fmt,
                           str(src), "--out", str(out)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "250"})
    stderr = done.stderr
    assert done.returncode == 2, done.stdout + stderr
    peak_mb = int(done.stdout.split()[-1]) / 1024
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and str(src) in errors[0] and "no line break in its first 65,536 bytes" in errors[0], (
        stderr)
    assert peak_mb < 500, f"{peak_mb:.0f} MB of memory for a header"
    assert not out.exists()
    guard.unchanged()


def _gzip_damaged(path: Path, body: bytes, damage: str) -> Path:
    data = gzip.compress(body)
    if damage == "garbage":  # a valid gzip header, then bytes that are no deflate stream
        data = data[:10] + bytes(range(7, 250)) * 4
    elif damage == "truncated":
        data = data[: len(data) // 3]
    else:  # "not gzip": a .gz name on plain bytes that are not gzip's
        data = b"PK\x03\x04" + body
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("damage", ["garbage", "truncated", "not gzip"])
@pytest.mark.parametrize("fmt", ["taq", "tardis"])
def test_corrupt_gzip_data_is_one_line_naming_the_file(fmt: str, damage: str, one_day: Day, tmp_path: Path) -> None:
    if fmt == "taq":
        src = _gzip_damaged(one_day.trade.with_name(one_day.trade.name + ".gz"), one_day.trade.read_bytes(), damage)
        files = [one_day.bbo, src]
    else:
        plain = _tardis_trades(tmp_path / "t.csv", n=20_000)
        src = _gzip_damaged(tmp_path / "coinbase_trades.csv.gz", plain.read_bytes(), damage)
        plain.unlink()
        files = [src]
    out = tmp_path / "data"
    guard = Guard(tmp_path, out)
    line = _import(out, *files, fmt=fmt).one_line_error(str(src))
    assert "unreadable" in line or "cannot be read" in line, line
    assert not out.exists() and not list(tmp_path.glob(".data.partial-*"))
    guard.unchanged()


@pytest.mark.slow
def test_a_disk_that_fills_up_during_an_import_is_one_line_and_leaves_nothing(market_tiny: Dataset,
                                                                               tmp_path: Path) -> None:
    files = [f for d in DAYS for f in (lambda x: (x.bbo, x.trade))(write_day(market_tiny, tmp_path / "files", d))]
    with small_tmpfs(tmp_path / "small", "2m") as mount:
        out = mount / "data"
        guard = Guard(tmp_path / "files", out)  # the input as it was, and nothing left running
        done = subprocess.run([sys.executable, "-m", "tickbench.cli", "import", "taq", *map(str, files),
                               "--out", str(out)], capture_output=True, text=True, timeout=600,
                              env={**os.environ, "COLUMNS": "250"})
        assert done.returncode == 2, done.stdout + done.stderr
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
        assert f"the disk under {mount} filled up while importing" in errors[0], errors[0]
        assert "nothing was kept" in errors[0]
        assert list(mount.iterdir()) == [], "something half-written was left"
        guard.unchanged()


def test_ctrl_c_during_an_import_is_exit_130_and_leaves_nothing(tmp_path: Path) -> None:
    """A real SIGINT to a real ``tickbench import``'s process group, as Ctrl-C at a terminal
    sends it, once it is writing: exit 130, one line, no traceback, no dataset or staging
    directory left, nothing left running."""
    src = _tardis_trades(tmp_path / "big_trades.csv", 2_000_000)
    out = tmp_path / "ds"
    guard = Guard(tmp_path, out)
    proc = subprocess.Popen([sys.executable, "-m", "tickbench.cli", "import", "tardis", str(src), "--out", str(out),
                             "--memory-limit", "16"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "COLUMNS": "250"})
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(f".ds.partial-*/{STAGE_OWNER}")):
        assert proc.poll() is None, "the import ended before it could be interrupted"
        assert time.monotonic() < deadline, "no staging directory appeared"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith("import:")]
    assert len(lines) == 1 and "interrupted by SIGINT" in lines[0] and "nothing was kept" in lines[0], stderr
    assert "Traceback" not in stderr
    assert not out.exists() and not list(tmp_path.glob(".ds.partial-*"))
    guard.unchanged()


# ---- the pair runs the market suite on every embedded engine ----------------------------------


EMBEDDED = [n for n, i in engine_infos().items() if i.kind in ("embedded", "in-memory") and n != "kdb"]


@pytest.mark.slow
def test_a_spec_taq_capture_runs_the_market_suite_on_every_embedded_engine(market_tiny: Dataset,
                                                                          tmp_path: Path) -> None:
    """Three days of BBO and TRADE files as the specification lays them out (one-sided quotes
    among them) import, validate, and run the market suite on DuckDB, chDB, Polars, ArcticDB and
    DataFusion in one run, every answer verified; the run is ``--cold`` (each timed repetition
    after a restart of the engine, and a reload for the in-memory one), so the same run shows
    that the market suite runs cold on every embedded engine. One user, no UI users: the users
    cells have tests of their own (tests/test_market_users.py)."""
    names = [e for e in EMBEDDED if availability(e).available]
    if len(names) < len(EMBEDDED):
        pytest.skip("not available here: " + "; ".join(
            f"{e}: {availability(e).reason}" for e in EMBEDDED if e not in names))
    written = [write_day(market_tiny, tmp_path / "files", d, one_sided_every=40) for d in DAYS]
    files = [f for w in written for f in (w.bbo, w.trade)]
    data, run = tmp_path / "data", tmp_path / "run"
    res = _import(data, *files)
    assert res.code == 0, res.output
    assert f"dropped {sum(w.one_sided for w in written):,} rows: one-sided quote" in res.output
    assert _cli("validate", data).code == 0
    guard = Guard(tmp_path, run)
    res = _cli("run", "--engines", ",".join(names), "--suite", "market", "--data", data, "--out", run,
               "--repetitions", "1", "--users", "1", "--ui-users", "0", "--users-seconds", "0", "--timeout", "300",
               "--cold")
    assert res.code == 0, res.output
    guard.unchanged()
    records = json.loads((run / "results.json").read_text())["records"]
    for engine in names:
        queries = [r for r in records if r["engine"] == engine and r["benchmark"] in REFERENCES]
        assert len(queries) == len(REFERENCES), engine
        unverified = [(r["benchmark"], r["status"], r.get("reason")) for r in queries
                      if (r["status"], r["verified"]) != ("ok", True)]
        assert not unverified, (engine, unverified)
        reload = adapter_class(engine).persistent is False
        for r in queries:  # every timed repetition ran cold, said so in the record
            assert r["mode"] == "cold" and ("reloaded" in r["cold_note"]) == reload, (engine, r["cold_note"])
