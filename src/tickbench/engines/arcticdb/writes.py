"""ArcticDB's write path, LMDB URI and sizes, shared by the published suite's load (adapter.py)
and the market suite's (market.py)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from pathlib import Path

import arcticdb as adb
import pandas as pd
import polars as pl
from arcticdb import DataError
from arcticdb.version_store.library import Library

from tickbench.engines.arcticdb.layout import VENUES
from tickbench.engines.base import storage_figures

OPTIONS = adb.LibraryOptions(rows_per_segment=100_000, columns_per_segment=127)
# Rows per write/append: whole segments, so appends never leave a part-filled segment behind.
CHUNK_ROWS = 10 * OPTIONS.rows_per_segment


# W's clock stops after the last write's LMDB transaction committed: LMDB's default commit
# fsyncs the data and meta pages before it returns (ArcticDB's URI exposes no sync option).
W_DURABILITY = "LMDB commit per write (fsynced before it returns; LMDB's default, no MDB_NOSYNC)"


def lmdb_uri(path: Path, data_bytes: int) -> str:
    """An LMDB URI whose map size (the most the environment may hold) is 4x the data's
    Parquet-zstd bytes + 1 GB: ArcticDB's LZ4 segments take about 1.3x the Parquet bytes here.
    The map is address space only; the file grows with what is written."""
    return f"lmdb://{path}?map_size={math.ceil(4 * data_bytes / 1e9) + 1}GB"


def to_pandas(frame: pl.DataFrame) -> pd.DataFrame:
    """A frame as ArcticDB stores it: indexed by ``ts`` as naive datetime64[ns] (UTC)."""
    return frame.with_columns(pl.col("ts").dt.replace_time_zone(None)).to_pandas().set_index("ts")


def write_symbol(lib: Library, symbol: str, chunks: Iterable[pl.DataFrame]) -> int:
    """Write ``chunks`` (in time order) to ``symbol`` as ``CHUNK_ROWS``-row writes: the first
    replaces the symbol, the rest append. Returns the rows written. A table with venues gets
    the venues of each day as the symbol's metadata (:data:`~.layout.VENUES`), so that O-NBBO
    knows which venues quote on a day without grouping the day's rows."""
    venues: dict[str, set[str]] = {}
    rows = 0
    for part in _rechunk(_noting_venues(chunks, venues)):
        if rows == 0:
            lib.write(symbol, to_pandas(part), prune_previous_versions=True)
        else:
            lib.append(symbol, to_pandas(part), prune_previous_versions=True)
        rows += part.height
    if venues:
        lib.write_metadata(symbol, {VENUES: {d: sorted(v) for d, v in sorted(venues.items())}},
                           prune_previous_versions=True)
    return rows


def write_batch(lib: Library, frames: dict[str, pl.DataFrame]) -> int:
    """Write each frame (in time order) as its symbol, replacing it, in one ``write_batch``: the
    library writes the symbols' segments together and publishes their versions in one call,
    instead of a write and a metadata write per symbol. Each symbol with venues gets the venues
    of each day as its metadata, as :func:`write_symbol` writes them. Returns the rows written."""
    payloads = []
    for symbol, frame in frames.items():
        venues: dict[str, set[str]] = {}
        for _ in _noting_venues([frame], venues):
            pass
        meta = {VENUES: {d: sorted(v) for d, v in sorted(venues.items())}} if venues else None
        payloads.append(adb.WritePayload(symbol, to_pandas(frame), metadata=meta))
    for item in lib.write_batch(payloads, prune_previous_versions=True):
        if isinstance(item, DataError):
            raise RuntimeError(f"ArcticDB write of {item.symbol} failed: {item.exception_string}")
    return sum(f.height for f in frames.values())


def _noting_venues(chunks: Iterable[pl.DataFrame], venues: dict[str, set[str]]) -> Iterator[pl.DataFrame]:
    for chunk in chunks:
        if "exchange" in chunk.columns:
            pairs = chunk.select(day=pl.col("ts").dt.date().cast(pl.Utf8), exchange=pl.col("exchange")).unique()
            for day, exchange in pairs.iter_rows():
                venues.setdefault(day, set()).add(exchange)
        yield chunk


def _rechunk(chunks: Iterable[pl.DataFrame]) -> Iterator[pl.DataFrame]:
    buffer: pl.DataFrame | None = None
    for chunk in chunks:
        buffer = chunk if buffer is None else pl.concat([buffer, chunk])
        while buffer.height >= CHUNK_ROWS:
            yield buffer.head(CHUNK_ROWS)
            buffer = buffer.slice(CHUNK_ROWS)
    if buffer is not None and buffer.height:
        yield buffer


def stored_rows(lib: Library, symbols: list[str]) -> int:
    """Rows committed to ``symbols``, from their descriptions (read back from LMDB). The symbols
    are named, not listed: ``list_symbols`` on a fresh library spends ~0.5 s compacting its
    symbol-list journal."""
    return sum(d.row_count for d in lib.get_description_batch(symbols))


def lmdb_bytes(root: Path) -> dict[str, int]:
    """Apparent and allocated bytes of every file under an LMDB root. All of it is data: ArcticDB
    keeps its index segments among its data keys, and LMDB writes copy-on-write pages, no log."""
    files = [p for p in root.rglob("*") if p.is_file()]
    return storage_figures("lmdb_dir", sum(p.stat().st_size for p in files), 0, 0,
                           lmdb_dir_allocated=sum(p.stat().st_blocks * 512 for p in files))
