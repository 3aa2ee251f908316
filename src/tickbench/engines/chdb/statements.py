"""chDB's own statements and settings (loads, W, SE, memory, fsync), how file() names a list of
input files and how query parameters are written: shared by the adapter (the published suite,
ingest) and its market mixin."""

from __future__ import annotations

import datetime as dt
import os
import re
import tempfile
from pathlib import Path
from typing import Any

DB = "tickbench"
PARAM = re.compile(r"\{([a-z_][a-z0-9_]*):")
GLOB_CHARS = set("{},*?[]")
# The session's startup arguments besides the config file: session_timezone=UTC, as chDB
# ignores the config's <timezone> and the baseline's inferred DateTime64 has no zone;
# extended results, so time buckets are DateTime64 (ClickHouse's Arrow output writes a
# DateTime as a bare UInt32, which no client reads as a time).
STARTUP = "session_timezone=UTC&enable_extended_results_for_datetime_functions=1"
FORMATS = {"csv": "CSVWithNames", "parquet": "Parquet"}

# The adapter's own statements (loads, SE, memory); the benchmark queries are in queries/.
CREATE_DB = "CREATE DATABASE IF NOT EXISTS {db:Identifier}"
USE_DB = "USE {db:Identifier}"  # the query files name their tables without a database
DROP_TABLE = "DROP TABLE IF EXISTS {db:Identifier}.{table:Identifier} SYNC"
# Not SYNC: an Atomic database drops at once and deletes its files in the background, so
# clearing the previous W store costs the next load almost nothing.
DROP_DB = "DROP DATABASE IF EXISTS {db:Identifier}"
# SYNC: an ingest store's database made again under the same name must not meet its old files.
DROP_DB_SYNC = "DROP DATABASE IF EXISTS {db:Identifier} SYNC"
# The insertion table's structure is used for file() (no schema inference, no casts), and
# CSVWithNames matches columns by the header's names.
INSERT = "INSERT INTO {db:Identifier}.{table:Identifier} SELECT * FROM file({path:String}, {fmt:Identifier})"
# tickbench's loads insert a day at a time, its blocks squashed into one of up to 2 GiB (the
# defaults, about 1 M rows or 256 MiB, cut a day of the book at SF 1 into three blocks, and each
# block writes its own part of every partition it touches): one part per daily partition, so
# every read's index analysis and part setup covers 31 parts, not a hundred, and no merge has
# to rewrite the store after the load (README, Load).
INSERT_DAY = INSERT + (" SETTINGS min_insert_block_size_rows = 1000000000, "
                       "min_insert_block_size_bytes = 2147483648")
# The baseline: a table shaped by ClickHouse's own inference from the file, default settings.
BASELINE_CREATE = (
    "CREATE TABLE {db:Identifier}.{table:Identifier} ENGINE = MergeTree ORDER BY tuple() "
    "EMPTY AS SELECT * FROM file({path:String}, {fmt:Identifier})"
)
COUNT = "SELECT count() FROM {db:Identifier}.{table:Identifier}"
# The lookup structures beside a part's columns: its primary index, its marks and its skip indexes.
PART_INDEX_BYTES = ("sum(primary_key_size + marks_bytes + secondary_indices_compressed_bytes "
                    "+ secondary_indices_marks_bytes)")
PARTS = (
    f"SELECT sum(bytes_on_disk), count(), {PART_INDEX_BYTES} FROM system.parts "
    "WHERE active AND database = {db:String} AND partition_id IN {partitions:Array(String)}"
)
DB_PARTS = "SELECT sum(bytes_on_disk), count() FROM system.parts WHERE active AND database = {db:String}"
MERGES = "SELECT count() FROM system.merges WHERE database = {db:String}"
# A day larger than one squashed block leaves several parts in its partition: merged after the
# load, that partition alone (an OPTIMIZE … FINAL of the table would rewrite every part).
SPLIT_DAYS = ("SELECT partition_id FROM system.parts WHERE active AND database = {db:String} "
              "AND table = {table:String} GROUP BY partition_id HAVING count() > 1 ORDER BY partition_id")
OPTIMIZE_DAY = "OPTIMIZE TABLE {db:Identifier}.{table:Identifier} PARTITION ID {partition:String} FINAL"
FLUSH_LOG = "SYSTEM FLUSH LOGS query_log"
# query_log's memory_usage is the query's peak tracked memory, and its start and finish times
# (µs) its duration (ClickHouse's own figures); its profile events count what every read of the
# query selected, scalar subqueries included (which EXPLAIN does not show: they run before the
# plan is built, their results folded in as constants). The row is found as the latest finished
# SELECT: chDB logs the query text with its parameters substituted and reformatted (so the text
# cannot be matched), and sets no query_id we can read.
QUERY_MEMORY = (
    "SELECT memory_usage, toUnixTimestamp64Micro(event_time_microseconds) "
    "- toUnixTimestamp64Micro(query_start_time_microseconds) AS duration_us, "
    "ProfileEvents['SelectedParts'] AS parts, ProfileEvents['SelectedPartsTotal'] AS parts_total, "
    "ProfileEvents['SelectedMarks'] AS marks, ProfileEvents['SelectedMarksTotal'] AS marks_total, "
    "read_rows, read_bytes "
    "FROM system.query_log WHERE type = 'QueryFinish' AND is_initial_query "
    "AND query_kind = 'Select' AND NOT has(tables, 'system.query_log') "
    "ORDER BY event_time_microseconds DESC LIMIT 1"
)
SETTINGS = (
    "SELECT name, value FROM system.settings WHERE name IN "
    "('max_threads', 'max_memory_usage', 'max_insert_threads', 'input_format_parallel_parsing', "
    "'session_timezone', 'join_algorithm', 'enable_extended_results_for_datetime_functions')"
)

# W (both paths) under ClickHouse's durable MergeTree settings, as the "fsync" ingest setting.
W_DURABILITY = ("fsync_after_insert=1, fsync_part_directory=1 on the MergeTree tables: each INSERT's part "
                "files and directory fsynced before it returns")

SET_FSYNC = ("ALTER TABLE {db:Identifier}.{table:Identifier} MODIFY SETTING "
             "fsync_after_insert = {on:UInt8}, fsync_part_directory = {on:UInt8}")


def file_glob(files: list[Path], links: Path) -> str:
    """One ``file()`` path naming exactly ``files``: their common directory, then a ``{a,b,…}``
    alternation of the relative paths (ClickHouse's file() takes one path, with globs). A path
    holding a glob character (a dataset under ``/data/run[1]``) has no escape there, so the
    files are then read through symbolic links of plain names in a new directory under
    ``links`` (the engine's own)."""
    if not files:
        raise ValueError("no input files")
    if any(set(str(f)) & GLOB_CHARS for f in files):
        links.mkdir(parents=True, exist_ok=True)
        plain = Path(tempfile.mkdtemp(prefix="inputs-", dir=links))
        if set(str(plain)) & GLOB_CHARS:
            raise ValueError(f"a file() path cannot contain glob characters: {plain}")
        named = []
        for i, f in enumerate(files):
            named.append(plain / f"{i:06d}{''.join(f.suffixes)}")
            named[-1].symlink_to(f.resolve())
        files = named
    if len(files) == 1:
        return str(files[0])
    root = Path(os.path.commonpath(files))
    return f"{root}/{{{','.join(str(f.relative_to(root)) for f in files)}}}"


def query_params(sql: str, bindings: dict[str, Any]) -> dict[str, Any]:
    """The bindings that ``sql`` names as ClickHouse query parameters (``{name:Type}``)."""
    return {name: bindings[name] for name in set(PARAM.findall(sql))}


def param_text(value: Any) -> str:
    """A query parameter as the text ClickHouse parses for its declared type: chDB passes
    values as text and writes neither datetimes nor lists the way ClickHouse reads them.
    Datetimes (naive UTC) become ``YYYY-MM-DD hh:mm:ss.ffffff``, lists ``['…', …]``, and a
    string is escaped as ClickHouse's escaped text format wants (backslash, tab, newline).
    Integers in a list stay bare (an ``Array(Int64)`` does not read quoted numbers)."""
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="microseconds")
    if isinstance(value, list):
        return "[" + ", ".join(str(v) if isinstance(v, int) and not isinstance(v, bool)
                               else "'" + param_text(v).replace("'", "\\'") + "'" for v in value) + "]"
    return str(value).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
