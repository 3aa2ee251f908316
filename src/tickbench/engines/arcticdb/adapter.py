"""ArcticDB over LMDB on local disk, in-process.

Layout: see :mod:`tickbench.engines.arcticdb.layout` (one symbol per (table, instrument), time
index). Writes go through the DataFrame API (pandas frames indexed by ``ts``) in chunks of whole
segments; reads come back as Polars (``output_format="POLARS"``). The ingest capability
(tick-latency, stream, durability) keeps a store of its own: :mod:`tickbench.engines.arcticdb.ingest`.

Query contract: ``queries/<ID>.py`` starts with a one-line docstring saying which part runs in
ArcticDB (``QueryBuilder: …``) and which in Polars (``Polars: …``) — :meth:`Adapter.query_notes`
returns that line, and the runner records it with the result — and defines::

    def query(store: Store, params: dict[str, Any]) -> pl.DataFrame

``params`` are the run's bindings as :func:`bindings` shapes them; the returned frame has the
answer's columns in order, sorted.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import arcticdb as adb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from arcticdb.version_store.library import Library

from tickbench.data.dataset import Dataset, empty_frame
from tickbench.datasets.paper.params import QueryParams
from tickbench.datasets.paper.schema import SCHEMAS
from tickbench.engines.arcticdb.ingest import PRUNE, FramesTarget, IngestStore, Writer
from tickbench.engines.arcticdb.layout import LIBRARY, SORT_KEYS, TABLES, VENUES, Store, symbol_name
from tickbench.engines.arcticdb.market import ArcticMarket
from tickbench.engines.arcticdb.writes import (
    CHUNK_ROWS,
    OPTIONS,
    W_DURABILITY,
    lmdb_bytes,
    lmdb_uri,
    stored_rows,
    to_pandas,
    write_symbol,
)
from tickbench.engines.base import (
    BulkLoad,
    Engine,
    EngineInfo,
    Ingest,
    IngestByKind,
    IngestClient,
    LoadFigures,
    SharedReaders,
    Storage,
    StoreByKind,
    StreamTarget,
    by_kind,
    whole_store,
)

QueryFn = Callable[[Store, dict[str, Any]], pl.DataFrame]


def bindings(raw: dict[str, Any]) -> dict[str, Any]:
    """The run's parameters for ArcticDB: ``<span>_range`` = ``(start, end - 1 ns)`` for every
    half-open ``[<span>_start, <span>_end)``, because ``date_range`` includes both ends; times stay
    naive UTC datetimes, like the stored index."""
    out = dict(raw)
    for span in ("day", "week", "month", "multi"):
        out[f"{span}_range"] = (pd.Timestamp(raw[f"{span}_start"]),
                                pd.Timestamp(raw[f"{span}_end"]) - pd.Timedelta(1, "ns"))
    return out


def load_query(path: Path) -> ModuleType:
    """Import ``queries/<ID>.py`` (not a valid module name, hence by file location)."""
    spec = importlib.util.spec_from_file_location(f"tickbench_arcticdb_query_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Adapter(StoreByKind, IngestByKind, ArcticMarket, Engine, BulkLoad, Storage, Ingest, SharedReaders):
    ac: adb.Arctic | None = None
    store: Store | None = None
    ingest: IngestStore | None = None
    # ArcticDB's LMDB URI takes only map_size and opens the environment with MDB_NOTLS alone, so
    # there is no sync setting to compare: LMDB's default commit, which fsyncs before returning.
    ingest_durability: ClassVar[dict[str, str]] = {
        "default": "each write's new version is committed to LMDB (transactions fsynced at commit) before it returns"}
    # An append returns after the LMDB transaction publishing its version has committed; a killed
    # process cannot take a committed transaction back, so no acknowledged row is lost.
    ingest_durable: ClassVar[frozenset[str]] = frozenset({"default"})
    users_limit: ClassVar[str] = (
        "one open per process: LMDB's environment must not be opened twice in one process (ArcticDB's LMDB "
        "guide), while several processes may read it at once, so each user is a process of its own")

    def __init__(self, info: EngineInfo, workdir: Path, dataset: Dataset, params: QueryParams) -> None:
        super().__init__(info, workdir, dataset, params)
        self.modules: dict[str, ModuleType] = {}

    @classmethod
    def probe(cls) -> str:
        return str(adb.__version__)

    @property
    def root(self) -> Path:
        return self.workdir / "lmdb"

    def _open(self, root: Path, data_bytes: int) -> tuple[adb.Arctic, Library]:
        ac = adb.Arctic(lmdb_uri(root, data_bytes), output_format="POLARS")
        return ac, ac.get_library(LIBRARY, create_if_missing=True, library_options=OPTIONS)

    def start(self) -> None:
        self.ac, lib = self._open(self.root, self.dataset.sizes(self.params.load_days())["parquet_bytes"])
        self.store = Store.open(lib)

    def start_shared(self) -> None:
        """A client process's own open of the loaded LMDB store: LMDB takes several reader
        processes beside one another, but one environment per process."""
        self.start()

    def stop(self) -> None:
        # Dropping the last references closes the LMDB environment.
        self.store = self.market = None
        self.ac = self.ac_market = None

    def _store(self) -> Store:
        if self.store is None:
            raise RuntimeError("ArcticDB is not started")
        return self.store

    def _write_days(self, lib: Library, days: list[str]) -> list[str]:
        """Write ``days`` of both tables from the dataset's Parquet, one day at a time per
        instrument (all venues merged into time order); return the symbols written. An
        instrument with rows in one table only (a book-only capture) gets an empty symbol of
        the other table's columns, so its queries read no rows instead of a missing symbol."""
        written = []
        every = sorted({e["sym"] for t in TABLES for e in self.dataset.entries(t, days)})
        for table in TABLES:
            for sym in every:
                chunks = (pl.read_parquet([str(f) for f in files]).sort(SORT_KEYS[table])
                          for day in days if (files := self.dataset.files(table, [day], sym)))
                if not write_symbol(lib, symbol_name(table, sym), chunks):
                    lib.write(symbol_name(table, sym), to_pandas(empty_frame(SCHEMAS[table])),
                              metadata={VENUES: {}} if table == "book" else None, prune_previous_versions=True)
                written.append(symbol_name(table, sym))
        return written

    def _load_paper(self) -> int:
        store = self._store()
        symbols = self._write_days(store.lib, self.params.load_days())
        self.store = Store.open(store.lib)
        return stored_rows(store.lib, symbols)

    def _module(self, qid: str) -> ModuleType:
        if qid not in self.modules:
            self.modules[qid] = load_query(self.info.query_file(qid))
        return self.modules[qid]

    def run_query(self, qid: str) -> pa.Table:
        fn: QueryFn = self._module(qid).query
        run: Callable[[], pa.Table] = by_kind(
            self.dataset, paper=lambda: fn(self._store(), bindings(self.params.bindings())).to_arrow(),
            market=lambda: self.market_query(fn))
        return run()

    def query_notes(self, qid: str) -> str:
        """Which part of ``qid`` ran in ArcticDB and which in Polars (the query file's first line)."""
        doc = self._module(qid).__doc__ or ""
        return doc.strip().splitlines()[0] if doc.strip() else ""

    # -- W and SE --------------------------------------------------------------------------

    def _bulk_source(self, fmt: str, table: str) -> tuple[pa.Table, int]:
        """The bulk-load day of ``table`` parsed from ``fmt``, and the input bytes read."""
        if fmt == "csv":
            path = self.dataset.csv_file(table)
            opts = pacsv.ConvertOptions(column_types=SCHEMAS[table])
            return pacsv.read_csv(path, convert_options=opts), path.stat().st_size
        files = self.dataset.input_files(table, [self.dataset.bulk_day], self.workdir)
        return pa.concat_tables(pq.read_table(f) for f in files), sum(f.stat().st_size for f in files)

    def _fresh(self, scratch: Path, name: str) -> tuple[Path, adb.Arctic, Library]:
        root = scratch / name
        shutil.rmtree(root, ignore_errors=True)
        data_bytes = self.dataset.sizes([self.dataset.bulk_day])["parquet_bytes"]
        return root, *self._open(root, data_bytes)

    def _bulk_load_paper(self, fmt: str, scratch: Path) -> LoadFigures:
        """tickbench's path: parse, split per instrument, sort, write in whole segments."""
        _, _, lib = self._fresh(scratch, f"w_{fmt}")
        nbytes = 0
        symbols = []
        for table in TABLES:
            data, size = self._bulk_source(fmt, table)
            nbytes += size
            frame = pl.from_arrow(data)
            assert isinstance(frame, pl.DataFrame)
            for (sym,), part in sorted(frame.partition_by("sym", as_dict=True).items()):
                symbols.append(symbol_name(table, str(sym)))
                write_symbol(lib, symbols[-1], [part.sort(SORT_KEYS[table])])
        return LoadFigures(rows=stored_rows(lib, symbols), input_bytes=nbytes,
                           detail={"symbols": len(symbols), "durability": W_DURABILITY})

    def _baseline_load_paper(self, fmt: str, scratch: Path) -> LoadFigures:
        """ArcticDB's plain path: one ``lib.write(table, df)`` per table of the same parsed data."""
        _, _, lib = self._fresh(scratch, f"baseline_{fmt}")
        nbytes = 0
        for table in TABLES:
            data, size = self._bulk_source(fmt, table)
            nbytes += size
            if fmt == "parquet":  # the files are per instrument; a written index must ascend
                data = data.sort_by("ts")
            lib.write(table, data.to_pandas().set_index("ts"))
        return LoadFigures(rows=stored_rows(lib, list(TABLES)), input_bytes=nbytes,
                           detail={"durability": W_DURABILITY})

    def _storage_bytes_paper(self) -> dict[str, int]:
        """SE: the 30-day period alone, written the same way into a fresh LMDB directory."""
        root = self.workdir / "se"
        shutil.rmtree(root, ignore_errors=True)
        month = self.params.days("month")
        ac, lib = self._open(root, self.dataset.sizes(month)["parquet_bytes"])
        self._write_days(lib, month)
        del ac, lib
        return lmdb_bytes(root)

    # -- ingest (tick-latency, stream, durability): see ingest.py and README "Ingest" ----------

    def _ingest_open_paper(self, store: Path, durability: str | None = None) -> None:
        """Open (or create) the ingest store: an ArcticDB library of its own under ``store``."""
        self.durability_setting(durability)
        if self.ingest is not None:
            raise RuntimeError("an ingest store is already open")
        self.ingest = IngestStore(store)

    def _ingest(self) -> IngestStore:
        if self.ingest is None:
            raise RuntimeError("the ingest store is not open")
        return self.ingest

    def ingest_client(self) -> IngestClient:
        return Writer(self._ingest())

    def _ingest_stream_target_paper(self) -> StreamTarget:
        return FramesTarget(self._ingest())

    def ingest_read(self, table: str, sym: str) -> pa.Table:
        return self._ingest().read(table, sym)

    def _ingest_count_paper(self, table: str, upto_ns: int | None = None) -> int:
        whole_store(upto_ns)
        return self._ingest().count(table)

    def ingest_latest(self) -> pa.Table:
        return self._ingest().latest()

    def _ingest_close_paper(self) -> None:
        if self.ingest is not None:
            self.ingest.close()
            self.ingest = None

    def settings(self) -> dict[str, Any]:
        store = self._store()
        opts = store.lib.options()
        return {
            "uri": self.ac.get_uri() if self.ac is not None else "",
            "rows_per_segment": opts.rows_per_segment,
            "columns_per_segment": opts.columns_per_segment,
            "dynamic_schema": opts.dynamic_schema,
            "encoding_version": str(opts.encoding_version),
            "layout": by_kind(self.dataset, paper="one symbol per (table, instrument), ts index",
                              market="a library per table, one symbol per instrument, ts index"),
            "write_chunk_rows": CHUNK_ROWS,
            "ingest_prune_previous_versions": PRUNE,
        }

