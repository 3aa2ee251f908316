"""Hostile data: what an imported capture holds is never trusted.

Each case writes real files (Tardis.dev CSV, cryptofeed Parquet, LOBSTER CSV, a dataset
directory, a results file) into a temporary directory and runs the command line on them. Each
checks the exit status, the one-line error (no traceback), that nothing outside ``--out``
changed (the test's own directory around it, and a canary directory under /tmp that a crafted
name aims at) and that no process was left running. The run cases load a book-only capture, a
capture with days without data and a capture of hostile names into every engine and check every
answer against the reference.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import psutil
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tests.conftest import TINY_SEED, processes_under
from tickbench.cli import app
from tickbench.data.dataset import (
    MAX_NAME_BYTES,
    STAGE_OWNER,
    Dataset,
    DatasetError,
    combine_hashes,
    file_name,
    partition_path,
)
from tickbench.datasets.base import open_dataset
from tickbench.datasets.paper.params import query_params
from tickbench.datasets.paper.reference import REFERENCES
from tickbench.datasets.paper.validate import hash_parquet
from tickbench.engines.registry import availability, engine_infos
from tickbench.results import read_results
from tickbench.suites.published import QUERIES

DAY = "2022-06-18"
T0_US = 1_655_510_400_000_000  # 2022-06-18 00:00:00 UTC
TRADES_HEADER = ["exchange", "symbol", "timestamp", "local_timestamp", "id", "side", "price", "amount"]
BOOK_LEVELS = 25  # Tardis book_snapshot_25; the importer keeps the top 20


# ---- what each case checks ------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    code: int
    output: str

    @property
    def errors(self) -> list[str]:
        return [line for line in self.output.splitlines() if line.startswith("error:")]

    def one_line_error(self, *words: str) -> str:
        """The single ``error:`` line, holding every word of ``words``; no traceback."""
        assert self.code == 2, self.output
        assert "Traceback" not in self.output, self.output
        assert len(self.errors) == 1, self.output
        line = self.errors[0]
        for w in words:
            assert w in line, f"{w!r} not in {line!r}"
        return line


def _cli(*args: str | Path) -> Outcome:
    res = CliRunner().invoke(app, [str(a) for a in args])
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception  # a traceback: the test fails with it
    return Outcome(res.exit_code, res.output)


def _state(root: Path, skip: Path | None = None) -> dict[str, tuple[int, int, str]]:
    """Every file and directory under ``root`` (but ``skip``): size, mtime and content digest."""
    out: dict[str, tuple[int, int, str]] = {}
    if not root.exists():
        return out
    for p in sorted(root.rglob("*")):
        if skip is not None and (p == skip or skip in p.parents):
            continue
        st = p.lstat()
        digest = hashlib.blake2b(p.read_bytes()).hexdigest() if p.is_file() and not p.is_symlink() else ""
        out[str(p.relative_to(root))] = (st.st_size if p.is_file() else 0, st.st_mtime_ns, digest)
    return out


def _resource_tracker(p: psutil.Process) -> bool:
    """multiprocessing's resource tracker: one per process that spawned workers, living as long
    as that process (this test session), not a process a command left behind."""
    try:
        return "multiprocessing.resource_tracker" in " ".join(p.cmdline())
    except psutil.Error:
        return True


@pytest.fixture
def canary() -> Iterator[Path]:
    """A directory under /tmp that a crafted name aims at; nothing may appear in it or change."""
    d = Path("/tmp") / f"tbc-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    (d / "keep.txt").write_text("canary\n")
    yield d
    shutil.rmtree(d, ignore_errors=True)


class Guard:
    """Snapshots of everything around ``--out``: the test directory (but ``out``) and the
    canary; the processes running under this test."""

    def __init__(self, around: Path, out: Path, canary: Path | None = None) -> None:
        self.around, self.out, self.canary = around, out, canary
        self.before = _state(around, out)
        self.canary_before = _state(canary) if canary else {}
        self.children = {p.pid for p in psutil.Process().children(recursive=True)}

    def unchanged(self) -> None:
        after = _state(self.around, self.out)
        changed = sorted(k for k in {*self.before, *after} if self.before.get(k) != after.get(k))
        assert not changed, f"changed outside --out: {changed}"
        if self.canary is not None:
            assert _state(self.canary) == self.canary_before, f"the canary {self.canary} changed"
        left = [p for p in psutil.Process().children(recursive=True)
                if p.pid not in self.children and p.is_running() and p.status() != psutil.STATUS_ZOMBIE
                and not _resource_tracker(p)]
        assert not left, f"left running: {left}"
        assert not processes_under(self.out), "processes of --out left running"


# ---- writing real input files ---------------------------------------------------------------


def _trades_csv(path: Path, rows: Sequence[tuple[object, ...]]) -> Path:
    """A Tardis trades CSV; each row (exchange, symbol, µs, id, side, price, amount); names
    quoted as RFC 4180 wants, as Tardis' own files are."""
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(TRADES_HEADER)
        for ex, sym, us, tid, side, price, amount in rows:
            w.writerow([ex, sym, us, us if isinstance(us, int) else "", tid, side, price, amount])
    return path


def _trade_rows(exchange: str, sym: str, n: int = 3, start_us: int = T0_US, first_id: int = 1,
                price: float = 20_000.0) -> list[tuple[object, ...]]:
    return [(exchange, sym, start_us + i * 1_000_000, first_id + i, "buy" if i % 2 else "sell",
             price + i * 0.5, 0.25 + i) for i in range(n)]


def _book_csv(path: Path, rows: list[tuple[str, str, int, float]]) -> Path:
    """A Tardis book_snapshot_25 CSV; each row (exchange, symbol, µs, best bid): a book 0.5 wide
    with levels 0.5 apart."""
    header = ["exchange", "symbol", "timestamp", "local_timestamp"]
    header += [f"{s}[{i}].{k}" for i in range(BOOK_LEVELS) for s in ("asks", "bids") for k in ("price", "amount")]
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        for ex, sym, us, bid in rows:
            levels: list[object] = []
            for i in range(BOOK_LEVELS):
                levels += [bid + 0.5 + 0.5 * i, 1.0 + i, bid - 0.5 * i, 2.0 + i]
            w.writerow([ex, sym, us, us, *levels])
    return path


def _import(out: Path, *files: Path, fmt: str = "tardis", policy: str = "fail") -> Outcome:
    return _cli("import", fmt, *files, "--out", out, "--policy", policy)


# ---- names from data never become paths -----------------------------------------------------


def _victim(tmp_path: Path) -> Path:
    """Another dataset beside ``--out``: what a crafted name aims at."""
    src = _trades_csv(tmp_path / "victim_trades.csv", _trade_rows("coinbase", "BTC-USD"))
    victim = tmp_path / "victim"
    assert _import(victim, src).code == 0
    return victim


def test_a_name_that_is_a_path_stays_a_name(tmp_path: Path, canary: Path) -> None:
    """A symbol such as ``x/../../../../victim/trades/…`` once overwrote another dataset's
    partition, and ``x/../…/tmp/…/pwned`` wrote outside every dataset. Now each is a name,
    kept in the manifest, its partition inside ``--out`` under an encoded file name."""
    victim = _victim(tmp_path)
    out = tmp_path / "ds"
    into_victim = "x/../../../../victim/trades/2022-06-18/COINBASE__BTC-USD"
    ups = len(tmp_path.parts) + 4  # from the staging directory's partition to /, and a spare
    into_tmp = "x" + "/.." * ups + f"{canary}/pwned"
    assert len(into_tmp.encode()) <= MAX_NAME_BYTES
    src = _trades_csv(tmp_path / "hostile.csv",
                      _trade_rows("coinbase", into_victim, first_id=100) + _trade_rows("coinbase", into_tmp))
    guard = Guard(tmp_path, out, canary)
    res = _import(out, src)
    assert res.code == 0, res.output
    guard.unchanged()  # the victim's partition, and the canary, as they were
    ds = open_dataset(out, verify_content=True)
    assert {e["sym"] for e in ds.manifest.partitions} == {into_victim, into_tmp}
    for e in ds.manifest.partitions:
        path = (out / e["path"]).resolve()
        assert path.is_relative_to(out.resolve()) and path.parent == (out / "trades" / DAY).resolve()
        assert "/" not in Path(e["path"]).name and "~" in Path(e["path"]).name
    assert _cli("validate", out).code == 0
    assert pq.read_table(victim / "trades" / DAY / "COINBASE__BTC-USD.parquet").num_rows == 3


def test_plain_names_keep_their_file_names() -> None:
    """Generated data's names are their own file names (its paths and content hash stay as
    published); other names are encoded, bounded, and never collide with a plain one."""
    assert partition_path("book", dt.date(2022, 6, 18), "COINBASE", "BTC-USD") == \
        "book/2022-06-18/COINBASE__BTC-USD.parquet"
    for name in ("SYN0001-USD", "S0001", "BRK.B", "BINANCEUS"):
        assert file_name(name) == name
    names = ["XBT/USD", "..", ".", "a_b", "A__B", "€", "ÉCHANGE", "a b", 'a"b', "a,b", "x" * 64, "~x", "-x"]
    forms = [file_name(n) for n in names]
    assert len(set(forms)) == len(names)
    for form in forms:
        assert "~" in form and "/" not in form and "_" not in form and len(form) <= 41
        assert form not in (".", "..") and not form.startswith(("-", "."))


@pytest.mark.parametrize("edit", ["outside", "dotdot", "absolute", "symlink", "layout"])
def test_a_manifest_naming_a_path_outside_is_refused(tmp_path: Path, canary: Path, edit: str) -> None:
    """``open_dataset`` (``run``) and ``validate`` resolve every path a manifest names and
    refuse one that leaves the dataset, whether by ``..``, an absolute path, a symbolic link
    or a path other than the layout's."""
    victim = _victim(tmp_path)
    ds = tmp_path / "ds"
    shutil.copytree(victim, ds)
    manifest = json.loads((ds / "manifest.json").read_text())
    entry = manifest["partitions"][0]
    if edit == "outside":
        entry["path"] = "../victim/" + entry["path"]
    elif edit == "dotdot":
        entry["path"] = "trades/../../victim/" + entry["path"]
    elif edit == "absolute":
        entry["path"] = str(victim / entry["path"])
    elif edit == "symlink":  # the day directory is a link to the victim's
        shutil.rmtree(ds / "trades" / DAY)
        (ds / "trades" / DAY).symlink_to(victim / "trades" / DAY)
    else:  # the entry's path is not where its (table, day, exchange, sym) lives
        entry["path"] = "trades/2022-06-18/COINBASE__ETH-USD.parquet"
        (ds / "trades" / DAY / "COINBASE__BTC-USD.parquet").rename(ds / entry["path"])
    (ds / "manifest.json").write_text(json.dumps(manifest))
    guard = Guard(tmp_path, tmp_path / "r", canary)
    _cli("validate", ds).one_line_error(str(ds))
    _cli("run", "--engines", "duckdb", "--data", ds, "--out", tmp_path / "r").one_line_error(str(ds))
    guard.unchanged()
    assert not (tmp_path / "r").exists()
    with pytest.raises(DatasetError, match=r"inside the dataset|outside the dataset|not the layout's"):
        open_dataset(ds)


# ---- names any venue could use, and names no engine should take ------------------------------

# One instrument per trap: quotes and commas (the bulk CSV), an apostrophe (a SQL literal),
# spaces, non-ASCII (ArcticDB's ASCII-only symbol keys), brackets and braces (ClickHouse's file
# globs), a slash and a backslash, LIKE's wildcards. The first has the most trades: it is S,
# bound into every query.
HOSTILE_SYMS = ['B\'T"C, €-{1}[*] \\%_', "ETH/USD", "a,b", 'c"d', "e'f", "g h", "ÉCHANGE-€", "x]y,z"]
HOSTILE_EXCHANGES = ["coinbase", "bit stamp", "échange"]


def _hostile_names_files(src: Path) -> list[Path]:
    """Trades and book snapshots of every hostile name, over two days, quoting real; trade ids
    are the µs timestamps (see :func:`_venue_day`)."""
    src.mkdir(parents=True, exist_ok=True)
    trades, book = [], []
    rng = np.random.default_rng(5)
    for i, sym in enumerate(HOSTILE_SYMS):
        for day in range(2):
            for v, ex in enumerate(HOSTILE_EXCHANGES):
                n = 400 if i == 0 else 60
                start = T0_US + day * 86_400_000_000 + 3_600_000_000 + v * 7 + i * 11
                ts = start + np.sort(rng.choice(80_000, n, replace=False)).astype(np.int64) * 1_000_000
                bid = 100.0 * (i + 1) + 0.5 * v + 0.5 * np.cumsum(rng.integers(-1, 2, n))
                book += [(ex, sym, int(t), float(b)) for t, b in zip(ts, bid, strict=True)]
                trades += [(ex, sym, int(t) + 3, int(t) + 3, "buy" if k % 2 else "sell", float(b) + 0.5,
                            0.5 + k % 7) for k, (t, b) in enumerate(zip(ts, bid, strict=True))]
    return [_trades_csv(src / "trades.csv", trades), _book_csv(src / "book.csv", book)]


@pytest.fixture(scope="module")
def hostile_names(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("names")
    out = tmp / "ds"
    res = _import(out, *_hostile_names_files(tmp / "src"))
    assert res.code == 0, res.output
    return out


def test_hostile_names_import_as_they_are(hostile_names: Path) -> None:
    ds = open_dataset(hostile_names, verify_content=True)
    assert {e["sym"] for e in ds.manifest.partitions} == set(HOSTILE_SYMS)
    assert {e["exchange"] for e in ds.manifest.partitions} == {"COINBASE", "BITSTAMP", "ÉCHANGE"}
    assert ds.params["symbol"] == HOSTILE_SYMS[0]
    for e in ds.manifest.partitions:
        assert (hostile_names / e["path"]).resolve().parent.parent.parent == hostile_names.resolve()
    # The bulk CSV quotes what needs quoting, and reads back to the same names.
    back = pacsv.read_csv(ds.csv_file("trades"))
    assert set(back.column("sym").to_pylist()) == set(HOSTILE_SYMS)
    assert back.num_rows == ds.manifest.csv["trades"]["rows"]
    assert _cli("validate", hostile_names).code == 0


@pytest.mark.parametrize(("name", "words"), [
    ("x" * 10_000, [f"at most {MAX_NAME_BYTES} bytes", "row 0"]),
    ("a\tb", ["control character", "row 0"]),
    ("a\x00b", ["control character", "row 0"]),
    ("a\nb", ["control character", "row 0"]),
])
def test_a_name_no_engine_can_take_is_refused_up_front(tmp_path: Path, canary: Path, name: str,
                                                       words: list[str]) -> None:
    """A 10 kB symbol, or one with a tab, a NUL or a line break, is refused at import with one
    short line naming the bound; under --policy drop its rows are dropped and counted."""
    src = _trades_csv(tmp_path / "t.csv", _trade_rows("coinbase", name) + _trade_rows("coinbase", "BTC-USD"))
    out = tmp_path / "ds"
    guard = Guard(tmp_path, out, canary)
    line = _import(out, src).one_line_error(*words)
    assert len(line) < 600, "the message quotes a 10 kB name whole"
    guard.unchanged()
    assert not out.exists()
    res = _import(out, src, policy="drop")
    assert res.code == 0 and "dropped 3 rows: exchange or sym not a usable name" in res.output, res.output
    assert {e["sym"] for e in open_dataset(out).manifest.partitions} == {"BTC-USD"}


# ---- numbers and timestamps -----------------------------------------------------------------


@pytest.mark.parametrize("us", [-9_300_000_000_000_000, 9_300_000_000_000_000])  # 1675, 2264
def test_tardis_timestamps_outside_int64_ns_are_bad_rows(tmp_path: Path, canary: Path, us: int) -> None:
    """µs → ns once wrapped silently (1677 became 2262); now such a row is refused, or dropped
    and counted."""
    rows = _trade_rows("coinbase", "BTC-USD")
    rows.insert(1, ("coinbase", "BTC-USD", us, 99, "buy", 20_000.0, 1.0))
    src = _trades_csv(tmp_path / "t.csv", rows)
    out = tmp_path / "ds"
    guard = Guard(tmp_path, out, canary)
    _import(out, src).one_line_error("t.csv row 1", "timestamp outside int64 nanoseconds")
    guard.unchanged()
    assert not out.exists()
    res = _import(out, src, policy="drop")
    assert res.code == 0 and "dropped 1 rows: timestamp outside int64 nanoseconds" in res.output, res.output
    t = pl.read_parquet(out / "trades" / DAY / "COINBASE__BTC-USD.parquet")
    assert t["trade_id"].to_list() == [1, 2, 3] and t["ts"].dt.year().to_list() == [2022] * 3


def test_tardis_book_updates_outside_int64_ns_are_bad_rows(tmp_path: Path) -> None:
    header = "exchange,symbol,timestamp,local_timestamp,is_snapshot,side,price,amount\n"
    rows = [f"coinbase,BTC-USD,{T0_US},{T0_US},true,{side},{p},1\n"
            for side, base, step in (("bid", 100.0, -0.5), ("ask", 100.5, 0.5))
            for p in (base + step * i for i in range(20))]
    bad = f"coinbase,BTC-USD,{2**62},{T0_US + 5},false,bid,99.75,2\n"
    src = tmp_path / "coinbase_incremental_book_L2.csv"
    src.write_text(header + "".join(rows) + bad + f"coinbase,BTC-USD,{T0_US + 9},{T0_US + 9},false,bid,99.5,3\n")
    _import(tmp_path / "ds", src).one_line_error("row 40", "timestamp outside int64 nanoseconds")
    res = _cli("import", "tardis", src, "--out", tmp_path / "ds", "--policy", "drop", "--sample", "1")
    assert res.code == 0 and "dropped 1 rows: timestamp outside" in res.output, res.output
    b = pl.read_parquet(tmp_path / "ds" / "book" / DAY / "COINBASE__BTC-USD.parquet")
    assert b.height == 2 and 99.75 not in b.select(pl.col("^b.*price$")).row(1)  # the bad update never applied


def _cryptofeed_trades(path: Path, **columns: pa.Array) -> Path:
    n = 3
    table = {"exchange": pa.array(["COINBASE"] * n), "symbol": pa.array(["BTC-USD"] * n),
             "side": pa.array(["buy", "sell", "buy"]), "amount": pa.array([0.5, 1.0, 1.5]),
             "price": pa.array([20_000.0, 20_000.5, 20_001.0]), "id": pa.array(["1", "2", "3"]),
             "timestamp": pa.array([1_655_510_401.0, 1_655_510_402.0, 1_655_510_403.0]),
             "receipt_timestamp": pa.array([1_655_510_401.1, 1_655_510_402.1, 1_655_510_403.1])}
    pq.write_table(pa.table({**table, **columns}), path)
    return path


@pytest.mark.parametrize(("columns", "reason"), [
    ({"timestamp": pa.array([1_655_510_401.0, 1e300, 1_655_510_403.0])}, "timestamp outside int64 nanoseconds"),
    ({"timestamp": pa.array([1_655_510_401.0, float("nan"), 1_655_510_403.0])}, "missing or non-finite value"),
    ({"timestamp": pa.array([dt.datetime(2022, 6, 18), dt.datetime(3000, 1, 1), dt.datetime(2022, 6, 19)],
                            pa.timestamp("us"))}, "timestamp outside int64 nanoseconds"),
    ({"price": pa.array(["20000", "a lot", "20001"])}, "missing or non-finite value"),
    ({"price": pa.array([20_000.0, 0.0, 20_001.0])}, "price not > 0"),
    ({"price": pa.array([20_000.0, -1.0, 20_001.0])}, "price not > 0"),
])
def test_cryptofeed_values_no_conversion_takes_are_bad_rows(tmp_path: Path, canary: Path,
                                                            columns: dict[str, pa.Array], reason: str) -> None:
    src = _cryptofeed_trades(tmp_path / "trades.parquet", **columns)
    out = tmp_path / "ds"
    guard = Guard(tmp_path, out, canary)
    _import(out, src, fmt="cryptofeed").one_line_error("trades.parquet row 1", reason)
    guard.unchanged()
    res = _import(out, src, fmt="cryptofeed", policy="drop")
    assert res.code == 0 and f"dropped 1 rows: {reason}" in res.output, res.output


def test_a_corrupt_cryptofeed_parquet_page_is_one_line(tmp_path: Path, canary: Path) -> None:
    src = tmp_path / "trades.parquet"
    pq.write_table(pa.table({"exchange": ["COINBASE"] * 5000, "symbol": ["BTC-USD"] * 5000,
                             "side": ["buy"] * 5000, "amount": np.arange(1, 5001) / 7,
                             "price": 20_000 + np.arange(5000) / 3, "id": [str(i) for i in range(5000)],
                             "timestamp": 1_655_510_401.0 + np.arange(5000),
                             "receipt_timestamp": 1_655_510_401.5 + np.arange(5000)}), src, compression="none")
    data = bytearray(src.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 2000] = os.urandom(2000)  # pages, not the footer: found only when read
    src.write_bytes(bytes(data))
    out = tmp_path / "ds"
    guard = Guard(tmp_path, out, canary)
    _import(out, src, fmt="cryptofeed").one_line_error(str(src))
    guard.unchanged()


def test_lobster_times_outside_int64_ns_are_bad_rows(tmp_path: Path) -> None:
    msg = tmp_path / "TEST_2012-06-21_34200000_57600000_message_20.csv"
    msg.write_text("34200.1,4,1,100,5000000,1\n1e300,4,2,100,5000100,1\n34200.3,4,3,100,5000200,-1\n")
    _import(tmp_path / "ds", msg, fmt="lobster").one_line_error("row 1", "timestamp outside int64 nanoseconds")
    res = _import(tmp_path / "ds", msg, fmt="lobster", policy="drop")
    assert res.code == 0 and "dropped 1 rows: timestamp outside" in res.output, res.output


@pytest.mark.parametrize("price", ["0", "-20000.5"])
def test_non_positive_prices_are_bad_rows(tmp_path: Path, canary: Path, price: str) -> None:
    rows = _trade_rows("coinbase", "BTC-USD")
    rows[2] = (*rows[2][:5], price, rows[2][6])
    src = _trades_csv(tmp_path / "t.csv", rows)
    out = tmp_path / "ds"
    guard = Guard(tmp_path, out, canary)
    _import(out, src).one_line_error("t.csv row 2", "price not > 0")
    guard.unchanged()
    res = _import(out, src, policy="drop")
    assert res.code == 0 and "dropped 1 rows: price not > 0" in res.output
    book = _book_csv(tmp_path / "coinbase_book_snapshot_25.csv", [("coinbase", "BTC-USD", T0_US, 5.0)])
    _import(tmp_path / "b", book).one_line_error("row 0", "price not > 0")  # its 11th bid is -0.0


def test_validate_finds_a_non_positive_price(tmp_path: Path) -> None:
    """A dataset written by something else, with a trade at price 0 and a consistent manifest:
    ``validate`` reports it (exit 1)."""
    src = _trades_csv(tmp_path / "t.csv", _trade_rows("coinbase", "BTC-USD"))
    out = tmp_path / "ds"
    assert _import(out, src).code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    entry = manifest["partitions"][0]
    t = pq.read_table(out / entry["path"])
    t = t.set_column(4, "price", pa.array([20_000.0, 0.0, 20_001.0]))
    pq.write_table(t, out / entry["path"])
    entry["hash"] = hash_parquet(out / entry["path"], t.schema)
    entry["bytes"] = (out / entry["path"]).stat().st_size
    manifest["content_hash"] = combine_hashes({entry["path"]: entry["hash"]})
    (out / "manifest.json").write_text(json.dumps(manifest))
    res = _cli("validate", out)
    assert res.code == 1 and "price not > 0" in res.output and "row 1" in res.output, res.output


# ---- the parameters are part of what a dataset is ---------------------------------------------


def test_an_edited_parameter_is_refused(tmp_path: Path, tiny_dir: Path) -> None:
    """The content hash covers rows and partitions, not the manifest's parameters: a symbol
    edited there once passed validate and run, and the results claimed the dataset's hash.
    Now validate and run refuse it, and compare refuses two runs that disagree on them."""
    ds = tmp_path / "ds"
    shutil.copytree(tiny_dir, ds)
    manifest = json.loads((ds / "manifest.json").read_text())
    manifest["params"]["symbol"] = "ETH-USD"
    (ds / "manifest.json").write_text(json.dumps(manifest))
    guard = Guard(tmp_path, tmp_path / "r")
    _cli("validate", ds).one_line_error("symbol", "ETH-USD", "BTC-USD")
    _cli("run", "--engines", "duckdb", "--data", ds, "--out", tmp_path / "r").one_line_error("symbol")
    guard.unchanged()
    assert not (tmp_path / "r").exists()


def test_compare_refuses_runs_whose_parameters_differ(compare_pair: tuple[Path, Path], tmp_path: Path) -> None:
    a, _ = compare_pair
    raw = json.loads(a.read_text())
    raw["params"]["symbol"] = "ETH-USD"
    raw["run_id"] = "edited"
    b = tmp_path / "b.json"
    b.write_text(json.dumps(raw))
    _cli("compare", a, b).one_line_error("different parameters", "symbol")


# ---- results files and compare --------------------------------------------------------------


@pytest.fixture(scope="module")
def compare_pair(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two real single-repetition runs (duckdb) of the tiny dataset."""
    paths = []
    for name in ("a", "b"):
        out = tmp_path_factory.mktemp("cmp") / name
        res = _cli("run", "--engines", "duckdb", "--data", tiny_dir, "--seed", str(TINY_SEED), "--out", out,
                   "--repetitions", "1", "--suite", "published")
        assert res.code == 0, res.output
        paths.append(out / "results.json")
    return paths[0], paths[1]


def test_compare_of_single_repetitions_says_what_it_could_not_test(compare_pair: tuple[Path, Path]) -> None:
    """With one repetition per query only W (its loads are repeated) can be tested: the output
    counts the others instead of a bare "no cell differs"."""
    a, b = compare_pair
    res = _cli("compare", a, b)
    assert res.code in (0, 1), res.output
    text = " ".join(res.output.split())
    assert f"{len(QUERIES)} of {len(QUERIES) + 2} timed cells not tested" in text
    assert "no cell differs" not in text or "(2 tested)" in text


def test_compare_with_nothing_tested_is_refused(compare_pair: tuple[Path, Path], tmp_path: Path) -> None:
    """Runs of the queries alone, one repetition each: nothing to compare, exit 2."""
    paths = []
    for name, src in zip("ab", compare_pair, strict=True):
        raw = json.loads(src.read_text())
        raw["records"] = [r for r in raw["records"] if r["benchmark"] not in ("W", "SE")]
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(raw))
    line = _cli("compare", *paths).one_line_error("nothing to compare", "--repetitions 2")
    assert "no cell differs" not in line


@pytest.mark.parametrize("damage", ["status", "samples", "records", "figures"])
def test_a_schema_invalid_record_is_one_line(compare_pair: tuple[Path, Path], tmp_path: Path, damage: str) -> None:
    a, _ = compare_pair
    raw = json.loads(a.read_text())
    rec = raw["records"][0]
    if damage == "status":
        rec["status"] = "fine"
    elif damage == "samples":
        rec["samples_ns"] = ["fast"]
    elif damage == "records":
        raw["records"] = {"not": "a list"}
    else:
        w = next(r for r in raw["records"] if r["benchmark"] == "W")
        w["figures"] = {"csv": "quick"}
    bad = tmp_path / "bad" / "results.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps(raw))
    guard = Guard(tmp_path, tmp_path / "bad")
    for res in (_cli("compare", a, bad), _cli("report", bad, "--out", tmp_path / "bad")):
        line = res.one_line_error(str(bad))
        assert "not a valid results file" in line or "do not fit" in line, line
    guard.unchanged()


# ---- imports that die -----------------------------------------------------------------------


def test_a_killed_import_is_cleaned_up_by_the_next(tmp_path: Path) -> None:
    """SIGKILL leaves the staging directory beside ``--out``; the next import (or generation)
    into the same place removes it."""
    n = 2_000_000
    src = tmp_path / "big.csv"
    ts = T0_US + np.arange(n, dtype=np.int64) * 1000
    pacsv.write_csv(pa.table({"exchange": ["coinbase"] * n, "symbol": ["BTC-USD"] * n, "timestamp": ts,
                              "local_timestamp": ts, "id": np.arange(1, n + 1), "side": ["buy"] * n,
                              "price": np.full(n, 20_000.5), "amount": np.full(n, 0.25)}),
                    src, pacsv.WriteOptions(quoting_style="none"))
    out = tmp_path / "ds"
    child = subprocess.Popen([sys.executable, "-m", "tickbench.cli", "import", "tardis", str(src), "--out", str(out),
                              "--memory-limit", "16"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob(f".ds.partial-*/{STAGE_OWNER}")):
            assert child.poll() is None, "the import ended before it could be killed"
            assert time.monotonic() < deadline, "no staging directory appeared"
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    [killed] = tmp_path.glob(".ds.partial-*")
    small = _trades_csv(tmp_path / "small.csv", _trade_rows("coinbase", "BTC-USD"))
    assert _import(out, small).code == 0
    assert not killed.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.csv", "ds", "small.csv"]


# ---- captures without trades, and days without data ------------------------------------------


def _venue_day(src: Path, venue: str, day: str, offset_us: int, trades: bool = True) -> list[Path]:
    """One venue's day: a snapshot every 60 s and (optionally) a trade every 45 s."""
    rng = np.random.default_rng([offset_us, int(day.replace("-", ""))])
    start = (dt.date.fromisoformat(day) - dt.date(1970, 1, 1)).days * 86_400_000_000 + offset_us
    ts = start + np.arange(1440, dtype=np.int64) * 60_000_000
    bid = 20_000.0 + 0.5 * np.cumsum(rng.integers(-2, 3, 1440))
    files = [_book_csv(src / f"{venue}_book_snapshot_25_{day}.csv",
                       [(venue, "BTC-USD", int(t), float(b)) for t, b in zip(ts, bid, strict=True)])]
    if trades:
        tts = start + 3_000_000 + np.arange(1920, dtype=np.int64) * 45_000_000
        mid = np.interp(tts, ts, bid + 0.25)
        # Trade ids are the µs timestamps: increasing with time across venues too (InfluxDB's
        # C-VT takes the highest id of a bucket as its last trade; see its README).
        files.append(_trades_csv(src / f"{venue}_trades_{day}.csv", [
            (venue, "BTC-USD", int(t), int(t), "buy" if i % 2 else "sell", round(float(m) + 0.25, 2),
             0.001 * (1 + i % 50)) for i, (t, m) in enumerate(zip(tts, mid, strict=True))]))
    return files


@pytest.fixture(scope="module")
def book_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real book-only capture: two days of one venue's snapshots, no trades at all."""
    tmp = tmp_path_factory.mktemp("book_only")
    src = tmp / "src"
    src.mkdir()
    files = [f for d in ("2024-03-04", "2024-03-05") for f in _venue_day(src, "coinbase", d, 7, trades=False)]
    res = _import(tmp / "ds", *files)
    assert res.code == 0, res.output
    assert _cli("validate", tmp / "ds").code == 0
    return tmp / "ds"


@pytest.fixture(scope="module")
def with_gaps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30 days of one venue, then five venues on a day two days after the last: the month the
    importer derives (2022-06-21 … 2022-07-20) holds two days without data."""
    tmp = tmp_path_factory.mktemp("gaps")
    src = tmp / "src"
    src.mkdir()
    first = dt.date(2022, 6, 18)
    files = [f for i in range(30) for f in _venue_day(src, "coinbase", (first + dt.timedelta(days=i)).isoformat(), 7)]
    for v, venue in enumerate(("coinbase", "binance-us", "kraken", "bitstamp", "gemini")):
        files += _venue_day(src, venue, "2022-07-20", 7 + 13 * v)
    res = _import(tmp / "ds", *files)
    assert res.code == 0, res.output
    ds = open_dataset(tmp / "ds")
    assert ds.params["month"] == ["2022-06-21", "2022-07-20"]
    assert not ds.files("book", ["2022-07-18", "2022-07-19"])
    assert _cli("validate", tmp / "ds").code == 0
    return tmp / "ds"


def test_reference_answers_of_a_book_only_capture(book_only: Path) -> None:
    """Nothing to read is an empty answer of the answer's columns, not an error."""
    ds = open_dataset(book_only)
    assert ds.files("trades") == [] and ds.read("trades").num_rows == 0
    assert ds.scan("trades", ["2024-03-04"]).collect().columns == [
        *pq.read_schema(ds.files("book")[0]).names[:3], "side", "price", "amount", "trade_id"]
    params = query_params(ds.params, TINY_SEED)
    for qid, fn in REFERENCES.items():
        answer = fn(ds, params)
        reads_trades = qid in ("T-V1", "T-V2", "T-VWAP", "C-VT")
        assert (answer.height == 0) == reads_trades, qid
    assert pacsv.read_csv(ds.csv_file("trades")).num_rows == 0  # the header alone: W loads no trades


def _engines(kinds: tuple[str, ...]) -> list[object]:
    out: list[object] = []
    for name, info in engine_infos().items():
        if info.kind in kinds:
            marks = [pytest.mark.slow] + ([pytest.mark.server] if info.kind == "server" else [])
            out.append(pytest.param(name, marks=marks, id=name))
    return out


def _run_verifies(engines: list[str], data: Path, out: Path) -> None:
    """``tickbench run`` of ``engines`` on ``data`` exits 0 with every cell verified (✔) or a
    stated ``unsupported``/``not_applicable``, and leaves nothing running."""
    names = [e for e in engines if availability(e).available]
    if not names:
        pytest.skip(f"none of {engines} is available here: " + "; ".join(availability(e).reason for e in engines))
    guard = Guard(out.parent, out)
    res = _cli("run", "--engines", ",".join(names), "--data", data, "--out", out, "--repetitions", "1",
               "--timeout", "300")
    assert res.code == 0, res.output
    guard.unchanged()
    results = read_results(out / "results.json")
    assert {r.engine for r in results.records} == set(names)
    for r in results.records:
        info = engine_infos()[r.engine]
        if r.benchmark in info.unsupported:
            assert r.status in ("unsupported", "not_applicable") and r.reason, (r.engine, r.benchmark)
        else:
            assert (r.status, r.verified) == ("ok", True), f"{r.engine} {r.benchmark}: {r.status} {r.reason}"
    assert {r.benchmark for r in results.records} >= {q.id for q in QUERIES}


EMBEDDED = ("embedded", "in-memory")


@pytest.mark.slow
def test_a_book_only_capture_runs_on_every_embedded_engine(book_only: Path, tmp_path: Path) -> None:
    """One run, every embedded engine: an engine's failure would stop the run for those after it."""
    _run_verifies([n for n, i in engine_infos().items() if i.kind in EMBEDDED], book_only, tmp_path / "run")


@pytest.mark.slow
def test_days_without_data_run_on_every_embedded_engine(with_gaps: Path, tmp_path: Path) -> None:
    _run_verifies([n for n, i in engine_infos().items() if i.kind in EMBEDDED], with_gaps, tmp_path / "run")


ODD_DIR = "odd]dir,x'y {1}"  # glob, list and quote characters in the user's own directories


def _under_odd_dir(data: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of ``data`` and a run directory, both under a directory whose name engines' path
    syntaxes (ClickHouse's file() globs, SQL string literals) would misread."""
    odd = tmp_path / ODD_DIR
    shutil.copytree(data, odd / "data")
    return odd / "data", odd / "run"


@pytest.mark.slow
def test_hostile_names_run_on_every_embedded_engine(hostile_names: Path, tmp_path: Path) -> None:
    """Hostile names in the data, and the dataset and the run under a directory named with
    ``]``, ``,``, ``'``, ``{`` and a space."""
    embedded = [n for n, i in engine_infos().items() if i.kind in EMBEDDED]
    _run_verifies(embedded, *_under_odd_dir(hostile_names, tmp_path))


@pytest.mark.parametrize("engine", _engines(("server",)))
def test_server_engines_on_hostile_data(engine: str, book_only: Path, with_gaps: Path, hostile_names: Path,
                                        tmp_path: Path) -> None:
    for name, data in (("book_only", book_only), ("gaps", with_gaps)):
        _run_verifies([engine], data, tmp_path / name)
    _run_verifies([engine], *_under_odd_dir(hostile_names, tmp_path))


@pytest.mark.slow
def test_a_reference_that_cannot_be_read_fails_its_cell_not_the_run(tiny_dir: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A dataset error while computing a reference answer is that cell's failure: the run goes
    on, through every engine, and ends with its results."""
    def unreadable(ds: Dataset, p: object) -> pl.DataFrame:
        raise DatasetError(f"{ds.root}: a partition vanished")

    monkeypatch.setitem(REFERENCES, "O-S", unreadable)
    out = tmp_path / "run"
    res = _cli("run", "--engines", "polars,duckdb", "--data", tiny_dir, "--out", out, "--repetitions", "1")
    assert res.code == 0, res.output
    results = read_results(out / "results.json")
    for engine in ("polars", "duckdb"):
        bad = results.record(engine, "O-S")
        assert bad is not None and bad.status == "error" and "a partition vanished" in bad.reason
        assert all(r.status in ("ok", "not_applicable") for r in results.records
                   if r.engine == engine and r.benchmark != "O-S")
