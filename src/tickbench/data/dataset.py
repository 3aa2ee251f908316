"""A dataset on disk: its layout, manifest, content hash, and the readers built on them.

Layout of a dataset directory::

    manifest.json
    trades/<day>/<exchange>__<sym>.parquet   (zstd, rows in time order)
    book/<day>/<exchange>__<sym>.parquet
    csv/trades_<bulk day>.csv                (the bulk-load day, all instruments, time order)
    csv/book_<bulk day>.csv

The content hash is computed from the rows, not from the Parquet bytes, so it does not depend
on the Parquet writer's version: per partition, a BLAKE2b over each column's values in a
canonical binary form; for the dataset, a BLAKE2b over the sorted partition hashes.
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from tickbench import __version__
from tickbench.data import calendar as cal
from tickbench.data.generator import generate_partition
from tickbench.data.schema import SCHEMAS, TABLES

MANIFEST = "manifest.json"
FORMAT_VERSION = 1
GENERATOR_VERSION = "1"  # bump when the generator's output changes (see CHANGELOG.md)
MAX_SCALE = 100.0


class DatasetError(Exception):
    """A dataset directory is missing, incomplete, or not the dataset asked for."""


def hash_table(table: pa.Table) -> str:
    """The canonical content hash of one partition table."""
    h = hashlib.blake2b(digest_size=16)
    h.update(str(table.num_rows).encode())
    for name, col in zip(table.column_names, table.columns, strict=True):
        h.update(name.encode() + b"\x00")
        chunk = col.combine_chunks()
        if pa.types.is_string(chunk.type) or pa.types.is_large_string(chunk.type):
            h.update("\x00".join(chunk.to_pylist()).encode())
        elif pa.types.is_timestamp(chunk.type):
            h.update(np.ascontiguousarray(chunk.cast(pa.int64()).to_numpy(), "<i8").tobytes())
        else:
            h.update(np.ascontiguousarray(chunk.to_numpy()).astype(
                "<f8" if pa.types.is_floating(chunk.type) else "<i8").tobytes())
    return h.hexdigest()


CSV_OPTIONS = pacsv.WriteOptions(quoting_style="none")


def csv_size(table: pa.Table) -> int:
    """Bytes of ``table`` written as the dataset's CSV (header included), without writing it:
    SE's denominator for rows that exist only as Parquet."""
    sink = pa.MockOutputStream()
    pacsv.write_csv(table, sink, CSV_OPTIONS)
    return int(sink.size())


def combine_hashes(partition_hashes: dict[str, str]) -> str:
    """The dataset hash from ``{"<table>/<partition>": hash}``."""
    h = hashlib.blake2b(digest_size=16)
    for key in sorted(partition_hashes):
        h.update(f"{key}={partition_hashes[key]}\n".encode())
    return h.hexdigest()


def partition_path(table: str, day: dt.date, exchange: str, sym: str) -> str:
    return f"{table}/{day.isoformat()}/{exchange}__{sym}.parquet"


def csv_path(table: str) -> str:
    return f"csv/{table}_{cal.BULK_DAY.isoformat()}.csv"


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

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=1, sort_keys=True)

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
            if raw.get("format_version") != FORMAT_VERSION:
                raise DatasetError(
                    f"{path}: dataset format {raw.get('format_version')} is not "
                    f"{FORMAT_VERSION}; regenerate it with this tickbench"
                )
            return cls(**raw)
        except (json.JSONDecodeError, TypeError) as exc:
            raise DatasetError(f"{path}: unreadable manifest ({exc}); regenerate the dataset") from exc


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
    seed, part, symbols, out = args
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
    return {"rows": rows}


ProgressFn = Callable[[int, int], None]


def generate(
    out: Path,
    scale: float,
    seed: int,
    symbols: int = 0,
    jobs: int = 1,
    progress: ProgressFn | None = None,
) -> Manifest:
    """Generate the dataset into ``out`` and return its manifest.

    The files are written into a staging directory beside ``out`` and moved into place only
    when every partition and the manifest are complete: an interrupted or failed run leaves
    nothing half-written. An ``out`` that already holds the same dataset is reused as is; one
    that holds anything else is refused.
    """
    check_scale(scale)
    check_seed(seed)
    if symbols < 0 or symbols > 10_000:
        raise DatasetError(f"--symbols {symbols}: must be in [0, 10000]")
    if jobs < 1:
        raise DatasetError(f"--jobs {jobs}: must be at least 1")
    out = Path(out)
    if out.exists():
        if not out.is_dir():
            raise DatasetError(f"--out {out}: exists and is not a directory")
        if (out / MANIFEST).exists():
            existing = Manifest.read(out)
            if (existing.scale, existing.seed, existing.symbols) == (scale, seed, symbols) and (
                existing.generator_version == GENERATOR_VERSION
            ):
                verify_files(out, existing)
                return existing
            raise DatasetError(
                f"--out {out}: holds a different dataset (scale {existing.scale}, seed "
                f"{existing.seed}, symbols {existing.symbols}); choose another directory or "
                "remove it"
            )
        if any(out.iterdir()):
            raise DatasetError(f"--out {out}: not empty and not a tickbench dataset; choose an "
                               "empty or new directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        manifest = _generate_into(stage, scale, seed, symbols, jobs, progress)
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


def _generate_into(
    stage: Path, scale: float, seed: int, symbols: int, jobs: int, progress: ProgressFn | None
) -> Manifest:
    parts = sorted(cal.partitions(scale, symbols), key=lambda p: -(p.trades + p.book))
    tasks = [(seed, p, symbols, str(stage)) for p in parts]
    total = len(tasks) + 2
    rows: list[dict[str, Any]] = []
    done = 0
    if jobs == 1:
        results: Iterable[dict[str, Any]] = map(_gen_task, tasks)
        for res in results:
            rows.extend(res["rows"])
            done += 1
            if progress:
                progress(done, total)
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            for res in pool.map(_gen_task, tasks):
                rows.extend(res["rows"])
                done += 1
                if progress:
                    progress(done, total)
    rows.sort(key=lambda r: r["path"])
    csv_info = {}
    for table in TABLES:
        csv_info[table] = _write_bulk_csv(stage, table, rows)
        done += 1
        if progress:
            progress(done, total)
    manifest = Manifest(
        scale=scale, seed=seed, symbols=symbols,
        content_hash=combine_hashes({r["path"]: r["hash"] for r in rows}),
        partitions=rows, csv=csv_info, params=default_params(),
    )
    (stage / MANIFEST).write_text(manifest.to_json())
    return manifest


def _write_bulk_csv(stage: Path, table: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The bulk-load day of ``table`` as one CSV in time order, for the W benchmark."""
    day = cal.BULK_DAY.isoformat()
    files = [stage / r["path"] for r in rows if r["table"] == table and r["day"] == day]
    data = pa.concat_tables([pq.read_table(f) for f in files]).sort_by("ts")
    rel = csv_path(table)
    dest = stage / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    pacsv.write_csv(data, dest, CSV_OPTIONS)
    return {"path": rel, "rows": data.num_rows, "bytes": dest.stat().st_size}


def verify_files(directory: Path, manifest: Manifest, content: bool = False) -> None:
    """Check that every file the manifest names is present with its size (and, with
    ``content``, that every partition's rows hash to the manifest's hash)."""
    for entry in [*manifest.partitions, *manifest.csv.values()]:
        path = directory / entry["path"]
        if not path.is_file():
            raise DatasetError(f"{directory}: missing {entry['path']} named in its manifest; "
                               "regenerate or re-import the dataset")
        if "bytes" in entry and path.stat().st_size != entry["bytes"]:
            raise DatasetError(f"{directory}: {entry['path']} has {path.stat().st_size} bytes, "
                               f"the manifest says {entry['bytes']}; the dataset was modified")
    if content:
        hashes = {}
        for entry in manifest.partitions:
            t = pq.read_table(directory / entry["path"], schema=SCHEMAS[entry["table"]])
            got = hash_table(t)
            if got != entry["hash"]:
                raise DatasetError(f"{directory}: {entry['path']} does not match its manifest "
                                   "hash; the dataset was modified")
            hashes[entry["path"]] = got
        if combine_hashes(hashes) != manifest.content_hash:
            raise DatasetError(f"{directory}: content hash differs from the manifest")


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
    def bulk_day(self) -> str:
        """The bulk-load day (W's input) of this dataset, from its manifest."""
        return str(self.manifest.params["bulk_day"])

    def files(
        self,
        table: str,
        days: Iterable[str] | None = None,
        sym: str | None = None,
        exchange: str | None = None,
    ) -> list[Path]:
        """The Parquet files of ``table`` for the given days, instrument and venue."""
        wanted = set(days) if days is not None else None
        return [
            self.root / r["path"]
            for r in self.manifest.partitions
            if r["table"] == table
            and (wanted is None or r["day"] in wanted)
            and (sym is None or r["sym"] == sym)
            and (exchange is None or r["exchange"] == exchange)
        ]

    def scan(self, table: str, days: Iterable[str] | None = None, sym: str | None = None) -> pl.LazyFrame:
        """A lazy frame over ``table`` restricted to whole partitions (days, instrument)."""
        files = self.files(table, days, sym)
        if not files:
            raise DatasetError(f"{self.root}: no {table} partitions for days={days} sym={sym}")
        return pl.scan_parquet([str(f) for f in files])

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
        return self.root / self.manifest.csv[table]["path"]
