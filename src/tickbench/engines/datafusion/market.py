"""DataFusion's market suite (SPEC §2.3): a Parquet store of the market tables, its load, M-W and M-SE.

The store follows the paper path's idiom (``adapter.py``) in a directory of its own,
``<workdir>/market``: ``quotes/day=<date>/part-0.parquet`` and ``trades/…``, one file per
(table, UTC day) sorted by (sym, ts, then the ties' order), written by DataFusion with the
paper store's writer options and fsynced, plus ``instruments/part-0.parquet``; each table a
listing table with that sort order declared and its strings read as ``Utf8View``. A query of a
day opens that day's file only (its min/max statistics on ts), and inside it the row groups and
pages of its instruments only.
"""

from __future__ import annotations

from abc import abstractmethod
from pathlib import Path

import pyarrow as pa
from datafusion import DataFrame, SessionContext, col
from datafusion.dataframe import DataFrameWriteOptions
from datafusion.expr import SortExpr

from tickbench.data.dataset import Dataset
from tickbench.datasets.market.params import MarketParams
from tickbench.datasets.market.schema import MARKET_SCHEMAS, MARKET_TABLES
from tickbench.engines.base import LoadFigures, storage_figures
from tickbench.engines.datafusion import store as st

# Pages of at most 2,048 rows: a day's file is sorted by sym and a basket's instrument holds a few
# hundred to a few thousand rows of it, so the page index narrows a basket read to its own rows
# (with 20,000-row pages, M-HIBID-M decoded most of the month's quote pages to return B's rows).
# No bloom filter on sym: the row groups are already pruned by sym's min/max (the files are sorted
# by it); a bloom filter answers per row group only, never per page.
MARKET_PAGE_ROWS = 2_048
# A join collects its build side whole (CollectLeft) instead of hash-partitioning both sides: the
# build sides of the market queries are small (M-LAST's pairs, the probes of M-SNAP, M-ASOF, …),
# and a collected build side pushes its bounds to the probe's scan as a plain dynamic filter that
# prunes files and row groups by their statistics; a partitioned join's filter is a CASE on the
# key's hash per partition, which no statistics can prune (M-LAST opened all 20 days for one).
MARKET_SETTINGS = {"datafusion.optimizer.repartition_joins": "false"}
# Each day's order: the instrument, then time, then the ties' order of SPEC §2.3.
ORDER = {"quotes": ("sym", "ts", "exchange", "seq"), "trades": ("sym", "ts", "exchange", "trade_id"),
         "instruments": ("sym",)}


def _sorted(table: str) -> list[SortExpr]:
    return [col(name).sort(ascending=True, nulls_first=False) for name in ORDER[table]]


def _views(schema: pa.Schema) -> pa.Schema:
    """``schema`` with its strings read as ``Utf8View`` (DataFusion's own choice when it infers a
    Parquet schema, ``schema_force_view_types``): grouping and comparing views skips copying each
    string out of the page (M-LAST's pairs of the month: 285 -> 90 ms at 5.12 M quotes)."""
    return pa.schema([f.with_type(pa.string_view()) if f.type == pa.string() else f for f in schema])


def register_market(ctx: SessionContext, store: Path) -> None:
    """The market tables of ``store`` as listing tables (``day`` is the Hive partition column of
    quotes and trades), their order declared as the whole table's: day, then each file's own.
    Each file records its own sort (sym, ts, …) in its metadata, and from that alone DataFusion
    55 took a file group of several days, overlapping in sym, for one sorted stream: a sorted
    GROUP BY of sym and date split its groups and the final sort was skipped (wrong answers)."""
    for table in (*MARKET_TABLES, "instruments"):
        (store / table).mkdir(parents=True, exist_ok=True)
        daily = table in MARKET_TABLES
        order = [col("day").sort(ascending=True, nulls_first=False)] if daily else []
        ctx.register_listing_table(table, f"{store / table}/", file_extension=".parquet",
                                   table_partition_cols=[("day", pa.string())] if daily else [],
                                   schema=_views(MARKET_SCHEMAS[table]), file_sort_order=[order + _sorted(table)])


def write_sorted(source: DataFrame, table: str, dest: Path) -> None:
    """``source`` sorted by ``table``'s order into ``dest/part-0.parquet``, fsynced (the file,
    then the directories up to the table's)."""
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / st.PART_FILE
    target.unlink(missing_ok=True)
    source.sort(*_sorted(table)).write_parquet_with_options(
        str(target), st.writer_options(MARKET_PAGE_ROWS), DataFrameWriteOptions(single_file_output=True))
    st.fsync_path(target)
    st.fsync_path(dest)
    st.fsync_path(dest.parent)


def _count(store: Path) -> int:
    """Rows of quotes and trades in ``store``, read back through a fresh listing of it."""
    ctx = st.session()
    register_market(ctx, store)
    return sum(ctx.table(t).count() for t in MARKET_TABLES)


def _bytes(store: Path) -> int:
    return sum(f.stat().st_size for f in store.rglob("*.parquet"))


class DataFusionMarket:
    """The DataFusion adapter's part for the market dataset, picked by ``by_kind`` (mixed into
    ``Adapter``, which provides the session, the dataset and the parameters, and registers
    :func:`register_market`'s tables when it opens a session on a market dataset)."""

    dataset: Dataset
    workdir: Path
    ctx: SessionContext | None

    @abstractmethod
    def _open(self) -> SessionContext:
        """A session with the store's tables registered (the Adapter's)."""

    @property
    def market_store(self) -> Path:
        return self.workdir / "market"

    @property
    def _market(self) -> MarketParams:
        params = getattr(self, "params", None)
        if not isinstance(params, MarketParams):
            raise TypeError("the market capabilities run with the market dataset's parameters")
        return params

    def _write_days(self, store: Path, days: list[str]) -> None:
        ctx = st.session()
        for table in MARKET_TABLES:
            for day in days:  # one day's sort at a time
                files = self.dataset.files(table, [day])
                if files:
                    write_sorted(st.read_files(ctx, files), table, st.day_dir(store, table, day))
            (store / table).mkdir(parents=True, exist_ok=True)
            st.fsync_path(store / table)

    def _load_market(self) -> int:
        store = self.market_store
        ctx = st.session()
        write_sorted(ctx.read_parquet(str(self.dataset.root / "instruments.parquet")), "instruments",
                     store / "instruments")
        self._write_days(store, self._market.load_days())
        st.fsync_path(store)
        self.ctx = self._open()  # a fresh session lists the files just written
        return _count(store)

    def _bulk_load_market(self, fmt: str, scratch: Path) -> LoadFigures:
        store = scratch / "market"
        day = self._market.D
        for part in store.glob(f"*/day=*/{st.PART_FILE}"):
            part.unlink()
        ctx = st.session()
        nbytes = 0
        for table in MARKET_TABLES:
            if fmt == "csv":
                path = self.dataset.csv_file(table)
                nbytes += path.stat().st_size
                # The CSV read with the table's own column types (no inference).
                source = ctx.read_csv(str(path), schema=MARKET_SCHEMAS[table], has_header=True)
            else:
                files = self.dataset.input_files(table, [day], scratch)
                nbytes += sum(f.stat().st_size for f in files)
                source = st.read_files(ctx, files)
            write_sorted(source, table, st.day_dir(store, table, day))
            st.fsync_path(store / table)
        return LoadFigures(rows=_count(store), input_bytes=nbytes,
                           detail={"durability": st.DURABILITY,
                                   "layout": f"day={day}/{st.PART_FILE} per table, sorted by (sym, ts)"})

    def _baseline_load_market(self, fmt: str, scratch: Path) -> LoadFigures:
        """DataFusion's simplest path: each file read (CSV with an inferred schema) and written as
        one Parquet file with the writer's defaults, unsorted, then fsynced."""
        scratch.mkdir(parents=True, exist_ok=True)
        ctx = SessionContext()
        nbytes = 0
        sources = []
        for table in MARKET_TABLES:
            if fmt == "csv":
                path = self.dataset.csv_file(table)
                nbytes += path.stat().st_size
                sources.append((ctx.read_csv(str(path)), scratch / f"market-{table}.parquet"))
            else:
                files = self.dataset.input_files(table, [self._market.D], scratch)
                nbytes += sum(f.stat().st_size for f in files)
                sources.append((st.read_files(ctx, files), scratch / f"market-{table}.parquet"))
        rows = st.write_baseline(sources, scratch)
        return LoadFigures(rows=rows, input_bytes=nbytes, detail={"durability": st.DURABILITY})

    def _storage_bytes_market(self) -> dict[str, int]:
        """The market store's files: the 20 days of quotes and trades, and the instruments."""
        # Parquet keeps its page index and statistics in each file's footer: all of it is data.
        return storage_figures("parquet_files", _bytes(self.market_store), 0, 0)
