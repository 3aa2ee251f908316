"""The ingest store of the tick-latency, stream and durability suites: ArcticDB over an LMDB
directory of its own, written through ``Library.append``.

Layout as the query store's (:mod:`tickbench.engines.arcticdb.layout`): one symbol per
(table, instrument), ``<table>.<sym>``, indexed by ``ts`` (naive ``datetime64[ns]``, UTC), the
SPEC's other columns as columns. A write groups its rows by instrument and makes one ArcticDB
operation per symbol: an ``append`` (a new version holding one new segment) when the rows start
at or after the symbol's last ``ts``, else a merge of the overlapped tail (read, sort,
``update``), since ArcticDB refuses an append that starts before the data it extends. The
README's "Ingest" section says why each choice was made.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import arcticdb as adb
import numpy as np
import pandas as pd
import pyarrow as pa
from arcticdb import DataError, ReadRequest
from arcticdb.version_store.library import Library

from tickbench.data.schema import SCHEMAS, TS_TYPE
from tickbench.engines.arcticdb.layout import SORT_KEYS, TABLES, split_symbol, symbol_name
from tickbench.engines.base import IngestClient, StreamSender, StreamTarget

INGEST_LIBRARY = "tickbench_ingest"
# The most the LMDB environment may grow to (address space until written). A bound, not a
# forecast: one-row appends keep every version's index key (PRUNE below), whose bytes grow with
# the square of a symbol's appends, and a full map fails the write (MDB_MAP_FULL) rather than
# the disk filling up.
INGEST_MAP_SIZE = "16GB"
# Old versions are kept. With pruning, ArcticDB deletes the superseded version's keys as the
# append commits, and a reader that had just resolved that version (the stream suite's count
# poller and snapshot thread read while writers write) fails to find them (man-group/ArcticDB
# #3040, #3145); without it, readers are safe and the cost is storage (README, "Ingest").
PRUNE = False
# numpy dtype per SPEC Arrow type: ArcticDB's static schema wants every append's dtypes to match.
DTYPES: dict[pa.DataType, Any] = {pa.float64(): np.float64, pa.int64(): np.int64, pa.string(): object}
LATEST_COLUMNS = ["sym", "b1price", "a1price"]


def ingest_frame(table: str, rows: Sequence[tuple[Any, ...]]) -> pd.DataFrame:
    """``rows`` (SPEC column order, ``ts`` integer ns) as the pandas frame ArcticDB stores: indexed
    by ``ts`` as naive ``datetime64[ns]``, stably sorted by it (an index written must ascend)."""
    schema = SCHEMAS[table]
    cols = list(zip(*rows, strict=True))
    ts = np.asarray(cols[0], dtype=np.int64)
    order = np.argsort(ts, kind="stable") if ts.size > 1 and bool((np.diff(ts) < 0).any()) else None
    data = {}
    for f, values in zip(list(schema)[1:], cols[1:], strict=True):
        arr = np.asarray(values, dtype=DTYPES[f.type])
        data[f.name] = arr if order is None else arr[order]
    index = pd.DatetimeIndex((ts if order is None else ts[order]).view("datetime64[ns]"), name="ts")
    return pd.DataFrame(data, index=index)


def spec_table(table: str, data: pa.Table) -> pa.Table:
    """An ArcticDB read (Arrow: the ``ts`` index first, naive, strings as ``large_string``) with
    exactly the SPEC schema of ``table``."""
    schema = SCHEMAS[table]
    return pa.Table.from_arrays([data.column(f.name).cast(f.type) for f in schema], schema=schema)


@dataclass
class _Symbol:
    """One symbol's writer state. ``lock`` serialises its writes: ArcticDB does not support
    concurrent writers to one symbol (each append builds its version on the latest one it read,
    so of two racing appends the later version can drop the other's rows), and the ingest suites
    write one instrument from several threads. ``end`` is its last ``ts`` (ns), once known."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    end: int | None = None
    loaded: bool = False


class IngestStore:
    """An open ingest store: the Arctic instance over ``root``, its library, and the symbols
    known to hold rows (listed once at open, then added as this process creates them)."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.ac: adb.Arctic | None = adb.Arctic(f"lmdb://{root}?map_size={INGEST_MAP_SIZE}", output_format="PYARROW")
        reopened = self.ac.has_library(INGEST_LIBRARY)
        lib = self.ac.get_library(INGEST_LIBRARY, create_if_missing=True)
        self.lib: Library | None = lib
        self._guard = threading.Lock()  # over the two dicts below
        self._state: dict[str, _Symbol] = {}
        self._by_table: dict[str, dict[str, str]] = {t: {} for t in TABLES}
        if reopened:  # a new store has no symbols; list_symbols would only cost a journal compaction
            for name in lib.list_symbols():
                table, sym = split_symbol(name)
                if table in self._by_table:
                    self._by_table[table][sym] = name

    def library(self) -> Library:
        if self.lib is None:
            raise RuntimeError("the ingest store is closed")
        return self.lib

    def close(self) -> None:
        """Drop the library and the Arctic instance: the last reference closes the LMDB
        environment (LMDB allows one open environment per path in a process)."""
        self.lib = None
        self.ac = None

    def symbols(self, table: str) -> dict[str, str]:
        """``{instrument: symbol}`` of ``table``, as of now."""
        with self._guard:
            return dict(sorted(self._by_table[table].items()))

    # -- writes ------------------------------------------------------------------------------

    def write(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Write ``rows`` of ``table``: one ArcticDB operation per instrument, each returning
        once its new version is committed to LMDB."""
        if table not in self._by_table:
            raise ValueError(f"unknown table {table!r}")
        groups: dict[str, list[tuple[Any, ...]]] = {}
        for row in rows:
            groups.setdefault(str(row[2]), []).append(row)
        self.write_frames(table, {sym: ingest_frame(table, part) for sym, part in groups.items()})

    def write_frames(self, table: str, frames: dict[str, pd.DataFrame]) -> None:
        """Write ``{instrument: frame}`` of ``table`` (frames as :func:`ingest_frame` makes
        them): one ArcticDB operation per instrument."""
        if table not in self._by_table:
            raise ValueError(f"unknown table {table!r}")
        for sym, frame in frames.items():
            self._write_symbol(table, sym, frame)

    def _write_symbol(self, table: str, sym: str, frame: pd.DataFrame) -> None:
        lib = self.library()
        name = symbol_name(table, sym)
        with self._guard:
            state = self._state.setdefault(name, _Symbol())
            existed = sym in self._by_table[table]
        first, last = int(frame.index[0].value), int(frame.index[-1].value)
        with state.lock:
            if not state.loaded:  # a symbol of a reopened store: its last ts, once
                state.end = int(lib.tail(name, 1).data.column("ts").cast(pa.int64())[0].as_py()) if existed else None
                state.loaded = True
            if state.end is None or first >= state.end:
                # ArcticDB accepts an append whose first index equals the last stored one (ties).
                lib.append(name, frame, prune_previous_versions=PRUNE)
            else:
                self._merge(lib, table, name, frame, first)
            state.end = last if state.end is None else max(state.end, last)
        if not existed:
            with self._guard:
                self._by_table[table][sym] = name

    @staticmethod
    def _merge(lib: Library, table: str, name: str, frame: pd.DataFrame, first: int) -> None:
        """Rows that start before the symbol's end (another writer's later rows went in first):
        read the stored rows from ``first`` on, sort them with the new ones in the layout's row
        order and ``update`` that range — ArcticDB refuses an append that starts earlier, and
        ``update`` replaces every stored row of the range it is given, all of which were read."""
        held = lib.read(name, date_range=(pd.Timestamp(first, unit="ns"), None), output_format="PANDAS").data
        merged = pd.concat([held, frame]).reset_index().sort_values(SORT_KEYS[table], kind="stable")
        lib.update(name, merged.set_index("ts"), prune_previous_versions=PRUNE)

    # -- reads -------------------------------------------------------------------------------

    def read(self, table: str, sym: str) -> pa.Table:
        name = self.symbols(table).get(sym)
        if name is None:
            return SCHEMAS[table].empty_table()
        return spec_table(table, self.library().read(name).data)

    def count(self, table: str) -> int:
        """Rows of ``table``: the row counts of its symbols' latest versions."""
        names = list(self.symbols(table).values())
        if not names:
            return 0
        total = 0
        for desc in self.library().get_description_batch(names):
            if isinstance(desc, DataError):
                raise RuntimeError(f"ArcticDB description of {desc.symbol} failed: {desc.exception_string}")
            total += desc.row_count
        return total

    def latest(self) -> pa.Table:
        """The last row of each book symbol (its latest ``ts``: rows are stored in time order),
        read in one batch: ``sym, ts, b1price, a1price``, sorted by sym."""
        names = list(self.symbols("book").values())
        parts: list[pa.Table] = []
        requests = [ReadRequest(n, row_range=(-1, None), columns=LATEST_COLUMNS) for n in names]
        for item in self.library().read_batch(requests) if requests else []:
            if isinstance(item, DataError):
                raise RuntimeError(f"ArcticDB read of {item.symbol} failed: {item.exception_string}")
            parts.append(item.data)
        schema = pa.schema([("sym", pa.string()), ("ts", TS_TYPE), ("b1price", pa.float64()),
                            ("a1price", pa.float64())])
        cols = [pa.chunked_array([p.column(f.name).cast(f.type) for p in parts], f.type) for f in schema]
        return pa.Table.from_arrays(cols, schema=schema)


class Writer(IngestClient):
    """A writer client: every client of a store shares its symbol locks."""

    def __init__(self, store: IngestStore) -> None:
        self.store = store

    def write(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        self.store.write(table, rows)


def batch_frames(table: str, batch: pa.Table) -> dict[str, pd.DataFrame]:
    """``batch`` (SPEC columns) as ``{instrument: frame}`` in the form :func:`ingest_frame`
    makes: indexed by ``ts`` (naive ``datetime64[ns]``), stably sorted by it."""
    cast = batch.cast(SCHEMAS[table])
    frame = cast.drop_columns(["ts"]).to_pandas()
    # naive UTC nanoseconds, as ingest_frame stores them
    frame.insert(0, "ts", cast.column("ts").cast(pa.int64()).to_numpy().view("datetime64[ns]"))
    out: dict[str, pd.DataFrame] = {}
    for sym, part in frame.groupby("sym", sort=False):
        out[str(sym)] = part.sort_values("ts", kind="stable").set_index("ts")
    return out


class _FramesSender(StreamSender):
    def __init__(self, store: IngestStore) -> None:
        self.store = store

    def send(self, payload: Any) -> None:
        table, frames = payload
        self.store.write_frames(table, frames)


class FramesTarget(StreamTarget):
    """ArcticDB's fastest streaming path: each batch already split per instrument into the
    pandas frames ArcticDB appends (before the clock), one ``append`` (one new segment and
    version) per instrument, writer threads in the process that holds the LMDB environment."""

    in_process = True
    path = "pandas frame per (batch, instrument) made before the clock, one Library.append each, writer threads"

    def __init__(self, store: IngestStore) -> None:
        self.store = store

    def encode(self, table: str, batch: pa.Table) -> Any:
        return table, batch_frames(table, batch)

    def payload_bytes(self, payload: Any) -> int:
        return int(sum(f.memory_usage(deep=False).sum() for f in payload[1].values()))

    def connect(self) -> StreamSender:
        return _FramesSender(self.store)
