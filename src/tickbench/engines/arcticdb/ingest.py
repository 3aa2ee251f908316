"""The ingest store of the tick-latency, stream and durability suites, and of the market suite's
queries during ingest: ArcticDB over an LMDB directory of its own, written through
``Library.append``.

Layout as the query store's (:mod:`tickbench.engines.arcticdb.layout`, or the market's): one
symbol per (table, instrument), ``<table>.<sym>``, indexed by ``ts`` (naive ``datetime64[ns]``,
UTC), the SPEC's other columns as columns; which library holds each table, and the rows' order
inside a symbol, are the store's :class:`IngestLayout`. A write groups its rows by instrument:
the symbols whose rows start at or after their last row get one ``append_batch`` (a new version
holding one new segment each), each other symbol a merge of the overlapped tail (read, sort,
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
from arcticdb import DataError, ReadRequest, WritePayload
from arcticdb.version_store.library import Library

from tickbench.data.schema import TS_TYPE
from tickbench.datasets.paper.schema import SCHEMAS, TABLES
from tickbench.engines.arcticdb.layout import SORT_KEYS, split_symbol, symbol_name
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


@dataclass(frozen=True)
class IngestLayout:
    """How an ingest store keeps its tables."""

    #: The library of each table (several tables may share one).
    libraries: dict[str, str]
    #: Each table's Arrow schema (SPEC column order).
    schemas: dict[str, pa.Schema]
    #: Each table's row order inside a symbol, ``ts`` first (a merge sorts by it).
    order: dict[str, list[str]]
    #: The Arctic instance's output format (what a read returns).
    output_format: str
    #: Whether rows tied on ``ts`` keep :attr:`order` across writes: then a write whose first row
    #: ties the symbol's last ``ts`` is appended only if it sorts after the stored last row, else
    #: merged (a write's own rows arrive in that order). Otherwise a tie always appends.
    ordered_ties: bool = False


#: The ingest suites' store: one library for both tables, as the query store.
PAPER = IngestLayout({t: INGEST_LIBRARY for t in TABLES}, SCHEMAS, SORT_KEYS, "PYARROW")


def ingest_frame(schema: pa.Schema, rows: Sequence[tuple[Any, ...]]) -> pd.DataFrame:
    """``rows`` (``schema``'s column order, ``ts`` integer ns) as the pandas frame ArcticDB stores:
    indexed by ``ts`` as naive ``datetime64[ns]``, stably sorted by it (an index written must ascend)."""
    cols = list(zip(*rows, strict=True))
    ts = np.asarray(cols[0], dtype=np.int64)
    order = np.argsort(ts, kind="stable") if ts.size > 1 and bool((np.diff(ts) < 0).any()) else None
    data = {}
    for f, values in zip(list(schema)[1:], cols[1:], strict=True):
        arr = np.asarray(values, dtype=DTYPES[f.type])
        data[f.name] = arr if order is None else arr[order]
    index = pd.DatetimeIndex((ts if order is None else ts[order]).view("datetime64[ns]"), name="ts")
    return pd.DataFrame(data, index=index)


def spec_table(schema: pa.Schema, data: pa.Table) -> pa.Table:
    """An ArcticDB read (Arrow: the ``ts`` index first, naive, strings as ``large_string``) with
    exactly the SPEC schema ``schema``."""
    return pa.Table.from_arrays([data.column(f.name).cast(f.type) for f in schema], schema=schema)


@dataclass
class _Symbol:
    """One symbol's writer state. ``lock`` serialises its writes: ArcticDB does not support
    concurrent writers to one symbol (each append builds its version on the latest one it read,
    so of two racing appends the later version can drop the other's rows), and the ingest suites
    write one instrument from several threads. ``end`` is its last row's key, once known: its
    ``ts`` (ns), then, with ordered ties, the layout's other order columns."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    end: tuple[Any, ...] | None = None
    loaded: bool = False


class IngestStore:
    """An open ingest store: the Arctic instance over ``root``, the libraries of ``layout``, and
    the symbols known to hold rows (listed once at open, then added as this process creates them)."""

    def __init__(self, root: Path, layout: IngestLayout = PAPER) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root, self.layout = root, layout
        self.ac: adb.Arctic | None = adb.Arctic(f"lmdb://{root}?map_size={INGEST_MAP_SIZE}",
                                                output_format=layout.output_format)
        names = set(layout.libraries.values())
        reopened = {n for n in names if self.ac.has_library(n)}
        libs = {n: self.ac.get_library(n, create_if_missing=True) for n in sorted(names)}
        self.libs: dict[str, Library] | None = {t: libs[n] for t, n in layout.libraries.items()}
        self._guard = threading.Lock()  # over the two dicts below
        self._state: dict[str, _Symbol] = {}
        self._by_table: dict[str, dict[str, str]] = {t: {} for t in layout.libraries}
        # a new library has no symbols; list_symbols would only cost a journal compaction
        for lib_name in sorted(reopened):
            for name in libs[lib_name].list_symbols():
                table, sym = split_symbol(name)
                if layout.libraries.get(table) == lib_name:
                    self._by_table[table][sym] = name

    def library(self, table: str) -> Library:
        """The library holding ``table``."""
        if self.libs is None:
            raise RuntimeError("the ingest store is closed")
        return self.libs[table]

    def close(self) -> None:
        """Drop the libraries and the Arctic instance: the last reference closes the LMDB
        environment (LMDB allows one open environment per path in a process)."""
        self.libs = None
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
        schema = self.layout.schemas[table]
        self.write_frames(table, {sym: ingest_frame(schema, part) for sym, part in groups.items()})

    def write_frames(self, table: str, frames: dict[str, pd.DataFrame]) -> None:
        """Write ``{instrument: frame}`` of ``table`` (frames as :func:`ingest_frame` makes
        them): the frames that extend their symbols in one ``append_batch`` (ArcticDB's call for
        many symbols at once: a market batch spans hundreds of instruments, and one ``append``
        each paid its fixed cost hundreds of times), the others each merged into its symbol."""
        if table not in self._by_table:
            raise ValueError(f"unknown table {table!r}")
        lib = self.library(table)
        items = sorted(frames.items())
        names = {sym: symbol_name(table, sym) for sym, _ in items}
        with self._guard:
            states = {sym: self._state.setdefault(names[sym], _Symbol()) for sym, _ in items}
            existed = {sym: sym in self._by_table[table] for sym, _ in items}
        held: list[threading.Lock] = []
        try:
            for sym, _ in items:  # in instrument order, so two writers cannot deadlock
                states[sym].lock.acquire()
                held.append(states[sym].lock)
            appends: list[WritePayload] = []
            for sym, frame in items:
                state = states[sym]
                if not state.loaded:  # a symbol of a reopened store: its last row's key, once
                    if existed[sym]:
                        tail = lib.tail(names[sym], 1, output_format="PYARROW").data
                        state.end = (int(tail.column("ts").cast(pa.int64())[0].as_py()),
                                     *(tail.column(c)[0].as_py() for c in self._ties(table)))
                    state.loaded = True
                first = self._key(table, frame, 0)
                if state.end is None or first >= state.end:
                    # ArcticDB accepts an append whose first index equals the last stored one (ties).
                    appends.append(WritePayload(names[sym], frame))
                else:
                    self._merge(lib, table, names[sym], frame, first[0])
            if appends:
                for item in lib.append_batch(appends, prune_previous_versions=PRUNE):
                    if isinstance(item, DataError):
                        raise RuntimeError(f"ArcticDB append to {item.symbol} failed: {item.exception_string}")
            for sym, frame in items:
                last, end = self._key(table, frame, -1), states[sym].end
                states[sym].end = last if end is None else max(end, last)
        finally:
            for lock in reversed(held):
                lock.release()
        with self._guard:
            for sym, _ in items:
                self._by_table[table][sym] = names[sym]

    def _ties(self, table: str) -> list[str]:
        """The order columns after ``ts`` that a row's key holds (none without ordered ties)."""
        return self.layout.order[table][1:] if self.layout.ordered_ties else []

    def _key(self, table: str, frame: pd.DataFrame, i: int) -> tuple[Any, ...]:
        """Row ``i`` of ``frame``'s key: its ``ts`` (ns), then its tie columns."""
        return (int(frame.index[i].value), *(frame[c].iat[i] for c in self._ties(table)))

    def _merge(self, lib: Library, table: str, name: str, frame: pd.DataFrame, first: int) -> None:
        """Rows that start before the symbol's end (another writer's later rows went in first):
        read the stored rows from ``first`` on, sort them with the new ones in the layout's row
        order and ``update`` that range — ArcticDB refuses an append that starts earlier, and
        ``update`` replaces every stored row of the range it is given, all of which were read."""
        held = lib.read(name, date_range=(pd.Timestamp(first, unit="ns"), None), output_format="PANDAS").data
        merged = pd.concat([held, frame]).reset_index().sort_values(self.layout.order[table], kind="stable")
        lib.update(name, merged.set_index("ts"), prune_previous_versions=PRUNE)

    # -- reads -------------------------------------------------------------------------------

    def read(self, table: str, sym: str) -> pa.Table:
        schema = self.layout.schemas[table]
        name = self.symbols(table).get(sym)
        if name is None:
            return schema.empty_table()
        return spec_table(schema, self.library(table).read(name).data)

    def count(self, table: str) -> int:
        """Rows of ``table``: the row counts of its symbols' latest versions."""
        names = list(self.symbols(table).values())
        if not names:
            return 0
        total = 0
        for desc in self.library(table).get_description_batch(names):
            if isinstance(desc, DataError):
                raise RuntimeError(f"ArcticDB description of {desc.symbol} failed: {desc.exception_string}")
            total += desc.row_count
        return total

    def count_upto(self, table: str, upto_ns: int) -> int:
        """Rows of ``table`` with ``ts <= upto_ns``: from each symbol's description (its rows and
        its first and last ``ts``) when the symbol lies wholly on one side, else the rows of an
        index-only read up to ``upto_ns`` (one batch of them). The head, not the tail after the
        bound: ArcticDB 6.28 fails a read whose ``date_range`` starts 1 ns after a ``ts`` shared
        by two segments ("Can't truncate … bytes"), which a tie across two appends makes."""
        names = list(self.symbols(table).values())
        if not names:
            return 0
        lib = self.library(table)
        upto = pd.Timestamp(upto_ns, unit="ns")
        total, heads = 0, []
        for name, desc in zip(names, lib.get_description_batch(names), strict=True):
            if isinstance(desc, DataError):
                raise RuntimeError(f"ArcticDB description of {desc.symbol} failed: {desc.exception_string}")
            start, end = desc.date_range
            if desc.row_count == 0 or start > upto:
                continue
            if end <= upto:
                total += desc.row_count
            else:
                heads.append(ReadRequest(name, date_range=(None, upto), columns=[]))
        for item in lib.read_batch(heads) if heads else []:
            if isinstance(item, DataError):
                raise RuntimeError(f"ArcticDB read of {item.symbol} failed: {item.exception_string}")
            total += len(item.data)
        return total

    def latest(self) -> pa.Table:
        """The last row of each book symbol (its latest ``ts``: rows are stored in time order),
        read in one batch: ``sym, ts, b1price, a1price``, sorted by sym."""
        names = list(self.symbols("book").values())
        parts: list[pa.Table] = []
        requests = [ReadRequest(n, row_range=(-1, None), columns=LATEST_COLUMNS) for n in names]
        for item in self.library("book").read_batch(requests) if requests else []:
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


def batch_frames(schema: pa.Schema, batch: pa.Table) -> dict[str, pd.DataFrame]:
    """``batch`` (``schema``'s columns) as ``{instrument: frame}`` in the form :func:`ingest_frame`
    makes: indexed by ``ts`` (naive ``datetime64[ns]``), stably sorted by it (rows tied on ``ts``
    keep the batch's order)."""
    cast = batch.cast(schema)
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
        return table, batch_frames(self.store.layout.schemas[table], batch)

    def payload_bytes(self, payload: Any) -> int:
        return int(sum(f.memory_usage(deep=False).sum() for f in payload[1].values()))

    def connect(self) -> StreamSender:
        return _FramesSender(self.store)
