"""A dataset on disk: its layout, manifest, content hash, and the readers built on them.

Layout of a paper dataset directory (``--dataset paper``)::

    manifest.json
    trades/<day>/<E>__<S>.parquet   (zstd, rows in time order)
    book/<day>/<E>__<S>.parquet
    csv/trades_<bulk day>.csv       (the bulk-load day, all instruments, time order)
    csv/book_<bulk day>.csv

``<E>`` and ``<S>`` are the file-name forms of the exchange and the instrument
(:func:`file_name`): the name itself when it is plain, else an encoded form. Names come from
data, and data is hostile: no name ever becomes a path as it is, every path a manifest names
is checked to stay inside the dataset (:func:`inside`), and the real names are kept in the
manifest's partition entries (``exchange``, ``sym``), which are what readers go by.

Layout of a market dataset (``--dataset market``, SPEC §1.3; the manifest's ``kind`` says which)::

    manifest.json
    instruments.parquet                      (one row per instrument, by rank)
    quotes/<day>/block-<b>.parquet           (zstd; ranks (4**(b-1), 4**b]; rows by sym, then
    trades/<day>/block-<b>.parquet            ts, exchange, seq / trade_id)
    csv/quotes_<D>.csv, csv/trades_<D>.csv   (day D, every instrument, by ts, sym, exchange, seq)

The content hash is computed from the rows, not from the Parquet bytes, so it does not depend
on the Parquet writer's version: per partition, a BLAKE2b over each column's values in a
canonical binary form; for the dataset, a BLAKE2b over the sorted partition hashes.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime as dt
import errno
import hashlib
import json
import multiprocessing
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import psutil
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from tickbench import __version__
from tickbench.data.cluster import ClusterError, check_address, cluster_map
from tickbench.data.derive import derive_params
from tickbench.data.locks import LockBusy, LockRefused, exclusive
from tickbench.datasets.market import calendar as mc
from tickbench.datasets.market.generator import generate_block
from tickbench.datasets.market.schema import MARKET_SCHEMAS, MARKET_TABLES
from tickbench.datasets.paper import calendar as cal
from tickbench.datasets.paper.generator import generate_partition
from tickbench.datasets.paper.schema import SCHEMAS, TABLES

MANIFEST = "manifest.json"
FORMAT_VERSION = 1
GENERATOR_VERSION = "1"  # bump when the generator's output changes (see CHANGELOG.md)
MARKET_GENERATOR_VERSION = "1"  # the same, for the market dataset's generator
MAX_SCALE = 100.0
PAPER, MARKET = "paper", "market"
KINDS = (PAPER, MARKET)
MARKET_ROW_GROUP = 131_072  # rows per Parquet row group of a market part file (sym-ordered: readers skip groups)


class DatasetError(Exception):
    """A dataset directory is missing, incomplete, or not the dataset asked for."""


def joined_utf8(strings: pa.Array) -> bytes:
    """``"\\x00".join(strings.to_pylist()).encode()`` without a Python object per value."""
    if strings.null_count:
        raise ValueError("a string column with nulls has no canonical hash")
    if len(strings) == 0:
        return b""
    if pc.all(pc.equal(strings, strings[0])).as_py():  # one value throughout (exchange, sym)
        return (str(strings[0].as_py()).encode() + b"\x00") * (len(strings) - 1) + str(
            strings[0].as_py()).encode()
    values = strings.cast(pa.large_string())
    lists = pa.LargeListArray.from_arrays(pa.array([0, len(values)], pa.int64()), values)
    joined = pc.binary_join(lists, pa.scalar("\x00", pa.large_string()))[0]
    return joined.as_buffer().to_pybytes()


def hash_table(table: pa.Table) -> str:
    """The canonical content hash of one partition table."""
    h = hashlib.blake2b(digest_size=16)
    h.update(str(table.num_rows).encode())
    for name, col in zip(table.column_names, table.columns, strict=True):
        h.update(name.encode() + b"\x00")
        chunk = col.combine_chunks()
        if pa.types.is_string(chunk.type) or pa.types.is_large_string(chunk.type):
            h.update(joined_utf8(chunk))
        elif pa.types.is_timestamp(chunk.type):
            h.update(np.ascontiguousarray(chunk.view(pa.int64()).to_numpy(), "<i8").data)
        else:
            dtype = "<f8" if pa.types.is_floating(chunk.type) else "<i8"
            h.update(np.ascontiguousarray(chunk.to_numpy(), dtype).data)
    return h.hexdigest()


CSV_OPTIONS = pacsv.WriteOptions(quoting_style="none")
# RFC 4180 quoting of every string field, for a CSV whose names hold a comma or a quote (the
# header is quoted either way); every engine's CSV reader reads both.
CSV_QUOTED = pacsv.WriteOptions(quoting_style="needed")
_STRUCTURAL = re.compile(r"[\",\r\n]")


def needs_quoting(table: pa.Table | Iterable[str]) -> bool:
    """Whether a CSV of ``table`` (or of rows with these names) needs quoted fields: some string
    value holds a comma, a quote or a line break. Generated names never do."""
    if isinstance(table, pa.Table):
        # distinct values only: exchange, sym and side repeat on every row
        return any(needs_quoting(v for v in pc.unique(col).to_pylist() if v is not None)
                   for col in table.columns if pa.types.is_string(col.type) or pa.types.is_large_string(col.type))
    return any(_STRUCTURAL.search(v) for v in table)


def csv_options(quoted: bool) -> pacsv.WriteOptions:
    """The dataset CSV's write options: unquoted as ever, or quoted where names need it."""
    return CSV_QUOTED if quoted else CSV_OPTIONS

_POW10 = 10 ** np.arange(19, dtype=np.int64)
# Trailing decimal zeros of 1..9999 (and 4 for 0, the low four digits of a multiple of 10**4).
_TRAILING_ZEROS = np.array([4] + [len(str(x)) - len(str(x).rstrip("0")) for x in range(1, 10_000)], np.int8)


def _csv_write_size(table: pa.Table, options: pacsv.WriteOptions = CSV_OPTIONS) -> int:
    sink = pa.MockOutputStream()
    pacsv.write_csv(table, sink, options)
    return int(sink.size())


def _float_text_bytes(values: np.ndarray) -> int:
    """Bytes of ``values`` as the CSV writer formats them (shortest round-trip text), summed.

    Every generated price and size is a whole count of ticks or lots over a power of ten, so its
    shortest text is that decimal. A value that is exactly ``k / 10**8`` with ``k < 10**15`` (at
    most 15 significant digits, so no shorter text maps to the same double) and a decimal
    exponent in [-6, 9] is written in fixed notation: its integer digits, then a point and the
    fractional digits without trailing zeros (``30000``, ``0.5``, ``0.00012``); that length is
    counted with float arithmetic that is exact on these integers. Any other value (scientific
    notation, more digits) is measured by the writer's own formatting.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return 0
    with np.errstate(invalid="ignore", over="ignore"):
        if v.min() >= 1e-6 and v.max() < 1e7:  # positive, in range, k < 10**15: the usual case
            a = v
            k = np.rint(v * 1e8)
            ok = k / 1e8 == v
        else:
            a = np.abs(v)
            k = np.rint(a * 1e8)
            ok = (k / 1e8 == a) & (k < 1e15) & (a >= 1e-6) & (a < 1e10)
    other = 0
    if not ok.all():
        rest = pa.array(v[~ok]).cast(pa.string())
        other = int(pc.sum(pc.binary_length(rest)).as_py() or 0)
        v, a, k = v[ok], a[ok], k[ok]
    if v.size == 0:
        return other
    whole = np.floor(a)
    # Integer digits: those of the smallest, plus one per further power of ten reached ("0" is
    # one digit); most columns hold values of one magnitude, so this is a min and a max.
    lo, hi = len(str(int(whole.min()))), len(str(int(whole.max())))
    total = v.size * lo + sum(int(np.count_nonzero(whole >= 10.0**j)) for j in range(lo, hi))
    # Fractional digits: 8 less the trailing zeros of the fraction (an integer below 10**8,
    # exact as k < 10**15), plus the point; a zero fraction writes neither.
    frac = (k - whole * 1e8).astype(np.int32)
    nonzero = int(np.count_nonzero(frac))
    # Trailing zeros of each non-zero fraction, from a table of those of its low four digits,
    # and of its high four where the low ones are all zero.
    low = frac % np.int32(10_000)
    trailing = int(_TRAILING_ZEROS.take(low).sum(dtype=np.int64)) - 4 * (v.size - nonzero)
    high = frac[low == 0] // np.int32(10_000)
    trailing += int(_TRAILING_ZEROS.take(high[high != 0]).sum(dtype=np.int64))
    total += 9 * nonzero - trailing
    total += int(np.count_nonzero(v < 0))
    return total + other


def _column_text_bytes(col: pa.ChunkedArray) -> int:
    """Bytes of one column's values as the CSV writer formats them (no separators), summed."""
    t = col.type
    if col.null_count == 0 and len(col) > 0:
        if pa.types.is_float64(t):
            # In slices that stay in cache: the arithmetic makes several passes over each.
            return sum(_float_text_bytes(x[i:i + 32_768])
                       for x in (c.to_numpy(zero_copy_only=False) for c in col.chunks)
                       for i in range(0, len(x), 32_768))
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            # quoting_style="none": the bytes as they are.
            return int(pc.sum(pc.binary_length(col)).as_py())
        if pa.types.is_int64(t):
            x = np.concatenate([c.to_numpy() for c in col.chunks])
            if x.min() > -(10**18):
                return int(np.maximum(np.searchsorted(_POW10, np.abs(x), side="right"), 1).sum()
                           + np.count_nonzero(x < 0))
        if pa.types.is_timestamp(t) and t.unit == "ns" and t.tz == "UTC":
            # "YYYY-MM-DD hh:mm:ss.fffffffffZ": 30 bytes for years 1970 to 2261.
            ns = np.concatenate([c.view(pa.int64()).to_numpy() for c in col.chunks])
            if ns.min() >= 0:
                return 30 * len(col)
    # Anything else: the writer's own text, less its header line and the newline of each row.
    one = pa.table([col], names=["x"])
    return _csv_write_size(one) - _csv_write_size(one.slice(0, 0)) - len(col)


def csv_size(table: pa.Table) -> int:
    """Bytes of ``table`` written as the dataset's CSV (header included), without writing it:
    SE's denominator for rows that exist only as Parquet. Equal, byte for byte, to the size of
    ``pyarrow.csv.write_csv(table, ..., CSV_OPTIONS)``; computed from the values (the writer's
    float formatting is the generator's largest cost otherwise)."""
    header = _csv_write_size(table.slice(0, 0))
    n = table.num_rows
    if n == 0:
        return header
    if needs_quoting(table):  # names with a comma or a quote (imported data only): the writer's own count
        return _csv_write_size(table, CSV_QUOTED)
    return header + n * table.num_columns + sum(_column_text_bytes(c) for c in table.columns)


def combine_hashes(partition_hashes: dict[str, str]) -> str:
    """The dataset hash from ``{"<table>/<partition>": hash}``."""
    h = hashlib.blake2b(digest_size=16)
    for key in sorted(partition_hashes):
        h.update(f"{key}={partition_hashes[key]}\n".encode())
    return h.hexdigest()


#: The most bytes of UTF-8 an exchange or instrument name may have. Real names are far shorter
#: (the longest option symbols are about 25 characters); every engine keeps a name as a key, a
#: tag or a symbol, and some bound those (ArcticDB's symbol keys, file names).
MAX_NAME_BYTES = 64
# C0 controls, DEL, C1 controls: no venue names an instrument with a line break, a tab or a NUL,
# and they break the CSV, the engines' text protocols and the terminal.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# A plain name is its own file name: ASCII letters and digits, "." and "-", starting with a
# letter or digit, at most 32 characters. Never "_" (it separates exchange and sym) nor "~".
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,31}")
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]+")
ENCODED_MARK = "~"  # in an encoded file name only: no plain name holds it
READABLE_CHARS = 24  # of an encoded file name, before the mark
# Every part of a path a manifest names: what file_name, partition_path and csv_path produce.
_PATH_PART = re.compile(r"[A-Za-z0-9~][A-Za-z0-9._~-]*")


def name_problem(name: object) -> str | None:
    """Why ``name`` (an exchange or instrument from data) cannot be used, or None when it can:
    any valid UTF-8 of 1 to :data:`MAX_NAME_BYTES` bytes without control characters."""
    if not isinstance(name, str) or not name:
        return "an empty name"
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > MAX_NAME_BYTES:
        return f"a name of {size:,} bytes (at most {MAX_NAME_BYTES} bytes of UTF-8)"
    if _CONTROL.search(name):
        return "a name holding a control character (a line break, tab or NUL)"
    return None


def file_name(name: str) -> str:
    """The file-name form of an exchange or instrument name.

    A plain name (ASCII letters, digits, ``.`` and ``-``, starting with a letter or digit, at
    most 32 characters: ``COINBASE``, ``BTC-USD``) is its own file name, so generated datasets
    keep their paths and content hash. Any other name becomes a readable part (its ASCII letters
    and digits, each run of other characters as one ``-``, without a leading or trailing ``-``,
    at most 24 characters; possibly empty) then ``~`` and the 16 hex digits of the 8-byte
    BLAKE2b of its UTF-8: ``XBT/USD`` → ``XBT-USD~<16 hex>``, ``ÉCHANGE`` → ``CHANGE~<16 hex>``.
    ``~`` is in no plain name, so the two forms never meet; the form is at most 41 characters
    whatever the name; the real name is in the manifest."""
    if _PLAIN.fullmatch(name):
        return name
    readable = _NOT_ALNUM.sub("-", name).strip("-")[:READABLE_CHARS].rstrip("-")
    digest = hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return f"{readable}{ENCODED_MARK}{digest}"


def partition_path(table: str, day: dt.date, exchange: str, sym: str) -> str:
    """Where the partition of (``table``, ``day``, ``exchange``, ``sym``) lives, relative to the
    dataset: ``<table>/<day>/<file_name(exchange)>__<file_name(sym)>.parquet``."""
    return f"{table}/{day.isoformat()}/{file_name(exchange)}__{file_name(sym)}.parquet"


def csv_path(table: str, day: dt.date = cal.BULK_DAY) -> str:
    return f"csv/{table}_{day.isoformat()}.csv"


def inside(root: Path, rel: object, what: str = "a path") -> Path:
    """``root / rel`` for a path named by a manifest or built from data, refused (DatasetError)
    unless ``rel`` is relative, made of the parts the layout uses (letters, digits, ``._~-``; no
    ``..``, no empty part) and, with every symbolic link resolved, still inside ``root``."""
    if not isinstance(rel, str) or not rel or not all(_PATH_PART.fullmatch(p) for p in rel.split("/")):
        raise DatasetError(f"{root}: {what} {shown(rel)} is not a path inside the dataset; "
                           "the manifest was edited or written by something else: regenerate or re-import it")
    path = root / rel
    if not path.resolve().is_relative_to(root.resolve()):
        raise DatasetError(f"{root}: {what} {rel} leads outside the dataset (a symbolic link); "
                           "refused: regenerate or re-import the dataset")
    return path


def shown(value: object, limit: int = 80) -> str:
    """``value`` for a one-line message: quoted, escaped, and cut to about ``limit`` characters."""
    text = json.dumps(value, ensure_ascii=True) if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else f"{text[:limit]}…({len(text):,} characters)"


@dataclass
class Manifest:
    """What a dataset directory holds; written last, so its presence means the data is whole."""

    scale: float
    seed: int
    symbols: int
    content_hash: str
    partitions: list[dict[str, Any]]
    csv: dict[str, dict[str, Any]]
    params: dict[str, Any]
    source: str = "generated"
    format_version: int = FORMAT_VERSION
    generator_version: str = GENERATOR_VERSION
    tickbench_version: str = __version__
    extra: dict[str, Any] = field(default_factory=dict)
    kind: str = PAPER  # "paper" (SPEC §1) or "market" (SPEC §1.3)
    universe: int | None = None  # market: how many instruments
    calendar: dict[str, Any] | None = None  # market: trading days, session, venues

    def to_json(self) -> str:
        fields = dict(self.__dict__)
        if self.kind == PAPER:  # a paper manifest keeps the form it always had
            for key in ("kind", "universe", "calendar"):
                fields.pop(key)
        return json.dumps(fields, indent=1, sort_keys=True)

    @classmethod
    def read(cls, directory: Path) -> Manifest:
        path = directory / MANIFEST
        if not path.is_file():
            raise DatasetError(
                f"{directory}: no {MANIFEST}; not a tickbench dataset "
                "(create one with `tickbench generate --out DIR`)"
            )
        try:
            raw = json.loads(path.read_text())
            if not isinstance(raw, dict):
                raise TypeError("not a JSON object")
            if raw.get("format_version") != FORMAT_VERSION:
                raise DatasetError(
                    f"{path}: dataset format {shown(raw.get('format_version'))} is not "
                    f"{FORMAT_VERSION}; regenerate it with this tickbench"
                )
            if raw.get("kind", PAPER) not in KINDS:
                raise DatasetError(f"{path}: dataset kind {shown(raw.get('kind'))} is not one of {', '.join(KINDS)}")
            manifest = cls(**raw)
        except (json.JSONDecodeError, UnicodeDecodeError, TypeError) as exc:
            raise DatasetError(f"{path}: unreadable manifest ({exc}); regenerate the dataset") from exc
        check_manifest(directory, manifest)
        return manifest


_ENTRY_TYPES = {"table": str, "day": str, "exchange": str, "sym": str, "path": str, "rows": int, "bytes": int,
                "hash": str}


def check_manifest(directory: Path, m: Manifest) -> None:
    """Refuse a manifest whose entries are not what this tickbench writes: a path leading
    outside ``directory``; a partition entry (one per table, day, exchange, sym) with a missing
    or mistyped field, a name :func:`name_problem` refuses, or a path other than
    :func:`partition_path` of its own fields; and parameters other than those its data
    determine (:func:`expected_params`), which the content hash does not cover."""
    where = directory / MANIFEST
    fix = "the manifest was edited or written by something else: regenerate or re-import the dataset"
    if not isinstance(m.partitions, list) or not isinstance(m.csv, dict) or not isinstance(m.params, dict):
        raise DatasetError(f"{where}: partitions, csv or params of the wrong type; {fix}")
    for i, e in enumerate(m.partitions):
        if not isinstance(e, dict) or not isinstance(e.get("path"), str) or not isinstance(e.get("table"), str):
            raise DatasetError(f"{where}: partition entry {i} has no table or path; {fix}")
        inside(directory, e["path"], f"partition entry {i}'s path")
        if "exchange" in e or "sym" in e:  # a partition of one (exchange, sym): the layout above
            _check_partition_entry(where, i, e, fix)
        else:
            bad = [k for k, t in _COUNTED_TYPES.items() if not isinstance(e.get(k), t) or isinstance(e.get(k), bool)
                   or (t is int and e[k] < 0)]
            if bad:
                raise DatasetError(f"{where}: partition entry {i} ({shown(e['path'])}) lacks {', '.join(bad)} (or "
                                   f"has the wrong type); {fix}")
    for table, e in m.csv.items():
        if not isinstance(e, dict) or not isinstance(e.get("path"), str):
            raise DatasetError(f"{where}: csv entry {shown(table)} has no path; {fix}")
        inside(directory, e["path"], f"the {table} CSV's path")
        if not isinstance(e.get("rows"), int) or isinstance(e.get("rows"), bool) or e["rows"] < 0:
            raise DatasetError(f"{where}: csv entry {shown(table)} lacks rows (or has the wrong type); {fix}")
    if m.kind == MARKET:
        _check_market_manifest(where, m, fix)
    expected = expected_params(m)
    if m.params != expected:
        diff = ", ".join(f"{k} {shown(m.params.get(k))} (its data give {shown(v)})"
                         for k, v in expected.items() if m.params.get(k) != v) or "extra keys"
        raise DatasetError(f"{where}: parameters not those its data determine: {diff}. The content hash does "
                           f"not cover them, so a run would claim it measured this dataset; {fix}")


_COUNTED_TYPES = {"rows": int, "bytes": int, "hash": str}


def _check_market_manifest(where: Path, m: Manifest, fix: str) -> None:
    """A market manifest's fields that change a run, each checked against what its data (and,
    generated, the generator) determine; a refusal names the field. What cannot be checked
    here (rows, venues, scale, seed: they need the data) :func:`check_market_data` checks."""
    try:
        calendar = mc.calendar_of(m.calendar)
    except ValueError as exc:
        raise DatasetError(f"{where}: its calendar: {exc}; {fix}") from None
    if m.symbols != 0:
        raise DatasetError(f"{where}: symbols {shown(m.symbols)}: a market dataset has none (0); {fix}")
    generated = m.source == "generated"
    if generated and m.calendar != mc.calendar_dict():
        raw = m.calendar or {}
        wrong = [k for k in ("days", "session", "venues") if raw.get(k) != mc.calendar_dict()[k]] or ["keys"]
        raise DatasetError(f"{where}: calendar.{wrong[0]} is not the generated calendar's, which a generated "
                           f"dataset has; {fix}")
    if not generated and (m.scale != 1.0 or m.seed != 0):
        field_ = "scale" if m.scale != 1.0 else "seed"
        raise DatasetError(f"{where}: {field_} {shown(getattr(m, field_))}: an imported dataset's is "
                           f"{'1' if field_ == 'scale' else '0'}; {fix}")
    if isinstance(m.universe, bool) or not isinstance(m.universe, int) or m.universe < 1:
        raise DatasetError(f"{where}: universe {shown(m.universe)} is not a count of instruments; {fix}")
    inst = [e for e in m.partitions if e["table"] == "instruments"]
    if len(inst) != 1 or inst[0]["path"] != INSTRUMENTS_PATH:
        raise DatasetError(f"{where}: not one instruments entry at {INSTRUMENTS_PATH}; {fix}")
    if inst[0]["rows"] != m.universe:
        raise DatasetError(f"{where}: universe {m.universe}, and its instruments entry has {inst[0]['rows']} rows; "
                           f"{fix}")
    days = set(calendar.days)
    for i, e in enumerate(m.partitions):
        if e["table"] == "instruments":
            continue
        if e["table"] not in MARKET_TABLES or not isinstance(e.get("block"), int) or e.get("day") not in days:
            raise DatasetError(f"{where}: partition entry {i} ({shown(e['path'])}): table, block or day "
                               f"{shown(e.get('day'))} not one of its calendar's; {fix}")
        if e["path"] != f"{e['table']}/{e['day']}/block-{e['block']}.parquet":
            raise DatasetError(f"{where}: partition entry {i}'s day {shown(e['day'])} or block {shown(e['block'])} "
                               f"is not that of its path {shown(e['path'])}; {fix}")
    if generated:
        n = m.universe
        want = {(t, b.day.isoformat(), b.index): [[b.first_rank, b.last_rank],
                                                  [mc.sym_of(b.first_rank, n), mc.sym_of(b.last_rank, n)]]
                for b in mc.blocks(n) for t in MARKET_TABLES}
        have = {(e["table"], e["day"], e["block"]): [e.get("ranks"), e.get("syms")]
                for e in m.partitions if e["table"] != "instruments"}
        if set(have) != set(want) or len(have) != len(m.partitions) - 1:
            raise DatasetError(f"{where}: partitions not the part files of universe {m.universe} (a day or block "
                               f"added, removed or repeated); {fix}")
        for key, (ranks, syms) in have.items():
            if [ranks, syms] != want[key]:
                raise DatasetError(f"{where}: the ranks or syms of {key[0]}/{key[1]}/block-{key[2]} are not those "
                                   f"of its block; {fix}")
    for table, e in m.csv.items():
        day_rows = sum(p["rows"] for p in m.partitions if p["table"] == table and p.get("day") == m.params.get("D"))
        if e["rows"] != day_rows:
            raise DatasetError(f"{where}: the {table} CSV's rows {e['rows']}, and its day D partitions hold "
                               f"{day_rows}; {fix}")


def check_market_data(directory: Path, m: Manifest, venues_seen: set[str]) -> None:
    """The market manifest's fields only the data can check: its venues (those of the quotes,
    ``venues_seen``), and for a generated dataset its seed and universe (the instruments table
    is regenerated from them) and its scale (day 1's first part file is regenerated at it);
    DatasetError naming the field."""
    where = directory / MANIFEST
    fix = "the manifest was edited or written by something else: regenerate or re-import the dataset"
    venues = set(m.calendar["venues"]) if isinstance(m.calendar, dict) else set()
    # Generated: exactly the generator's (the calendar check); imported: every venue quoted is one
    # of the calendar's (an import may keep a venue whose instruments it dropped).
    if not venues_seen <= venues:
        raise DatasetError(f"{where}: calendar.venues {shown(sorted(venues))} are not the venues of its quotes "
                           f"{shown(sorted(venues_seen))}; {fix}")
    if m.source != "generated":
        return
    assert m.universe is not None
    entries = {e["path"]: e for e in m.partitions}
    inst = mc.instruments_table(mc.universe_instruments(m.seed, m.universe))
    if hash_table(inst) != entries[INSTRUMENTS_PATH]["hash"]:
        raise DatasetError(f"{where}: seed {m.seed} (universe {m.universe}) does not give its instruments table; {fix}")
    first = next(b for b in mc.blocks(m.universe) if b.index == 0 and b.day == mc.DAYS[0])
    data = generate_block(m.seed, first, m.universe, m.scale)
    for table in MARKET_TABLES:
        if hash_table(getattr(data, table)) != entries[first.path(table)]["hash"]:
            raise DatasetError(f"{where}: scale {m.scale:g} does not give its data ({first.path(table)} regenerated "
                               f"at scale {m.scale:g} differs); {fix}")


def _check_partition_entry(where: Path, i: int, e: dict[str, Any], fix: str) -> None:
    bad = [k for k, t in _ENTRY_TYPES.items() if not isinstance(e.get(k), t)]
    if bad:
        raise DatasetError(f"{where}: partition entry {i} lacks {', '.join(bad)} (or has the wrong type); {fix}")
    for key in ("exchange", "sym"):
        if (problem := name_problem(e[key])) is not None:
            raise DatasetError(f"{where}: partition entry {i} has {key} {shown(e[key])}: {problem}; "
                               "this tickbench refuses such names")
    try:
        day = dt.date.fromisoformat(e["day"])
    except ValueError:
        raise DatasetError(f"{where}: partition entry {i} has day {shown(e['day'])}, not a date; {fix}") from None
    if e["table"] not in TABLES or e["path"] != partition_path(e["table"], day, e["exchange"], e["sym"]):
        raise DatasetError(f"{where}: partition entry {i} ({shown(e['table'])}, {e['day']}, "
                           f"{shown(e['exchange'])}, {shown(e['sym'])}) names the path {shown(e['path'])}, "
                           f"not the layout's; {fix}")


def expected_params(m: Manifest) -> dict[str, Any]:
    """The benchmark parameters a dataset's data determine: the calendar's (SPEC §2) for a
    generated dataset, those derived from the partitions for an imported one."""
    if m.source == "generated":
        return dict(mc.default_params()) if m.kind == MARKET else default_params()
    if m.kind == MARKET and isinstance(m.source, str) and m.source.startswith("import:"):
        try:
            return dict(mc.params_of(mc.calendar_of(m.calendar)))
        except ValueError as exc:
            raise DatasetError(f"an imported market dataset's calendar: {exc}; re-import it") from None
    if isinstance(m.source, str) and m.source.startswith("import:"):
        if not m.partitions:
            raise DatasetError("an imported dataset without partitions; re-import it")
        return derive_params(m.partitions)
    raise DatasetError(f"dataset source {shown(m.source)}: unknown to this tickbench (generated or import:FORMAT)")


def default_params() -> dict[str, Any]:
    """The benchmark parameters of SPEC §2 for the generated calendar."""
    month = cal.month_days()
    return {
        "day": cal.MONTH_START.isoformat(),
        "week": [month[0].isoformat(), month[6].isoformat()],
        "month": [month[0].isoformat(), month[-1].isoformat()],
        "symbol": "BTC-USD",
        "multi_day": cal.MULTI_DAY.isoformat(),
        "bulk_day": cal.BULK_DAY.isoformat(),
    }


def check_scale(scale: float) -> None:
    if not (scale > 0 and np.isfinite(scale)) or scale > MAX_SCALE:
        raise DatasetError(f"--scale {scale}: must be a number in (0, {MAX_SCALE:g}]")


def check_seed(seed: int) -> None:
    if seed < 0 or seed >= 2**63:
        raise DatasetError(f"--seed {seed}: must be an integer in [0, 2**63)")


def _gen_task(args: tuple[int, cal.Partition, int, str]) -> dict[str, Any]:
    """Generate and write one partition into the staging directory ``out`` (run in a worker
    process, or a cluster worker that sees ``out`` on a shared filesystem)."""
    seed, part, symbols, out = args
    if not Path(out).is_dir():
        raise DatasetError(f"worker {socket.gethostname()}: cannot see the output directory {out}; "
                           "with --cluster, --out must be on a filesystem every worker mounts at the same path")
    data = generate_partition(seed, part, cal.instrument(part.sym, symbols))
    rows = []
    for table in TABLES:
        t = getattr(data, table)
        rel = partition_path(table, part.day, part.exchange, part.sym)
        dest = Path(out) / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(t, dest, compression="zstd", use_dictionary=["exchange", "sym", "side"])
        rows.append({
            "table": table, "day": part.day.isoformat(), "exchange": part.exchange,
            "sym": part.sym, "path": rel, "rows": t.num_rows, "bytes": dest.stat().st_size,
            "csv_bytes": csv_size(t), "hash": hash_table(t),
        })
    return {"rows": rows, "generator_version": GENERATOR_VERSION, "tickbench_version": __version__}


ProgressFn = Callable[[int, int], None]


def check_dataset(dataset: str, symbols: int, universe: int | None) -> None:
    """Refuse an unknown dataset kind and options that do not belong to it."""
    if dataset not in KINDS:
        raise DatasetError(f"--dataset {dataset}: must be one of {', '.join(KINDS)}")
    if dataset == PAPER and universe is not None:
        raise DatasetError("--universe applies to --dataset market; the paper dataset's extra instruments "
                           "are --symbols N")
    if dataset == MARKET:
        if symbols:
            raise DatasetError("--symbols applies to --dataset paper; the market dataset's size is --universe N")
        if universe is not None and not mc.MIN_UNIVERSE <= universe <= mc.MAX_UNIVERSE:
            raise DatasetError(f"--universe {universe}: must be in [{mc.MIN_UNIVERSE}, {mc.MAX_UNIVERSE:,}]")


def generate(
    out: Path,
    scale: float,
    seed: int,
    symbols: int = 0,
    jobs: int = 1,
    progress: ProgressFn | None = None,
    cluster: str | None = None,
    dataset: str = PAPER,
    universe: int | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> Manifest:
    """Generate the dataset into ``out`` and return its manifest.

    ``dataset`` is ``"paper"`` (SPEC §1.1, with ``symbols`` extra instruments) or ``"market"``
    (SPEC §1.3, ``universe`` instruments, default 1,000). The partitions run in ``jobs`` local
    worker processes, or, with ``cluster`` (a Dask scheduler address, or ``local:N``), as tasks
    on a Dask cluster whose workers all see ``out``'s parent directory (see
    :mod:`tickbench.data.cluster`); the files and the content hash are the same.

    The files are written into a staging directory beside ``out`` and moved into place only
    when every partition and the manifest are complete: an interrupted or failed run leaves
    nothing half-written. An ``out`` that already holds the same dataset is reused as is; one
    that holds anything else is refused. A generation or import writing into ``out`` holds its
    lock (:func:`dataset_lock`): this one waits for it (``on_wait`` is told who holds it), then
    reuses what it made. SIGTERM and SIGHUP stop it as Ctrl-C does (:class:`GenerationStopped`):
    its workers are killed (they die with it in any case, ``kill -9`` included) and nothing is kept.
    """
    check_scale(scale)
    check_seed(seed)
    check_dataset(dataset, symbols, universe)
    if dataset == MARKET and universe is None:
        universe = mc.DEFAULT_UNIVERSE
    if symbols < 0 or symbols > 10_000:
        raise DatasetError(f"--symbols {symbols}: must be in [0, 10000]")
    if jobs < 1:
        raise DatasetError(f"--jobs {jobs}: must be at least 1")
    if cluster is not None:
        if jobs != 1:
            raise DatasetError(f"--jobs {jobs} and --cluster {cluster} together; the cluster's workers do "
                               "the work: give one or the other")
        try:
            check_address(cluster)
        except ClusterError as exc:
            raise DatasetError(str(exc)) from None
    out = Path(out)
    with dataset_lock(out, "generating", wait=True, on_wait=on_wait), stopping_on_signals():
        return _generate_locked(out, scale, seed, symbols, jobs, progress, cluster, dataset, universe)


def lock_path(out: Path) -> Path:
    """The lock of a dataset directory being written: ``.NAME.lock`` beside it."""
    return out.parent / f".{out.name}.lock"


@contextlib.contextmanager
def dataset_lock(out: Path, what: str, wait: bool = False,
                 on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the lock of dataset directory ``out`` while a generation or an import writes it
    (``what``: ``generating``, ``importing``): another one into the same place is refused
    naming the process that holds it, or, with ``wait`` (a generation, which then reuses the
    dataset the first one finished), waits for it after telling ``on_wait`` who it is."""
    path = lock_path(out)
    holder = f"pid {os.getpid()}, {what} {out}"
    held = contextlib.ExitStack()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            held.enter_context(exclusive(path, holder))
        except LockBusy as busy:
            if not wait:
                raise DatasetError(f"--out {out}: another tickbench ({busy.holder}) is writing it; wait for it to "
                                   "end (its dataset is then there), or choose another --out") from None
            if on_wait is not None:
                on_wait(busy.holder)
            held.enter_context(exclusive(path, holder, wait=True))
    except LockRefused as exc:
        raise DatasetError(f"--out {out}: {exc}") from None
    except OSError as exc:
        raise DatasetError(f"--out {out}: its lock {path} cannot be made ({exc.strerror}); choose an --out in a "
                           "directory you can write, on a disk with room") from None
    with held:
        yield


def _generate_locked(out: Path, scale: float, seed: int, symbols: int, jobs: int, progress: ProgressFn | None,
                     cluster: str | None, dataset: str, universe: int | None) -> Manifest:
    if out.exists():
        if not out.is_dir():
            raise DatasetError(f"--out {out}: exists and is not a directory")
        if (out / MANIFEST).exists():
            existing = Manifest.read(out)
            version = MARKET_GENERATOR_VERSION if dataset == MARKET else GENERATOR_VERSION
            if (existing.kind, existing.scale, existing.seed, existing.symbols, existing.universe) == (
                dataset, scale, seed, symbols, universe
            ) and existing.generator_version == version:
                verify_files(out, existing)
                return existing
            what = (f"universe {existing.universe}" if existing.kind == MARKET else f"symbols {existing.symbols}")
            raise DatasetError(
                f"--out {out}: holds a different dataset ({existing.kind}, scale {existing.scale}, seed "
                f"{existing.seed}, {what}); choose another directory or remove it"
            )
        if any(out.iterdir()):
            raise DatasetError(f"--out {out}: not empty and not a tickbench dataset; choose an "
                               "empty or new directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned_stages(out)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    claim_stage(stage)
    try:
        if dataset == MARKET:
            assert universe is not None
            manifest = _generate_market_into(stage, scale, seed, universe, jobs, progress, cluster)
        else:
            manifest = _generate_into(stage, scale, seed, symbols, jobs, progress, cluster)
        (stage / STAGE_OWNER).unlink()  # not part of the dataset
        if out.exists():
            out.rmdir()
        os.replace(stage, out)
        return manifest
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise DatasetError(f"--out {out}: the disk filled up while generating; nothing was kept. "
                               f"Free space on {out.parent} or choose a smaller --scale") from exc
        raise
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)


STAGE_OWNER = ".owner"  # in a staging directory: "host pid create_time" of the process generating into it
STAGE_GRACE_S = 60.0  # a staging directory younger than this may not have its owner file yet


def claim_stage(stage: Path) -> None:
    """Mark ``stage`` as this process's, so that a later run can tell it from an abandoned one
    (generation and import alike)."""
    me = psutil.Process()
    (stage / STAGE_OWNER).write_text(f"{socket.gethostname()} {me.pid} {me.create_time()!r}\n")


def _abandoned(stage: Path) -> bool:
    """True when ``stage``'s generating process is gone (killed before it could clean up); one
    that another machine owns (a shared filesystem) is never judged from here."""
    try:
        host, pid_text, created = (stage / STAGE_OWNER).read_text().split()
        if host != socket.gethostname():
            return False
        owner = psutil.Process(int(pid_text))
        return owner.create_time() != float(created)  # the pid now names another process
    except FileNotFoundError:  # no owner file yet (just made), or the stage is gone (renamed when done)
        try:
            return time.time() - stage.stat().st_mtime > STAGE_GRACE_S
        except FileNotFoundError:
            return False
    except (psutil.NoSuchProcess, ValueError):
        return True


def remove_abandoned_stages(out: Path) -> list[Path]:
    """Remove the staging directories of generations (or imports) into ``out`` whose process
    was killed.

    A generation or an import writes into ``.NAME.partial-*`` beside ``out`` and renames it at the end; a
    kill (the kernel's OOM killer, a closed session) leaves it behind, gigabytes at SF 1. One
    whose process still runs is left alone. Returns what was removed.
    """
    removed = []
    for stage in sorted(out.parent.glob(f".{out.name}.partial-*")):
        if stage.is_dir() and _abandoned(stage):
            shutil.rmtree(stage, ignore_errors=True)
            removed.append(stage)
    return removed


def _generate_into(
    stage: Path, scale: float, seed: int, symbols: int, jobs: int, progress: ProgressFn | None,
    cluster: str | None = None,
) -> Manifest:
    parts = sorted(cal.partitions(scale, symbols), key=lambda p: -(p.trades + p.book))
    tasks = [(seed, p, symbols, str(stage)) for p in parts]
    csv_tasks = [(str(stage), table, _bulk_rels(parts, table), csv_path(table)) for table in TABLES]
    rows, csv_info = _run_tasks(
        stage, _gen_task, tasks, lambda t: t[1].day == cal.BULK_DAY, csv_tasks, GENERATOR_VERSION,
        jobs, progress, cluster)
    manifest = Manifest(
        scale=scale, seed=seed, symbols=symbols,
        content_hash=combine_hashes({r["path"]: r["hash"] for r in rows}),
        partitions=rows, csv=csv_info, params=default_params(),
    )
    (stage / MANIFEST).write_text(manifest.to_json())
    return manifest


def _market_task(args: tuple[int, mc.Block, int, float, str]) -> dict[str, Any]:
    """Generate one block (a day's part file per table) of the market dataset into the staging
    directory ``out`` (a worker process, or a cluster worker that sees ``out``)."""
    seed, block, universe, scale, out = args
    if not Path(out).is_dir():
        raise DatasetError(f"worker {socket.gethostname()}: cannot see the output directory {out}; "
                           "with --cluster, --out must be on a filesystem every worker mounts at the same path")
    data = generate_block(seed, block, universe, scale)
    syms = [mc.sym_of(block.first_rank, universe), mc.sym_of(block.last_rank, universe)]
    rows = []
    for table in MARKET_TABLES:
        t = getattr(data, table)
        rel = block.path(table)
        dest = Path(out) / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(t, dest, compression="zstd", use_dictionary=["exchange", "sym", "side"],
                       row_group_size=MARKET_ROW_GROUP)
        rows.append({
            "table": table, "day": block.day.isoformat(), "block": block.index,
            "ranks": [block.first_rank, block.last_rank], "syms": syms, "path": rel, "rows": t.num_rows,
            "bytes": dest.stat().st_size, "csv_bytes": csv_size(t), "hash": hash_table(t),
        })
    return {"rows": rows, "generator_version": MARKET_GENERATOR_VERSION, "tickbench_version": __version__}


INSTRUMENTS_PATH = "instruments.parquet"


def _generate_market_into(
    stage: Path, scale: float, seed: int, universe: int, jobs: int, progress: ProgressFn | None,
    cluster: str | None = None,
) -> Manifest:
    inst = mc.instruments_table(mc.universe_instruments(seed, universe))
    pq.write_table(inst, stage / INSTRUMENTS_PATH, compression="zstd")
    inst_row = {"table": "instruments", "day": None, "path": INSTRUMENTS_PATH, "rows": inst.num_rows,
                "bytes": (stage / INSTRUMENTS_PATH).stat().st_size, "csv_bytes": csv_size(inst),
                "hash": hash_table(inst)}
    blocks = sorted(mc.blocks(universe), key=lambda b: -b.expected_rows(scale))
    tasks = [(seed, b, universe, scale, str(stage)) for b in blocks]
    d = mc.d_day()
    csv_tasks = [(str(stage), table, [b.path(table) for b in sorted(blocks, key=lambda b: b.index) if b.day == d],
                  csv_path(table, d)) for table in MARKET_TABLES]
    rows, csv_info = _run_tasks(
        stage, _market_task, tasks, lambda t: t[1].day == d, csv_tasks, MARKET_GENERATOR_VERSION,
        jobs, progress, cluster)
    rows = [inst_row, *rows]
    manifest = Manifest(
        scale=scale, seed=seed, symbols=0,
        content_hash=combine_hashes({r["path"]: r["hash"] for r in rows}),
        partitions=rows, csv=csv_info, params=mc.default_params(),
        generator_version=MARKET_GENERATOR_VERSION, kind=MARKET, universe=universe, calendar=mc.calendar_dict(),
    )
    (stage / MANIFEST).write_text(manifest.to_json())
    return manifest


def _run_tasks(
    stage: Path, task_fn: Callable[[Any], dict[str, Any]], tasks: list[Any], feeds_csv: Callable[[Any], bool],
    csv_tasks: list[tuple[str, str, list[str], str]], version: str, jobs: int, progress: ProgressFn | None,
    cluster: str | None,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Run the generation ``tasks`` (each writes its files into ``stage`` and returns their
    manifest rows) and the CSV tasks, in ``jobs`` processes or on ``cluster``; returns the
    partition rows, sorted by path, and the CSV entries.

    With a pool, the tasks that ``feeds_csv`` (the CSV day's) go first, and the CSVs are written by
    the pool as soon as they are done, while the other tasks are still running (not at the end,
    on one core). At most ``jobs`` tasks are queued, so the CSVs run next."""
    total = len(tasks) + len(csv_tasks)
    rows: list[dict[str, Any]] = []
    done = 0

    def collect(results: Iterable[dict[str, Any]]) -> None:
        nonlocal done
        for res in results:
            if res["generator_version"] != version:
                raise DatasetError(
                    f"--cluster {cluster} has a worker that runs tickbench {res['tickbench_version']} (generator "
                    f"{res['generator_version']}), this machine {__version__} (generator "
                    f"{version}); install the same tickbench on every worker")
            rows.extend(res["rows"])
            done += 1
            if progress:
                progress(done, total)

    csv_info: dict[str, dict[str, Any]] = {}

    def csv_done(res: tuple[str, dict[str, Any]]) -> None:
        nonlocal done
        csv_info[res[0]] = res[1]
        done += 1
        if progress:
            progress(done, total)

    if cluster is not None:
        try:
            with cluster_map(cluster) as cmap:
                collect(cmap(task_fn, tasks))
        except ClusterError as exc:
            raise DatasetError(str(exc)) from None
        # Every file a worker wrote must be here, on this machine's view of the shared path.
        verify_files(stage, Manifest(0.0, 0, 0, "", rows, {}, {}))
    elif jobs == 1:
        collect(map(task_fn, tasks))
    else:
        queue = deque(sorted(tasks, key=lambda t: not feeds_csv(t)))
        csv_left = sum(map(feeds_csv, tasks))
        with worker_pool(jobs) as pool:
            running: dict[Future[Any], Any] = {}
            csv_futures: set[Future[Any]] = set()
            while queue or running:
                while queue and len(running) < jobs:
                    task = queue.popleft()
                    running[pool.submit(task_fn, task)] = task
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in finished:
                    task = running.pop(fut)
                    res = fut.result()
                    if fut in csv_futures:
                        csv_done(res)
                        continue
                    collect([res])
                    csv_left -= feeds_csv(task)
                    if csv_left == 0 and not csv_futures:
                        csv_futures = {pool.submit(_bulk_csv_task, c) for c in csv_tasks}
                        running.update((f, None) for f in csv_futures)
    rows.sort(key=lambda r: r["path"])
    for c in csv_tasks:
        if c[1] not in csv_info:
            csv_done(_bulk_csv_task(c))
    return rows, csv_info


class GenerationStopped(BaseException):
    """A generation (or import) asked to stop by SIGTERM or SIGHUP: its workers were stopped and
    nothing was kept. A ``BaseException``, as ``KeyboardInterrupt`` is for SIGINT."""

    def __init__(self, signame: str) -> None:
        super().__init__(signame)
        self.signame = signame


# While a generation runs in the main thread: the stop signal received (if any), and how to kill
# the worker pool under way (its pids), so that the handler never raises inside the pool's code.
_STOP: list[str] = []
_POOL_PIDS: list[set[int]] = []


@contextlib.contextmanager
def stopping_on_signals() -> Iterator[None]:
    """While the block runs (in the main thread), SIGTERM and SIGHUP stop the generation, so that
    its pool is stopped and its staging directory removed as for Ctrl-C, instead of the process
    ending with its workers left running: with a pool under way the handler kills its workers
    and :func:`worker_pool` raises :class:`GenerationStopped` once the pool has noticed (never in
    the middle of the pool's own bookkeeping); without one, the handler raises it at once."""
    if threading.current_thread() is not threading.main_thread() or any(
            signal.getsignal(sig) is not signal.SIG_DFL for sig in (signal.SIGTERM, signal.SIGHUP)):
        yield  # a caller that handles them (a run generating a second scale) stops the pool its way
        return

    def handler(signum: int, frame: object) -> None:
        if _STOP:
            return
        _STOP.append(signal.Signals(signum).name)
        if not _POOL_PIDS:
            raise GenerationStopped(_STOP[0])
        _kill_workers(_POOL_PIDS[-1])

    before = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in before.items():
            signal.signal(sig, old)
        _STOP.clear()


def _kill_workers(before: set[int]) -> list[int]:
    """Kill this process's children that were not there before its pool started (its workers;
    never another pool's, nor an engine's); returns their pids."""
    killed = []
    for child in psutil.Process().children():
        if child.pid not in before:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
                killed.append(child.pid)
    return killed


WORKERS_END_S = 30.0  # how long a failed generation waits for its killed workers to end


def _await_ended(pids: list[int]) -> None:
    """Return once every process in ``pids`` has ended (gone, or a zombie: its files closed), or
    after :data:`WORKERS_END_S`: a SIGKILL lands later on a busy machine, and until it has, a
    worker still holds the files of the directory the generation is removing. Never reaps (the
    pool's own thread does)."""
    deadline = time.monotonic() + WORKERS_END_S
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.NoSuchProcess:
                break
            time.sleep(0.01)


def _worker_dies_with(parent: int | None) -> None:
    """A pool worker's first step: the kernel kills it (SIGKILL) when the process that started it
    ends, however that ends (``kill -9`` included: no handler runs then), and it ends at once
    if that process is already gone."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler, inherited by fork
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if parent is not None and os.getppid() != parent:  # died before the line above took effect
        os._exit(1)


@contextlib.contextmanager
def worker_pool(jobs: int) -> Iterator[ProcessPoolExecutor]:
    """A process pool whose workers die with this process, and are killed when the block ends by
    an exception (Ctrl-C, a failed task) instead of being waited for; SIGTERM or SIGHUP under
    :func:`stopping_on_signals` kills them and ends the block with :class:`GenerationStopped`."""
    before = {p.pid for p in psutil.Process().children()}
    start = multiprocessing.get_start_method()
    # A worker forked by this process has it as its parent; another start method's has the
    # fork server (its own lifetime bound to this process), which the check cannot name.
    pool = ProcessPoolExecutor(max_workers=jobs, initializer=_worker_dies_with,
                               initargs=(os.getpid() if start == "fork" else None,))
    _POOL_PIDS.append(before)
    try:
        yield pool
        if _STOP:
            raise GenerationStopped(_STOP[0])
    except BaseException as exc:
        killed = _kill_workers(before)
        pool.shutdown(wait=False, cancel_futures=True)
        _await_ended(killed)
        if _STOP and not isinstance(exc, GenerationStopped):  # the pool broke because we killed it
            raise GenerationStopped(_STOP[0]) from None
        raise
    finally:
        _POOL_PIDS.pop()
    pool.shutdown(wait=True)


def _ts_text(ns: np.ndarray) -> pa.Array:
    """UTC nanosecond timestamps (at or after 1970) as the CSV writer writes them,
    ``YYYY-MM-DD hh:mm:ss.fffffffffZ``, built with array arithmetic (the writer's own
    formatting costs about 2 µs a row)."""
    n = ns.size
    day, rem = np.divmod(ns, cal.NS_PER_DAY)
    days, inverse = np.unique(day, return_inverse=True)
    dates = np.frombuffer(b"".join((cal.EPOCH + dt.timedelta(days=int(d))).isoformat().encode()
                                   for d in days), np.uint8).reshape(-1, 10)
    text = np.empty((n, 30), np.uint8)
    text[:, :10] = dates[inverse]
    for pos, char in ((10, " "), (13, ":"), (16, ":"), (19, "."), (29, "Z")):
        text[:, pos] = ord(char)
    sec, frac = np.divmod(rem, 1_000_000_000)
    for pos, width, value in ((11, 2, sec // 3600), (14, 2, sec // 60 % 60), (17, 2, sec % 60), (20, 9, frac)):
        for i in range(width):
            text[:, pos + width - 1 - i] = 48 + value % 10
            value = value // 10
    offsets = np.arange(n + 1, dtype=np.int64) * 30
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(text))


def _bulk_csv_task(args: tuple[str, str, list[str], str]) -> tuple[str, dict[str, Any]]:
    """The bulk-load day of one table as one CSV ``rel`` in time order, for the W benchmark: the
    partitions ``rels`` (in the order given, which breaks ties in time: the paper's in path order,
    the market's by block, so by sym) merged by ``ts``."""
    stage, table, rels, rel = args
    data = pa.concat_tables([pq.read_table(Path(stage) / r) for r in rels]).sort_by("ts")
    ts = data.column("ts").combine_chunks()
    if data.num_rows and pa.types.is_timestamp(ts.type) and ts.type.unit == "ns" and pc.min(ts).value >= 0:
        data = data.set_column(0, "ts", _ts_text(ts.view(pa.int64()).to_numpy()))
    dest = Path(stage) / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    pacsv.write_csv(data, dest, csv_options(needs_quoting(data)))
    return table, {"path": rel, "rows": data.num_rows, "bytes": dest.stat().st_size}


def bulk_csv(stage: Path, table: str, rels: list[str], rel: str) -> dict[str, Any]:
    """Day D's CSV of ``table`` from its part files ``rels`` (see :func:`_bulk_csv_task`); its
    manifest entry."""
    return _bulk_csv_task((str(stage), table, rels, rel))[1]


def _bulk_rels(parts: Iterable[cal.Partition], table: str) -> list[str]:
    return sorted(partition_path(table, p.day, p.exchange, p.sym) for p in parts if p.day == cal.BULK_DAY)


def verify_files(directory: Path, manifest: Manifest, content: bool = False) -> None:
    """Check that every file the manifest names is present with its size (and, with
    ``content``, that every partition's rows hash to the manifest's hash)."""
    for entry in [*manifest.partitions, *manifest.csv.values()]:
        path = inside(directory, entry["path"])
        if not path.is_file():
            raise DatasetError(f"{directory}: missing {entry['path']} named in its manifest; "
                               "regenerate or re-import the dataset")
        if "bytes" in entry and path.stat().st_size != entry["bytes"]:
            raise DatasetError(f"{directory}: {entry['path']} has {path.stat().st_size} bytes, "
                               f"the manifest says {entry['bytes']}; the dataset was modified")
    if content:
        hashes = {}
        venues: set[str] = set()
        for entry in manifest.partitions:
            schemas = MARKET_SCHEMAS if manifest.kind == MARKET else SCHEMAS
            t = read_partition(inside(directory, entry["path"]), schemas[entry["table"]])
            got = hash_table(t)
            if got != entry["hash"]:
                raise DatasetError(f"{directory}: {entry['path']} does not match its manifest "
                                   "hash; the dataset was modified")
            if t.num_rows != entry["rows"]:
                raise DatasetError(f"{directory}: {entry['path']} holds {t.num_rows:,} rows, its manifest entry's "
                                   f"rows say {entry['rows']:,}; the manifest was edited: regenerate or re-import it")
            if manifest.kind == MARKET and entry["table"] == "quotes":
                venues.update(v for v in pc.unique(t.column("exchange")).to_pylist() if v is not None)
            hashes[entry["path"]] = got
        if combine_hashes(hashes) != manifest.content_hash:
            raise DatasetError(f"{directory}: content hash differs from the manifest")
        if manifest.kind == MARKET:
            check_market_data(directory, manifest, venues)


def check_rows(path: Path, entry: dict[str, Any]) -> None:
    """A partition file's row count (its Parquet footer) against its manifest entry's ``rows``;
    DatasetError naming the file (unreadable) or the field (edited)."""
    try:
        rows = pq.ParquetFile(path).metadata.num_rows
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise DatasetError(f"{path}: unreadable Parquet ({' '.join(str(exc).split())[:200]}); the dataset was "
                           "modified: regenerate or re-import it") from None
    if rows != entry["rows"]:
        raise DatasetError(f"{path}: holds {rows:,} rows, its manifest entry's rows say {entry['rows']:,}; the "
                           "manifest was edited: regenerate or re-import it")


def read_partition(path: Path, schema: pa.Schema) -> pa.Table:
    """A partition file's rows in its table's schema; DatasetError naming the file when it is not
    Parquet of that schema (garbage, another table's file, timestamps beyond int64 nanoseconds)."""
    try:
        return pq.read_table(path, schema=schema)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise DatasetError(f"{path}: unreadable as Parquet of its table's schema ({' '.join(str(exc).split())[:200]}); "
                           "the dataset was modified: regenerate or re-import it") from None


def empty_frame(schema: pa.Schema) -> pl.DataFrame:
    """A frame of ``schema`` and no rows."""
    frame = pl.from_arrow(schema.empty_table())
    assert isinstance(frame, pl.DataFrame)
    return frame


@dataclass(frozen=True)
class Dataset:
    """An opened, checked dataset directory."""

    root: Path
    manifest: Manifest

    @classmethod
    def open(cls, directory: Path, verify_content: bool = False) -> Dataset:
        directory = Path(directory)
        if not directory.is_dir():
            raise DatasetError(f"--data {directory}: no such directory")
        manifest = Manifest.read(directory)
        verify_files(directory, manifest, content=verify_content)
        return cls(directory, manifest)

    @property
    def params(self) -> dict[str, Any]:
        return self.manifest.params

    @property
    def kind(self) -> str:
        """``"paper"`` (trades and book, SPEC §1) or ``"market"`` (instruments, quotes, trades, §1.3)."""
        return self.manifest.kind

    @property
    def universe(self) -> int:
        """A market dataset's number of instruments."""
        if self.manifest.kind != MARKET or self.manifest.universe is None:
            raise DatasetError(f"{self.root}: a {self.manifest.kind} dataset has no instrument universe")
        return self.manifest.universe

    @property
    def calendar(self) -> mc.Calendar:
        """A market dataset's trading days, session and venues (the generated calendar, or the one
        an import derived from its data)."""
        if self.manifest.kind != MARKET:
            raise DatasetError(f"{self.root}: a {self.manifest.kind} dataset has no market calendar")
        try:
            return mc.calendar_of(self.manifest.calendar)
        except ValueError as exc:
            raise DatasetError(f"{self.root}: its manifest's calendar: {exc}") from None

    @property
    def bulk_day(self) -> str:
        """The bulk-load day (W's input) of this dataset, from its manifest (a market dataset's D)."""
        return str(self.manifest.params["bulk_day"])

    def schema(self, table: str) -> pa.Schema:
        """The Arrow schema of ``table`` in this dataset's kind."""
        return (MARKET_SCHEMAS if self.kind == MARKET else SCHEMAS)[table]

    def instruments(self) -> pl.DataFrame:
        """A market dataset's instruments table, by rank."""
        if self.manifest.kind != MARKET:
            raise DatasetError(f"{self.root}: a {self.manifest.kind} dataset has no instruments table")
        return pl.read_parquet(inside(self.root, INSTRUMENTS_PATH))

    def entries(
        self,
        table: str,
        days: Iterable[str] | None = None,
        sym: str | None = None,
        exchange: str | None = None,
    ) -> list[dict[str, Any]]:
        """The manifest's partition entries of ``table`` for the given days, instrument and venue
        (each with its real ``exchange`` and ``sym``: go by these, never by a file's name); in a
        market dataset, the part files whose block of instruments may hold ``sym`` (each holds
        every venue)."""
        wanted = set(days) if days is not None else None
        return [
            r
            for r in self.manifest.partitions
            if r["table"] == table
            and (wanted is None or r["day"] in wanted)
            and (sym is None or _holds_sym(r, sym))
            and (exchange is None or r.get("exchange", exchange) == exchange)
        ]

    def files(
        self,
        table: str,
        days: Iterable[str] | None = None,
        sym: str | None = None,
        exchange: str | None = None,
    ) -> list[Path]:
        """The Parquet files of ``table`` for the given days, instrument and venue; an empty
        list where the data has none (a book-only capture's trades, a day without data)."""
        return [self.root / r["path"] for r in self.entries(table, days, sym, exchange)]

    def input_files(self, table: str, days: Iterable[str] | None, scratch: Path) -> list[Path]:
        """:meth:`files` for a reader that needs at least one file (DuckDB's ``read_parquet``,
        ClickHouse's ``file()``, a ``CREATE TABLE AS``): where the data has none (a book-only
        capture's trades, a day without data), one Parquet file of the table's schema and no
        rows, written once under ``scratch`` (the engine's own directory), so the load makes
        an empty table of the right types instead of failing."""
        files = self.files(table, days)
        if files:
            return files
        empty = scratch / f"empty-{table}.parquet"
        if not empty.is_file():
            scratch.mkdir(parents=True, exist_ok=True)
            pq.write_table(self.schema(table).empty_table(), empty)
        return [empty]

    def scan(self, table: str, days: Iterable[str] | None = None, sym: str | None = None) -> pl.LazyFrame:
        """A lazy frame over ``table`` restricted to whole partitions (days, instrument); with
        no partition there, an empty frame of the table's schema (nothing to read is no error)."""
        files = self.files(table, days, sym)
        if not files:
            return empty_frame(self.schema(table)).lazy()
        return pl.scan_parquet([str(f) for f in files])

    def read(self, table: str, days: Iterable[str] | None = None, sym: str | None = None) -> pa.Table:
        """The rows of ``table`` over ``days`` (and instrument ``sym``) as one Arrow table, in
        path order; an empty table of the schema where there are none."""
        files = self.files(table, days, sym)
        if not files:
            return self.schema(table).empty_table()
        return pa.concat_tables([pq.read_table(f, schema=self.schema(table)) for f in files])

    def days_between(self, first: str, last: str) -> list[str]:
        a, b = dt.date.fromisoformat(first), dt.date.fromisoformat(last)
        return [(a + dt.timedelta(days=i)).isoformat() for i in range((b - a).days + 1)]

    def sizes(self, days: Iterable[str]) -> dict[str, int]:
        """Rows, Parquet bytes and CSV bytes of both tables over ``days``."""
        wanted = set(days)
        rows = [r for r in self.manifest.partitions if r["day"] in wanted]
        return {
            "rows": sum(r["rows"] for r in rows),
            "parquet_bytes": sum(r["bytes"] for r in rows),
            "csv_bytes": sum(r.get("csv_bytes", 0) for r in rows),
        }

    def csv_file(self, table: str) -> Path:
        """The bulk-load day's CSV of ``table`` (header only when that day has none of its rows)."""
        if table not in self.manifest.csv:
            raise DatasetError(f"{self.root}: no {table} CSV of the bulk-load day in its manifest; "
                               "re-import the dataset with this tickbench (it writes both tables' CSV)")
        return self.root / self.manifest.csv[table]["path"]


def _holds_sym(entry: dict[str, Any], sym: str) -> bool:
    """Whether a manifest partition may hold rows of ``sym``: a paper partition is one instrument's,
    a market part file holds a range of symbols (same width, so compared as strings)."""
    if "syms" in entry:
        first, last = entry["syms"]
        return bool(first <= sym <= last)
    return bool(entry.get("sym") == sym)
