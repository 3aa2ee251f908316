"""The market suite (SPEC §2.3) on ArcticDB: a library per table, a symbol per instrument, and a cross-section.

Layout, as a tick store on ArcticDB keeps ticks: in an LMDB directory of its own
(``<workdir>/market``), the libraries ``market_quotes`` and ``market_trades`` hold one symbol per
instrument (named by :func:`~tickbench.engines.arcticdb.layout.symbol_name`, which encodes a name
ArcticDB's symbol keys cannot hold: names from data never become keys unchecked), indexed by ``ts``
(naive datetime64[ns], UTC), every venue's rows of the 20 days in one time series, with the venues
of each day as the symbol's metadata; ``market_instruments`` holds the instruments table as one
symbol. The library ``market_cross`` holds each table's whole market as one symbol (``quotes``,
``trades``: every instrument's rows in time order, ``sym`` a column, indexed by ``ts``) and each
day's quote pairs (:data:`PAIRS`): the whole-market queries (M-STATS, M-TOPN, M-LAST) read it in one
read each, instead of a read per instrument. Rows are ordered by the SPEC's own orders, quotes by
``(ts, exchange, seq)`` and trades by ``(ts, exchange, trade_id)`` (exchange as bytes), so a
resample's ``first``/``last``, an as-of match's tie on ``ts`` and M-NBBO's steps all follow the
stored order. A read names its instruments' symbols and a ``date_range`` (index-pruned to the
segments of that span); aggregations ArcticDB has (``groupby``/``resample`` with sum, max, first,
last, count) run in its QueryBuilder, the rest (as-of matching, the consolidated book, ``stddev``)
in Polars.

Query contract: ``queries/M-<ID>.py`` starts with a one-line docstring saying which part runs in
ArcticDB and which in Polars, and defines::

    def query(store: MarketStore, params: dict[str, Any]) -> pl.DataFrame

``params`` are :func:`market_bindings` of the market parameters (each ``<span>_range`` the
inclusive ``date_range`` of ``[<span>_start, <span>_end)``).

Queries during ingest: an LMDB directory of its own (the ``store``) with the same libraries and
symbols, written by the stream path's per-instrument appends (:mod:`.ingest`, layout
:data:`INGEST`), each user reading it through a :class:`MarketStore` of its own.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

import arcticdb as adb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from arcticdb import DataError, QueryBuilder, ReadRequest
from arcticdb.version_store.library import Library

from tickbench.data.dataset import Dataset
from tickbench.datasets.base import RunParams
from tickbench.datasets.market.schema import MARKET_SCHEMAS
from tickbench.engines.arcticdb.ingest import FramesTarget, IngestLayout, IngestStore
from tickbench.engines.arcticdb.layout import VENUES, split_symbol, symbol_name
from tickbench.engines.arcticdb.writes import (
    OPTIONS,
    W_DURABILITY,
    lmdb_bytes,
    lmdb_uri,
    to_pandas,
    write_batch,
    write_symbol,
)
from tickbench.engines.base import (
    IngestReader,
    LoadFigures,
    StreamTarget,
    by_kind,
    upto_all,
)

TABLES = ("quotes", "trades")
LIBRARIES = {"quotes": "market_quotes", "trades": "market_trades", "instruments": "market_instruments",
             "cross": "market_cross"}
# The cross-section library's symbols: each table's whole market in time order, and each day's
# (sym, exchange) pairs of quotes (M-LAST's "pairs with a quote in M"), indexed by the day's start.
PAIRS = "quote_pairs"
ORDER = {"quotes": ["ts", "exchange", "seq"], "trades": ["ts", "exchange", "trade_id"]}
NS = pd.Timedelta(1, "ns")
NS_PER_DAY = 86_400 * 10**9
# The market ingest store: the market's libraries and orders, read as Polars as the query store
# is; ties on ts keep the order across writes (M-SNAP's as-of joins take the last equal row).
INGEST = IngestLayout({t: LIBRARIES[t] for t in TABLES}, {t: MARKET_SCHEMAS[t] for t in TABLES}, ORDER, "POLARS",
                      ordered_ties=True)


def market_bindings(raw: dict[str, Any]) -> dict[str, Any]:
    """The market parameters for ArcticDB: ``<span>_range = (start, end - 1 ns)`` for each
    half-open ``[<span>_start, <span>_end)`` (``d``, ``w``, ``m``, ``vwab``; ``date_range``
    includes both ends); times stay naive UTC, like the stored index."""
    out = dict(raw)
    for span in ("d", "w", "m", "vwab"):
        out[f"{span}_range"] = (pd.Timestamp(raw[f"{span}_start"]), pd.Timestamp(raw[f"{span}_end"]) - NS)
    return out


@dataclass
class MarketStore:
    """What a market query file works with: a library per table and each instrument's symbol,
    listed once at open; every read it makes is noted in :attr:`reads` (its plan)."""

    libs: dict[str, Library]
    symbols: dict[str, dict[str, str]]
    reads: list[str] = field(default_factory=list)

    @classmethod
    def open(cls, ac: adb.Arctic) -> MarketStore:
        libs = {t: ac.get_library(name) for t, name in LIBRARIES.items()}
        symbols = {t: {split_symbol(s)[1]: s for s in libs[t].list_symbols()} for t in TABLES}
        return cls(libs, symbols)

    def market(self, table: str, date_range: tuple[pd.Timestamp, pd.Timestamp], columns: Sequence[str] | None = None,
               query: QueryBuilder | None = None) -> pl.DataFrame:
        """One read of a cross-section symbol (``quotes`` or ``trades``: every instrument, in time
        order, ``sym`` a column; or :data:`PAIRS`) over ``date_range``, with ``columns`` and
        ``query``; the index as ``ts``."""
        if "cross" not in self.libs:
            raise RuntimeError("this ArcticDB store has no cross-section library (an ingest store)")
        symbol = table
        frame: pl.DataFrame = self.libs["cross"].read(symbol, date_range=date_range,
                                                      columns=list(columns) if columns is not None else None,
                                                      query_builder=query).data
        self.reads.append(f"{LIBRARIES['cross']}: read of {symbol} date_range=[{date_range[0]}, {date_range[1]}] "
                          f"columns={list(columns) if columns is not None else 'all'}"
                          + (f" query_builder={query}" if query is not None else "") + f" -> {frame.height:,} rows")
        return frame

    def syms(self, table: str) -> list[str]:
        """Every instrument with a symbol in ``table``, sorted."""
        return sorted(self.symbols[table])

    def read(self, table: str, syms: Iterable[str], date_range: tuple[pd.Timestamp, pd.Timestamp],
             columns: Sequence[str] | None = None, query: QueryBuilder | None = None) -> dict[str, pl.DataFrame]:
        """One ``read_batch`` of the symbols of ``syms`` (an instrument without one is skipped)
        over ``date_range``, with ``columns`` and ``query``: ``{sym: frame}`` (the index as ``ts``)."""
        want = [s for s in dict.fromkeys(syms) if s in self.symbols[table]]
        requests = [ReadRequest(self.symbols[table][s], date_range=date_range,
                                columns=list(columns) if columns is not None else None, query_builder=query)
                    for s in want]
        out: dict[str, pl.DataFrame] = {}
        for sym, item in zip(want, self.libs[table].read_batch(requests), strict=True):
            if isinstance(item, DataError):
                raise RuntimeError(f"ArcticDB read of {item.symbol} failed: {item.exception_string}")
            out[sym] = item.data
        rows = sum(f.height for f in out.values())
        self.reads.append(f"{LIBRARIES[table]}: read_batch of {len(want)} symbols "
                          f"[{', '.join(self.symbols[table][s] for s in want)}] date_range=[{date_range[0]}, "
                          f"{date_range[1]}] columns={list(columns) if columns is not None else 'all'}"
                          + (f" query_builder={query}" if query is not None else "") + f" -> {rows:,} rows")
        return out

    def frame(self, table: str, syms: Iterable[str], date_range: tuple[pd.Timestamp, pd.Timestamp],
              columns: Sequence[str] | None = None, query: QueryBuilder | None = None,
              schema: dict[str, Any] | None = None) -> pl.DataFrame:
        """:meth:`read`'s frames stacked with the instrument as column ``sym`` (each in its
        stored order); ``schema``: the columns (name: Polars type) of an empty answer."""
        parts = [f.with_columns(sym=pl.lit(s, pl.String)) for s, f in self.read(table, syms, date_range, columns,
                                                                                  query).items() if f.height]
        if parts:
            return pl.concat(parts, how="diagonal_relaxed")
        return pl.DataFrame(schema={**(schema or {}), "sym": pl.String})

    def venues(self, table: str, syms: Iterable[str], days: Sequence[str]) -> dict[str, int]:
        """How many venues each instrument of ``syms`` has rows of on ``days``, from the metadata
        written with its symbol (one batch of small reads)."""
        want = [s for s in dict.fromkeys(syms) if s in self.symbols[table]]
        metas = self.libs[table].read_metadata_batch([self.symbols[table][s] for s in want])
        out = {}
        for sym, meta in zip(want, metas, strict=True):
            by_day = meta.metadata.get(VENUES, {}) if isinstance(meta.metadata, dict) else {}
            out[sym] = len({v for d in days for v in by_day.get(d, [])})
        return out


class _Reader(IngestReader):
    """One user's reader of the market ingest store: a :class:`MarketStore` of its own per query
    over the symbols written so far. LMDB allows one open environment per path in a process, so
    the users share the store's Arctic instance and libraries (ArcticDB reads from several
    threads at once), as the market users share the query store's."""

    def __init__(self, store: IngestStore, module: Callable[[str], ModuleType]) -> None:
        self.store, self.module = store, module

    def run_query(self, qid: str, params: RunParams) -> pa.Table:
        fn = self.module(qid).query
        view = MarketStore({t: self.store.library(t) for t in TABLES}, {t: self.store.symbols(t) for t in TABLES})
        frame: pl.DataFrame = fn(view, market_bindings(params.bindings()))
        return frame.to_arrow()


class ArcticMarket:
    """The ArcticDB adapter's part for the market dataset (the adapter picks these methods for a
    market dataset with ``by_kind``)."""

    # Not declared visible on commit: a payload is one append per instrument, committed symbol by
    # symbol, so the watcher measures when all of a payload's rows are visible.
    ingest_one_process: ClassVar[str] = (
        "tickbench's ArcticDB ingest store learns the symbols it writes in the writing process (LMDB itself "
        "admits writers in other processes; not used yet): writers and watcher are threads of the engine's "
        "process")

    # Set by Engine.__init__ (the adapter's other base); the market suite's params are MarketParams.
    workdir: Path
    dataset: Dataset
    params: Any
    ac_market: adb.Arctic | None = None
    market: MarketStore | None = None
    market_ingest: IngestStore | None = None

    if TYPE_CHECKING:  # the Adapter's
        def _module(self, qid: str) -> ModuleType: ...

    @property
    def market_root(self) -> Path:
        return self.workdir / "market"

    def _open_market(self, root: Path, days: Sequence[str]) -> tuple[adb.Arctic, dict[str, Library]]:
        ac = adb.Arctic(lmdb_uri(root, self.dataset.sizes(days)["parquet_bytes"]),
                        output_format="POLARS")
        return ac, {t: ac.get_library(name, create_if_missing=True, library_options=OPTIONS)
                    for t, name in LIBRARIES.items()}

    def _market_store(self) -> MarketStore:
        if self.market is None:
            if not self.market_root.is_dir():
                raise RuntimeError("ArcticDB: the market dataset is not loaded")
            self.ac_market, _ = self._open_market(self.market_root, self.params.load_days())
            self.market = MarketStore.open(self.ac_market)
        return self.market

    def _write_tables(self, libs: dict[str, Library],
                      frames: dict[str, Iterable[pl.DataFrame]]) -> list[tuple[str, str]]:
        """Write each table's frames (each a group of whole instruments, e.g. one block of the
        dataset over the days) as one symbol per instrument, in the table's order, a group in
        one ``write_batch`` (each symbol with its venues metadata); return the (table, symbol)
        pairs written."""
        written: list[tuple[str, str]] = []
        for table, groups in frames.items():
            seen: set[str] = set()
            for group in groups:
                ordered = group.sort("sym", *ORDER[table])
                parts = ordered.partition_by("sym", as_dict=True, include_key=False, maintain_order=True)
                for (sym,) in parts:
                    if sym in seen:  # a symbol's write replaces it: an instrument must be in one group
                        raise RuntimeError(f"instrument {sym!r} of {table} is in two blocks of the dataset")
                    seen.add(str(sym))
                names = [symbol_name(table, str(sym)) for (sym,) in parts]
                write_batch(libs[table], dict(zip(names, parts.values(), strict=True)))
                written += [(table, n) for n in names]
        return written

    def _utc_days(self, table: str, days: Sequence[str]) -> Iterator[pl.DataFrame]:
        """``table`` over ``days``, a UTC day at a time in time order: a row goes to the day of
        its own ``ts``, whichever file held it (each day's filter skips the other files' row
        groups by their statistics), so a day's frame never overlaps another's."""
        files = [str(f) for f in self.dataset.files(table, days)]
        if not files:
            return
        scan = pl.scan_parquet(files)
        day = pl.col("ts").dt.epoch("ns") // NS_PER_DAY
        for key in sorted(scan.select(day.unique()).collect().to_series().to_list()):
            yield scan.filter(day == key).collect()

    def _write_cross(self, lib: Library, frames: dict[str, Iterable[pl.DataFrame]]) -> int:
        """Write each table's cross-section symbol from its frames (days in time order, none
        overlapping the next): every instrument's rows in time order (ties in the table's order,
        then by sym), ``sym`` a column, in whole-segment writes; and the quotes' (sym, exchange)
        pairs of each day as :data:`PAIRS`, indexed by the day's start. Returns the rows written."""
        rows = 0
        for table, days in frames.items():
            pairs: list[pl.DataFrame] = []

            def ordered(days: Iterable[pl.DataFrame], table: str = table,
                        pairs: list[pl.DataFrame] = pairs) -> Iterator[pl.DataFrame]:
                for frame in days:
                    if table == "quotes":
                        pairs.append(frame.select(pl.col("ts").dt.truncate("1d"), "sym", "exchange").unique())
                    yield frame.sort(*ORDER[table], "sym")

            rows += write_symbol(lib, table, ordered(days))
            if pairs:
                lib.write(PAIRS, to_pandas(pl.concat(pairs).sort("ts", "sym", "exchange")),
                          prune_previous_versions=True)
        return rows

    def _blocks(self, table: str, days: Sequence[str]) -> Iterable[pl.DataFrame]:
        """``table`` over ``days`` a block of instruments at a time (the dataset's part files of
        one rank range, every day of it): one block's month in memory, not the table's."""
        groups: dict[tuple[int, ...], list[Path]] = defaultdict(list)
        for entry in self.dataset.entries(table, days):
            groups[tuple(entry.get("ranks") or ())].append(self.dataset.root / entry["path"])
        for key in sorted(groups):
            yield pl.read_parquet([str(p) for p in groups[key]])

    def _load_market(self) -> int:
        """Write the instruments, then each table a block of instruments at a time, one symbol per
        instrument in whole-segment writes (each an LMDB commit, fsynced)."""
        days = self.params.load_days()
        self.market = self.ac_market = None
        shutil.rmtree(self.market_root, ignore_errors=True)
        ac, libs = self._open_market(self.market_root, days)
        instruments = self.dataset.instruments()
        libs["instruments"].write("instruments", instruments.to_pandas())
        written = self._write_tables(libs, {t: self._blocks(t, days) for t in TABLES})
        self._write_cross(libs["cross"], {t: self._utc_days(t, days) for t in TABLES})
        rows = instruments.height + sum(libs[t].get_description(s).row_count for t, s in written)
        # opened here, not at the first query: listing a fresh library's symbols compacts its journal
        self.ac_market, self.market = ac, MarketStore.open(ac)
        return rows

    # -- M-W and M-SE ------------------------------------------------------------------------

    def _day_source(self, fmt: str, table: str) -> tuple[pl.DataFrame, int]:
        """Day D of ``table`` parsed from ``fmt``, and the input bytes read."""
        schema = self.dataset.schema(table)
        if fmt == "csv":
            path = self.dataset.csv_file(table)
            data = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(column_types=schema))
            size = path.stat().st_size
        else:
            files = self.dataset.files(table, [self.params.D])
            data = (pa.concat_tables(pq.read_table(f, schema=schema) for f in files) if files
                    else schema.empty_table())
            size = sum(f.stat().st_size for f in files)
        frame = pl.from_arrow(data)
        assert isinstance(frame, pl.DataFrame)
        return frame, size

    def _bulk_load_market(self, fmt: str, scratch: Path) -> LoadFigures:
        """tickbench's path: parse day D, split per instrument, write each in the store's order."""
        root = scratch / f"market_w_{fmt}"
        shutil.rmtree(root, ignore_errors=True)
        ac, libs = self._open_market(root, [self.params.D])
        sources = {t: self._day_source(fmt, t) for t in TABLES}
        written = self._write_tables(libs, {t: [frame] for t, (frame, _) in sources.items()})
        self._write_cross(libs["cross"], {t: [frame] for t, (frame, _) in sources.items()})
        rows = sum(libs[t].get_description(s).row_count for t, s in written)
        del ac
        return LoadFigures(rows=rows, input_bytes=sum(n for _, n in sources.values()),
                           detail={"symbols": len(written), "durability": W_DURABILITY})

    def _baseline_load_market(self, fmt: str, scratch: Path) -> LoadFigures:
        """ArcticDB's plain path: one ``lib.write(table, df)`` per table, in time order."""
        root = scratch / f"market_baseline_{fmt}"
        shutil.rmtree(root, ignore_errors=True)
        ac, libs = self._open_market(root, [self.params.D])
        rows, nbytes = 0, 0
        for table in TABLES:
            frame, size = self._day_source(fmt, table)
            nbytes += size
            data = frame.sort("ts").to_pandas().set_index("ts")  # a written index must ascend
            data.index = data.index.tz_convert(None)
            libs[table].write(table, data)
            rows += libs[table].get_description(table).row_count
        del ac
        return LoadFigures(rows=rows, input_bytes=nbytes, detail={"durability": W_DURABILITY})

    def _storage_bytes_market(self) -> dict[str, int]:
        """M-SE: the market LMDB directory, which holds the loaded 20 days and nothing else."""
        return lmdb_bytes(self.market_root)

    # -- queries -------------------------------------------------------------------------------

    def market_query(self, fn: Any) -> pa.Table:
        """Run a market query file's ``query`` on the market store."""
        store = self._market_store()
        store.reads.clear()
        frame: pl.DataFrame = fn(store, market_bindings(self.params.bindings()))
        return frame.to_arrow()

    def explain(self, qid: str) -> str | None:
        """On the market dataset, the reads ``qid`` made (library, symbols, date_range, columns,
        QueryBuilder, rows returned): ArcticDB has no ``EXPLAIN``; these are what it was asked
        to decode. None on the paper dataset, as before."""
        reads: Callable[[str], str | None] = by_kind(self.dataset, paper=lambda _: None, market=self._market_reads)
        return reads(qid)

    def _market_reads(self, qid: str) -> str:
        self.run_query(qid)  # type: ignore[attr-defined]
        return "\n".join(self._market_store().reads)

    # -- queries during ingest (Ingest) -----------------------------------------------------

    def _ingest_open_market(self, store: Path, setting: str) -> None:
        """An LMDB directory of its own at ``store`` (the loaded market's stays open beside it)
        with the market's libraries: the instruments written as the load writes them, quotes and
        trades without a symbol until their first rows arrive; ``setting`` is ArcticDB's one
        (LMDB's commit), as the paper's store's."""
        if self.market_ingest is not None:
            raise RuntimeError("a market ingest store is already open")
        ingest = IngestStore(store, INGEST)
        assert ingest.ac is not None
        lib = ingest.ac.get_library(LIBRARIES["instruments"], create_if_missing=True, library_options=OPTIONS)
        lib.write("instruments", self.dataset.instruments().to_pandas())
        self.market_ingest = ingest

    def _market_ingest(self) -> IngestStore:
        if self.market_ingest is None:
            raise RuntimeError("the market ingest store is not open")
        return self.market_ingest

    def _ingest_stream_target_market(self) -> StreamTarget:
        return FramesTarget(self._market_ingest())

    def _ingest_count_market(self, table: str, upto_ns: int | None = None) -> int:
        return self._market_ingest().count_upto(table, upto_all(upto_ns))

    def _ingest_reader_market(self) -> IngestReader:
        return _Reader(self._market_ingest(), self._module)

    def _ingest_close_market(self) -> None:
        if self.market_ingest is not None:
            self.market_ingest.close()
            self.market_ingest = None
