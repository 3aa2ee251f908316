"""Apache DataFusion, in-process, over a Parquet store of its own in the run's working directory.

The store is DataFusion's own idiom: ``store/<table>/day=<date>/part-0.parquet``, one file per
(table, day) sorted by ``(sym, exchange, ts)``, written by DataFusion with the writer options
below and fsynced; each table is a listing table over its directory, registered with that sort
order declared. The query files run as written, with ``$name`` placeholders bound to the run's
parameters; results come back as Arrow.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import datafusion
import pyarrow as pa
from datafusion import DataFrame, SessionConfig, SessionContext, col
from datafusion.dataframe import DataFrameWriteOptions

from tickbench.datasets.paper.schema import SCHEMAS, TABLES
from tickbench.engines.base import (
    BulkLoad,
    Engine,
    LoadFigures,
    SharedReaders,
    Storage,
    StoreByKind,
    by_kind,
    storage_figures,
)
from tickbench.engines.datafusion.market import MARKET_SETTINGS, DataFusionMarket, register_market
from tickbench.engines.datafusion.store import (
    DURABILITY,
    PART_FILE,
    READ_SETTINGS,
    ROW_GROUP_ROWS,
    STRING_COLUMNS,
    day_dir,
    fsync_path,
    read_files,
    session,
    write_baseline,
    writer_options,
)

PARAM = re.compile(r"\$([a-z][a-z0-9_]*)")
SORT_KEY = ("sym", "exchange", "ts")
# Each instrument's venues per day, from the book file just written: O-NBBO takes S's venues on X
# from it instead of a DISTINCT over S's rows of the day, which grows with the day's length.
VENUES = "venues"
VENUES_SCHEMA = pa.schema([("sym", pa.string()), ("exchange", pa.string())])


def sort_exprs(names: tuple[str, ...] = SORT_KEY) -> list[Any]:
    return [col(name).sort(ascending=True, nulls_first=False) for name in names]


def register_store(ctx: SessionContext, store: Path) -> None:
    """Both tables of ``store`` as listing tables with their sort order declared (``day`` is the
    Hive partition column of the directories)."""
    for table in TABLES:
        # A table without a file in range (a book-only capture's trades) is an empty directory:
        # the listing table then has no files, and its queries answer nothing.
        (store / table).mkdir(parents=True, exist_ok=True)
        ctx.register_listing_table(table, f"{store / table}/", table_partition_cols=[("day", pa.string())],
                                   file_extension=".parquet", schema=SCHEMAS[table], file_sort_order=[sort_exprs()])
    (store / VENUES).mkdir(parents=True, exist_ok=True)
    ctx.register_listing_table(VENUES, f"{store / VENUES}/", table_partition_cols=[("day", pa.date32())],
                               file_extension=".parquet", schema=VENUES_SCHEMA)


def write_day(ctx: SessionContext, source: DataFrame, dest: Path, sort: tuple[str, ...] = SORT_KEY) -> None:
    """``source`` sorted by ``sort`` (the store's key) into ``dest/part-0.parquet``, fsynced
    (file, then the directories up to the table's)."""
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / PART_FILE
    target.unlink(missing_ok=True)
    source.sort(*sort_exprs(sort)).write_parquet_with_options(
        str(target), writer_options(), DataFrameWriteOptions(single_file_output=True))
    fsync_path(target)
    fsync_path(dest)
    fsync_path(dest.parent)


def write_venues(ctx: SessionContext, store: Path, day: str) -> None:
    """The (sym, exchange) pairs of ``day``'s book file into ``store/venues/day=<day>``, fsynced
    like the tables (nothing when the day has no book)."""
    book = day_dir(store, "book", day) / PART_FILE
    if book.exists():
        pairs = ctx.read_parquet(str(book)).select(col("sym"), col("exchange")).distinct()
        write_day(ctx, pairs.select(col("sym").cast(pa.string()).alias("sym"),
                                    col("exchange").cast(pa.string()).alias("exchange")),
                  day_dir(store, VENUES, day), sort=("sym", "exchange"))


class Adapter(StoreByKind, Engine, BulkLoad, Storage, SharedReaders, DataFusionMarket):
    ctx: SessionContext | None = None

    @classmethod
    def probe(cls) -> str:
        """The DataFusion the bindings embed (its Parquet writer's default ``created_by`` names
        it), then the bindings' own version."""
        rows = SessionContext(SessionConfig().with_information_schema(True)).sql(
            "SELECT value FROM information_schema.df_settings "
            "WHERE name = 'datafusion.execution.parquet.created_by'").to_pylist()
        core = str(rows[0]["value"]).removeprefix("datafusion version ") if rows else "?"
        return f"{core} (datafusion-python {datafusion.__version__})"

    @property
    def store(self) -> Path:
        return self.workdir / "store"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ctx = self._open()

    def _open(self) -> SessionContext:
        """A session with the store's tables registered (a listing table lists its files when
        it is registered, and the session's runtime caches that listing)."""
        def paper() -> SessionContext:
            ctx = session()
            register_store(ctx, self.store)
            return ctx

        def market() -> SessionContext:  # the market suite's session settings and tables (market.py)
            ctx = session(MARKET_SETTINGS)
            register_market(ctx, self.market_store)
            return ctx

        return by_kind(self.dataset, paper=paper, market=market)()

    def start_shared(self) -> None:
        """Concurrency clients are processes, each registering the same files: the store is
        only read, and a file read by several processes needs no lock."""
        self.start()

    def stop(self) -> None:
        self.ctx = None

    def _ctx(self) -> SessionContext:
        if self.ctx is None:
            raise RuntimeError("DataFusion is not started")
        return self.ctx

    def _write_store(self, store: Path, days: list[str]) -> int:
        """Write ``days`` of both tables from the dataset's Parquet into ``store``; return rows."""
        ctx = session()
        for table in TABLES:
            for day in days:
                files = self.dataset.files(table, [day])
                if files:
                    write_day(ctx, read_files(ctx, files), day_dir(store, table, day))
            fsync_path(store / table)
        for day in days:
            write_venues(ctx, store, day)
        (store / VENUES).mkdir(exist_ok=True)
        fsync_path(store / VENUES)
        return _count_rows(store)

    def _load_paper(self) -> int:
        self._ctx()
        rows = self._write_store(self.store, self.params.load_days())
        self.ctx = self._open()  # a fresh session lists the files just written
        return rows

    def _bound(self, sql: str) -> dict[str, Any]:
        binds = self.params.bindings()
        return {name: binds[name] for name in set(PARAM.findall(sql))}

    def run_query(self, qid: str) -> pa.Table:
        sql = self.query_text(qid)
        return self._ctx().sql(sql, param_values=self._bound(sql)).to_arrow_table()

    def explain(self, qid: str) -> str:
        """``EXPLAIN ANALYZE``: the physical plan with each operator's rows and time and, for
        each Parquet scan, the files, row groups and page rows left after pruning by statistics,
        the bytes it read and the files it opened (see :func:`plan_text`)."""
        sql = self.query_text(qid)
        plan = self._ctx().sql("EXPLAIN ANALYZE " + sql, param_values=self._bound(sql)).to_arrow_table()
        return plan_text("\n".join(str(v) for v in plan.column("plan").to_pylist()))

    def _fresh(self, scratch: Path) -> Path:
        store = scratch / "store"
        if store.exists():
            for table in (*TABLES, VENUES):
                for part in sorted((store / table).glob("day=*/" + PART_FILE)):
                    part.unlink()
        store.mkdir(parents=True, exist_ok=True)
        return store

    def _bulk_load_paper(self, fmt: str, scratch: Path) -> LoadFigures:
        store = self._fresh(scratch)
        ctx = session()
        day = self.dataset.bulk_day
        nbytes = 0
        for table in TABLES:
            if fmt == "csv":
                path = self.dataset.csv_file(table)
                nbytes += path.stat().st_size
                # The CSV read with the table's own column types (no inference).
                source = ctx.read_csv(str(path), schema=SCHEMAS[table], has_header=True)
            else:
                # an empty Parquet file of the schema when the day has none of the table's rows
                files = self.dataset.input_files(table, [day], scratch)
                nbytes += sum(f.stat().st_size for f in files)
                source = read_files(ctx, files)
            write_day(ctx, source, day_dir(store, table, day))
            fsync_path(store / table)
        write_venues(ctx, store, day)  # the store the queries run on has it
        (store / VENUES).mkdir(exist_ok=True)
        fsync_path(store / VENUES)
        return LoadFigures(rows=_count_rows(store), input_bytes=nbytes,
                           detail={"durability": DURABILITY,
                                   "layout": f"day={day}/{PART_FILE} per table, sorted by ({', '.join(SORT_KEY)})"})

    def _baseline_load_paper(self, fmt: str, scratch: Path) -> LoadFigures:
        """DataFusion's simplest path: each file read with an inferred schema and written as one
        Parquet file with the writer's defaults, unsorted, then fsynced."""
        scratch.mkdir(parents=True, exist_ok=True)
        ctx = SessionContext()
        nbytes = 0
        sources = []
        for table in TABLES:
            if fmt == "csv":
                path = self.dataset.csv_file(table)
                nbytes += path.stat().st_size
                sources.append((ctx.read_csv(str(path)), scratch / f"{table}.parquet"))
            else:
                files = self.dataset.input_files(table, [self.dataset.bulk_day], scratch)
                nbytes += sum(f.stat().st_size for f in files)
                sources.append((read_files(ctx, files), scratch / f"{table}.parquet"))
        rows = write_baseline(sources, scratch)
        return LoadFigures(rows=rows, input_bytes=nbytes, detail={"durability": DURABILITY})

    def _storage_bytes_paper(self) -> dict[str, int]:
        """The loaded store's files of the 30-day period (its day=<date> directories, the venues
        table's included)."""
        total = 0
        for table in (*TABLES, VENUES):
            for day in self.params.days("month"):
                total += sum(f.stat().st_size for f in day_dir(self.store, table, day).glob("*.parquet"))
        # Parquet keeps its page index and statistics in each file's footer: all of it is data.
        return storage_figures("parquet_files", total, 0, 0)

    def settings(self) -> dict[str, Any]:
        ctx = self._ctx()
        keys = [*READ_SETTINGS, *MARKET_SETTINGS, "datafusion.execution.target_partitions",
                "datafusion.execution.batch_size", "datafusion.runtime.memory_limit",
                "datafusion.runtime.metadata_cache_limit"]
        rows = ctx.sql("SELECT name, value FROM information_schema.df_settings").to_pylist()
        out: dict[str, Any] = {r["name"]: r["value"] for r in rows if r["name"] in keys}
        out["sort_key"] = f"({', '.join(SORT_KEY)})"
        out["writer"] = (f"zstd(3), max_row_group_size {ROW_GROUP_ROWS}, statistics per page (page index), "
                         f"dictionary on {', '.join(STRING_COLUMNS)} only")
        return out


def _count_rows(store: Path) -> int:
    """Rows of both tables in ``store``, read back through a fresh listing of it."""
    ctx = session()
    register_store(ctx, store)
    return sum(ctx.table(t).count() for t in TABLES)


# The metrics plan_text keeps: rows and time of every operator; for a Parquet scan, what pruning
# left (files, row groups, page-index rows), the bytes read and the files opened.
PLAN_METRICS = ("output_rows", "elapsed_compute", "files_ranges_pruned_statistics", "row_groups_pruned_statistics",
                "page_index_rows_pruned", "bytes_scanned", "files_opened", "spilled_bytes")
_FILE_GROUPS = re.compile(r"file_groups=\{(\d+) groups?: \[\[.*?\]\]\}, ")
_PRUNING = re.compile(r", pruning_predicate=.*?(?=, required_guarantees=|, metrics=\[)")
_METRICS = re.compile(r", metrics=\[(.*)\]$")


def plan_text(raw: str, width: int = 300) -> str:
    """DataFusion's ``EXPLAIN ANALYZE`` (indent format) made readable: the scans' file lists
    and derived pruning predicates left out, each operator's text clipped to ``width``
    characters, and of its metrics only :data:`PLAN_METRICS`, on a line of their own."""
    out: list[str] = []
    for line in raw.splitlines():
        pad = line[: len(line) - len(line.lstrip())]
        text = _PRUNING.sub("", _FILE_GROUPS.sub(r"file_groups=\1, ", line.strip()))
        metrics = ""
        if found := _METRICS.search(text):
            text = text[: found.start()]
            kept = [m for m in found.group(1).split(", ") if m.split("=", 1)[0] in PLAN_METRICS]
            metrics = ", ".join(kept)
        out.append(pad + (text if len(text) <= width else text[: width - 1] + "…"))
        if metrics:
            out.append(pad + "    " + metrics)
    return "\n".join(out)
