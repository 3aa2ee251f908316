"""A dataset on disk, whatever its kind: its manifest, content hash, file naming, the generation
machinery (staging directory, lock, worker pool, bulk-load CSV) and the partition reader.

Each kind's layout, generator and checks are its folder's (:mod:`tickbench.datasets`): the paper
dataset's one partition per (table, day, exchange, sym) at :func:`partition_path`, the market
dataset's part files per block of instruments. ``<E>`` and ``<S>`` in a paper path are the
file-name forms of the exchange and the instrument (:func:`file_name`): the name itself when it
is plain, else an encoded form. Names come from data, and data is hostile: no name ever becomes a
path as it is, every path a manifest names is checked to stay inside the dataset (:func:`inside`),
and the real names are kept in the manifest's partition entries (``exchange``, ``sym``), which are
what readers go by.

The content hash is computed from the rows, not from the Parquet bytes, so it does not depend
on the Parquet writer's version: per partition, a BLAKE2b over each column's values in a
canonical binary form; for the dataset, a BLAKE2b over the sorted partition hashes.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime as dt
import hashlib
import json
import multiprocessing
import os
import re
import shutil
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import polars as pl
import psutil
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from tickbench import __version__
from tickbench.data.cluster import ClusterError, cluster_map
from tickbench.data.locks import LockBusy, LockRefused, exclusive
from tickbench.signals import unprinted_when_lost

MANIFEST = "manifest.json"
FORMAT_VERSION = 1
GENERATOR_VERSION = "1"  # bump when the generator's output changes (see CHANGELOG.md)
MAX_SCALE = 100.0
DEFAULT_KIND = "paper"  # the kind of a manifest that names none (written before there were others)
NS_PER_DAY = 86_400 * 1_000_000_000
EPOCH = dt.date(1970, 1, 1)


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


def csv_path(table: str, day: dt.date) -> str:
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
    kind: str = DEFAULT_KIND  # its kind's name (tickbench.datasets.base.kinds)
    universe: int | None = None  # a kind with an instrument universe (the market's): how many instruments
    calendar: dict[str, Any] | None = None  # a kind with a calendar in its manifest (the market's)

    def to_json(self) -> str:
        fields = dict(self.__dict__)
        # a manifest of the default kind keeps the form it had before there were others
        for key, unset in (("kind", DEFAULT_KIND), ("universe", None), ("calendar", None)):
            if fields[key] == unset:
                fields.pop(key)
        return json.dumps(fields, indent=1, sort_keys=True)

    @classmethod
    def read(cls, directory: Path) -> Manifest:
        """The manifest of ``directory`` as written (its entries are checked by
        :func:`check_manifest`, with its kind's rules)."""
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
            if not isinstance(raw.get("kind", DEFAULT_KIND), str):
                raise DatasetError(f"{path}: dataset kind {shown(raw.get('kind'))} is not a name")
            manifest = cls(**raw)
        except (json.JSONDecodeError, UnicodeDecodeError, TypeError) as exc:
            raise DatasetError(f"{path}: unreadable manifest ({exc}); regenerate the dataset") from exc
        return manifest


_ENTRY_TYPES = {"table": str, "day": str, "exchange": str, "sym": str, "path": str, "rows": int, "bytes": int,
                "hash": str}


MANIFEST_FIX = "the manifest was edited or written by something else: regenerate or re-import the dataset"


def check_manifest(directory: Path, m: Manifest, tables: Collection[str],
                   check_kind: Callable[[Path, Manifest, str], None],
                   expected_params: Callable[[Manifest], dict[str, Any]]) -> None:
    """Refuse a manifest whose entries are not what this tickbench writes: a path leading
    outside ``directory``; a partition entry (one per table of ``tables``, day, exchange, sym)
    with a missing or mistyped field, a name :func:`name_problem` refuses, or a path other than
    :func:`partition_path` of its own fields; what its kind refuses (``check_kind(manifest's
    path, m, what to do)``); and parameters other than those its data determine
    (``expected_params``), which the content hash does not cover."""
    where = directory / MANIFEST
    fix = MANIFEST_FIX
    if not isinstance(m.partitions, list) or not isinstance(m.csv, dict) or not isinstance(m.params, dict):
        raise DatasetError(f"{where}: partitions, csv or params of the wrong type; {fix}")
    for i, e in enumerate(m.partitions):
        if not isinstance(e, dict) or not isinstance(e.get("path"), str) or not isinstance(e.get("table"), str):
            raise DatasetError(f"{where}: partition entry {i} has no table or path; {fix}")
        inside(directory, e["path"], f"partition entry {i}'s path")
        if "exchange" in e or "sym" in e:  # a partition of one (exchange, sym): the layout above
            _check_partition_entry(where, i, e, fix, tables)
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
    check_kind(where, m, fix)
    expected = expected_params(m)
    if m.params != expected:
        diff = ", ".join(f"{k} {shown(m.params.get(k))} (its data give {shown(v)})"
                         for k, v in expected.items() if m.params.get(k) != v) or "extra keys"
        raise DatasetError(f"{where}: parameters not those its data determine: {diff}. The content hash does "
                           f"not cover them, so a run would claim it measured this dataset; {fix}")


_COUNTED_TYPES = {"rows": int, "bytes": int, "hash": str}


def _check_partition_entry(where: Path, i: int, e: dict[str, Any], fix: str, tables: Collection[str]) -> None:
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
    if e["table"] not in tables or e["path"] != partition_path(e["table"], day, e["exchange"], e["sym"]):
        raise DatasetError(f"{where}: partition entry {i} ({shown(e['table'])}, {e['day']}, "
                           f"{shown(e['exchange'])}, {shown(e['sym'])}) names the path {shown(e['path'])}, "
                           f"not the layout's; {fix}")


def check_scale(scale: float) -> None:
    if not (scale > 0 and np.isfinite(scale)) or scale > MAX_SCALE:
        raise DatasetError(f"--scale {scale}: must be a number in (0, {MAX_SCALE:g}]")


def check_seed(seed: int) -> None:
    if seed < 0 or seed >= 2**63:
        raise DatasetError(f"--seed {seed}: must be an integer in [0, 2**63)")


ProgressFn = Callable[[int, int], None]


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


def run_tasks(
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
        verify_files(stage, Manifest(0.0, 0, 0, "", rows, {}, {}), {})
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


# While a generation or an import runs in the main thread: the stop signal received (if any), and
# how to kill the generation's worker pool under way (its pids), so that the handler never raises
# inside the pool's code.
_STOP: list[str] = []
_POOL_PIDS: list[set[int]] = []


def request_stop(signame: str) -> None:
    """Record that ``signame`` asked the generation or import under way to stop (the first
    request counts); :func:`raise_if_stopped` then refuses to publish its dataset."""
    if not _STOP:
        _STOP.append(signame)


def forget_stop() -> None:
    """Forget the stop request (the generation or import it was for has ended)."""
    _STOP.clear()


def raise_if_stopped() -> None:
    """Raise :class:`GenerationStopped` if a stop was requested. A signal handler's own exception
    can be lost: raised while a weakref callback or a ``__del__`` runs, Python prints it and goes
    on. So the work asks again before each step it cannot take back."""
    if _STOP:
        raise GenerationStopped(_STOP[0])


def publish_stage(stage: Path, out: Path) -> None:
    """Move the complete dataset in ``stage`` (its manifest written) into ``out``, which is absent
    or an empty directory; a stop requested by then keeps nothing instead."""
    raise_if_stopped()
    (stage / STAGE_OWNER).unlink()  # not part of the dataset
    if out.exists():
        out.rmdir()
    os.replace(stage, out)


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
        request_stop(signal.Signals(signum).name)
        if not _POOL_PIDS:
            raise GenerationStopped(_STOP[0])
        _kill_workers(_POOL_PIDS[-1])

    before = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        with unprinted_when_lost(GenerationStopped):  # a lost raise: publish_stage's check stops it
            yield
    finally:
        for sig, old in before.items():
            signal.signal(sig, old)
        forget_stop()


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
    day, rem = np.divmod(ns, NS_PER_DAY)
    days, inverse = np.unique(day, return_inverse=True)
    dates = np.frombuffer(b"".join((EPOCH + dt.timedelta(days=int(d))).isoformat().encode()
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


class ContentCheck(Protocol):
    """A kind's checks of a dataset that need its rows: told each partition as it is read, then asked."""

    def partition(self, entry: dict[str, Any], rows: pa.Table) -> None:
        """One partition's rows (its hash and row count already checked)."""

    def done(self) -> None:
        """Every partition was seen: DatasetError naming what the data contradict."""


def verify_files(directory: Path, manifest: Manifest, schemas: Mapping[str, pa.Schema], content: bool = False,
                 check: ContentCheck | None = None) -> None:
    """Check that every file the manifest names is present with its size (and, with
    ``content``, that every partition's rows, read in their table's schema of ``schemas``, hash
    to the manifest's hash, then its kind's ``check``)."""
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
        for entry in manifest.partitions:
            t = read_partition(inside(directory, entry["path"]), schemas[entry["table"]])
            got = hash_table(t)
            if got != entry["hash"]:
                raise DatasetError(f"{directory}: {entry['path']} does not match its manifest "
                                   "hash; the dataset was modified")
            if t.num_rows != entry["rows"]:
                raise DatasetError(f"{directory}: {entry['path']} holds {t.num_rows:,} rows, its manifest entry's "
                                   f"rows say {entry['rows']:,}; the manifest was edited: regenerate or re-import it")
            if check is not None:
                check.partition(entry, t)
            hashes[entry["path"]] = got
        if combine_hashes(hashes) != manifest.content_hash:
            raise DatasetError(f"{directory}: content hash differs from the manifest")
        if check is not None:
            check.done()


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
    #: Its kind's tables' schemas (``tickbench.datasets.base.open_dataset`` opens a dataset with them).
    schemas: Mapping[str, pa.Schema]

    @property
    def params(self) -> dict[str, Any]:
        return self.manifest.params

    @property
    def kind(self) -> str:
        """The name of its kind (``tickbench.datasets.base.kind_of`` gives the kind itself)."""
        return self.manifest.kind

    @property
    def universe(self) -> int:
        """How many instruments a dataset of a kind with an instrument universe (the market's) has."""
        if self.manifest.universe is None:
            raise DatasetError(f"{self.root}: a {self.manifest.kind} dataset has no instrument universe")
        return self.manifest.universe

    @property
    def bulk_day(self) -> str:
        """The bulk-load day (W's input) of this dataset, from its manifest (a market dataset's D)."""
        return str(self.manifest.params["bulk_day"])

    def schema(self, table: str) -> pa.Schema:
        """The Arrow schema of ``table`` in this dataset's kind."""
        return self.schemas[table]

    def instruments(self) -> pl.DataFrame:
        """The instruments table (by rank) of a dataset whose kind has one (the market's)."""
        entry = next((e for e in self.manifest.partitions if e["table"] == "instruments"), None)
        if "instruments" not in self.schemas or entry is None:
            raise DatasetError(f"{self.root}: a {self.manifest.kind} dataset has no instruments table")
        return pl.read_parquet(inside(self.root, entry["path"]))

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
