"""DataFusion's Parquet store, shared by the published suite's adapter and the market mixin: the
writer's and the reader's settings, the day directories, fsync, and the plain baseline write."""

from __future__ import annotations

import datetime as dt
import functools
import os
from pathlib import Path

import datafusion
from datafusion import DataFrame, SessionConfig, SessionContext
from datafusion.dataframe import ParquetColumnOptions, ParquetWriterOptions

PART_FILE = "part-0.parquet"
# Rows per row group: at SF 1 a day's book holds about 1.1 M rows, so a row group is a few hours
# of one instrument; the page index (statistics per data page of at most 20,000 rows) narrows a
# point lookup inside it.
ROW_GROUP_ROWS = 131_072
PAGE_ROWS = 20_000  # the writer's default
STRING_COLUMNS = ("exchange", "sym", "side")
# Reading: filters evaluated inside the Parquet decoder (late materialization: ts and sym first,
# the other columns only for the rows that pass), cheapest first; statistics and the page index
# on (DataFusion's defaults, stated); the declared sort order used to avoid re-sorting; joins
# kept in the order the query writes them (O-T's and O-NBBO's fallbacks rely on their build side
# being the missed probes: an empty build side leaves the month's scan unopened).
READ_SETTINGS = {
    "datafusion.execution.parquet.pushdown_filters": "true",
    "datafusion.execution.parquet.reorder_filters": "true",
    "datafusion.execution.parquet.enable_page_index": "true",
    "datafusion.execution.parquet.pruning": "true",
    "datafusion.execution.collect_statistics": "true",
    "datafusion.optimizer.prefer_existing_sort": "true",
    "datafusion.optimizer.join_reordering": "false",
}
DURABILITY = "every Parquet file written, then fsynced with its directories, before the clock stops"


def writer_options(page_rows: int = PAGE_ROWS) -> ParquetWriterOptions:
    """zstd(3), statistics and the page index per page of at most ``page_rows`` rows,
    dictionaries for the strings only (on the unique timestamps and prices they cost a third
    more space than plain pages)."""
    strings = {name: ParquetColumnOptions(dictionary_enabled=True) for name in STRING_COLUMNS}
    return ParquetWriterOptions(
        compression="zstd(3)",
        statistics_enabled="page",
        max_row_group_size=ROW_GROUP_ROWS,
        data_page_row_count_limit=page_rows,
        write_batch_size=min(page_rows, 1024),  # the row limit is checked once per written batch
        dictionary_enabled=False,
        column_specific_options=strings,
        created_by=f"datafusion-python {datafusion.__version__} (tickbench)",
    )


def session(extra: dict[str, str] | None = None) -> SessionContext:
    """A session with the read settings above, then ``extra`` (the market suite's own)."""
    config = SessionConfig().with_information_schema(True)
    for key, value in {**READ_SETTINGS, **(extra or {})}.items():
        config = config.set(key, value)
    return SessionContext(config)


def day_dir(store: Path, table: str, day: str) -> Path:
    """``store/<table>/day=<day>``; ``day`` must be an ISO date (it comes from the dataset)."""
    return store / table / f"day={dt.date.fromisoformat(day).isoformat()}"


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_files(ctx: SessionContext, files: list[Path]) -> DataFrame:
    """Parquet files (a table's, of the dataset) as one frame."""
    frames = [ctx.read_parquet(str(f)) for f in files]
    return functools.reduce(lambda a, b: a.union(b), frames)


def write_baseline(sources: list[tuple[DataFrame, Path]], scratch: Path) -> int:
    """DataFusion's simplest write: each source as one Parquet file with the writer's defaults,
    unsorted, fsynced with ``scratch``; the rows written."""
    for source, target in sources:
        target.unlink(missing_ok=True)
        source.write_parquet(str(target))
        fsync_path(target)
    fsync_path(scratch)
    return sum(SessionContext().read_parquet(str(t)).count() for _, t in sources)
