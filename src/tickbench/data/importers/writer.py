"""Write imported rows as a tickbench dataset: checked, partitioned, hashed, with a manifest.

The :class:`DatasetBuilder` receives batches of rows already in SPEC §1's column layout (plus
``_row``, the row's index in its input file, for messages), checks them with the same checks as
:mod:`tickbench.datasets.paper.validate`, applies the policy (``fail``: stop at the first bad row, naming
it; ``drop``: drop it and count it per reason) and appends the kept rows to one Parquet file per
(table, day, exchange, sym) partition through a :class:`pyarrow.parquet.ParquetWriter`, a row
group at a time. Memory stays bounded by ``memory_limit``: rows are buffered only until a row
group is full or the buffers together reach their share of the limit. The partition layout,
per-partition hash, CSV size and manifest are those of generated data (``dataset.py``).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from tickbench.data.dataset import DatasetError, csv_options, csv_path, csv_size, inside, needs_quoting, partition_path
from tickbench.data.violations import MISSING_VALUE, Violation, hash_parquet
from tickbench.datasets.paper.schema import SCHEMAS, TABLES
from tickbench.datasets.paper.validate import ROW_REASON, StreamState, flagged, order_reasons, row_values

NS_PER_DAY = 86_400 * 1_000_000_000
POLICIES = ("fail", "drop")
ROW_COL = "_row"
BAD_COL = "_bad"  # a reader's own verdict on a row (see importers.common.BAD_COL)


class ImportFailure(DatasetError):
    """An input row breaks an invariant under ``--policy fail``; nothing is written."""

    def __init__(self, violation: Violation, hint: str = "") -> None:
        self.violation = violation
        super().__init__(
            f"{violation.describe()}; nothing was written (use --policy drop to drop and count "
            f"such rows){hint}"
        )


@dataclass
class _Partition:
    """One open output partition: its writer and what the manifest needs about it."""

    table: str
    day: dt.date
    exchange: str
    sym: str
    path: Path
    writer: pq.ParquetWriter | None = None
    buffer: list[pa.Table] = field(default_factory=list)
    buffered: int = 0  # bytes
    buffered_rows: int = 0
    rows: int = 0
    csv_bytes: int = 0


def _header_bytes(table: str) -> int:
    return csv_size(SCHEMAS[table].empty_table())


class DatasetBuilder:
    """Collects checked rows into partition files under ``stage``; see the module docstring."""

    def __init__(self, stage: Path, policy: str, memory_limit: int, hint: Callable[[Violation], str] | None = None):
        if policy not in POLICIES:
            raise DatasetError(f"--policy {policy}: must be one of {', '.join(POLICIES)}")
        self.stage = stage
        self.policy = policy
        self.budget = max(memory_limit // 4, 1 << 20)  # bytes of buffered output rows
        self.row_group_bytes = max(self.budget // 2, 1 << 19)
        self.hint = hint
        self.states: dict[tuple[str, str, str], StreamState] = {}
        self.open: dict[tuple[str, str, str], _Partition] = {}  # (table, exchange, sym) -> its current day
        self.entries: list[dict[str, Any]] = []
        self.dropped: Counter[str] = Counter()
        self.rows_in: Counter[str] = Counter()
        self.buffered = 0
        self.headers = {t: _header_bytes(t) for t in TABLES}
        self.names: dict[str, tuple[str, str]] = {}  # partition path -> its (exchange, sym)

    def add(self, table: str, df: pl.DataFrame, source: str) -> None:
        """Check ``df`` (SPEC columns of ``table`` plus ``_row``) and queue its kept rows."""
        if df.height == 0:
            return
        self.rows_in[table] += df.height
        reason = ROW_REASON[table]()
        if BAD_COL in df.columns:  # the reader's verdict first: it saw the value before conversion
            reason = pl.coalesce(pl.col(BAD_COL), reason)
        df = df.with_columns(_reason=reason)
        if BAD_COL in df.columns:
            df = df.drop(BAD_COL)
        for (exchange, sym), part in df.partition_by(["exchange", "sym"], maintain_order=True, as_dict=True).items():
            key = (table, str(exchange), str(sym))
            state = self.states.setdefault(key, StreamState())
            ts = part["ts"].cast(pl.Int64).fill_null(0).to_numpy()
            local = part["_reason"].to_numpy()
            ids = part["trade_id"].fill_null(0).to_numpy() if table == "trades" else None
            ok = ~flagged(local)
            ordered = order_reasons(ts, ok, state, unique_ts=table == "book", ids=ids)
            reasons = np.where(ok, ordered, local)
            bad = flagged(reasons)
            if bad.any():
                if self.policy == "fail":
                    i = int(np.flatnonzero(bad)[0])
                    row = part.row(i, named=True)
                    v = Violation(source, int(row[ROW_COL]), str(reasons[i]), row_values(table, row, str(reasons[i])))
                    raise ImportFailure(v, self.hint(v) if self.hint else "")
                self.dropped.update(str(r) for r in reasons[bad])
                part = part.filter(pl.Series(~bad))
            if part.height and exchange is not None and sym is not None:
                self._queue(key, part.drop("_reason", ROW_COL))

    def _queue(self, key: tuple[str, str, str], rows: pl.DataFrame) -> None:
        days = (rows["ts"].cast(pl.Int64) // NS_PER_DAY).to_numpy()
        bounds = np.flatnonzero(np.diff(days)) + 1  # rows are time-ordered: days only advance
        for lo, hi in zip(np.concatenate(([0], bounds)), np.concatenate((bounds, [len(days)])), strict=True):
            day = dt.date(1970, 1, 1) + dt.timedelta(days=int(days[lo]))
            part = self.open.get(key)
            if part is None or part.day != day:
                if part is not None:
                    self._close(part)
                table, exchange, sym = key
                rel = partition_path(table, day, exchange, sym)
                if self.names.setdefault(rel, (exchange, sym)) != (exchange, sym):
                    raise DatasetError(f"{rel}: the names ({exchange!r}, {sym!r}) and {self.names[rel]!r} map to "
                                       "one file name (a 64-bit hash collision); rename one of them in the input")
                part = _Partition(table, day, exchange, sym, inside(self.stage, rel))
                if part.path.exists():
                    raise DatasetError(f"{rel}: rows of this partition arrive twice (input files of one "
                                       "stream overlap in time or are not in time order)")
                self.open[key] = part
            chunk = rows.slice(int(lo), int(hi - lo)).to_arrow().cast(SCHEMAS[key[0]])
            part.buffer.append(chunk)
            part.buffered += chunk.nbytes
            part.buffered_rows += chunk.num_rows
            self.buffered += chunk.nbytes
            if part.buffered >= self.row_group_bytes:
                self._flush(part)
        if self.buffered > self.budget:
            for p in sorted(self.open.values(), key=lambda p: -p.buffered):
                self._flush(p)
                if self.buffered <= self.budget // 2:
                    break

    def _flush(self, part: _Partition) -> None:
        if not part.buffer:
            return
        t = pa.concat_tables(part.buffer)
        if part.writer is None:
            part.path.parent.mkdir(parents=True, exist_ok=True)
            part.writer = pq.ParquetWriter(part.path, SCHEMAS[part.table], compression="zstd",
                                           use_dictionary=[c for c in ("exchange", "sym", "side")
                                                           if c in SCHEMAS[part.table].names])
        part.writer.write_table(t)
        part.csv_bytes += csv_size(t) - (self.headers[part.table] if part.rows else 0)
        part.rows += t.num_rows
        self.buffered -= part.buffered
        part.buffer, part.buffered, part.buffered_rows = [], 0, 0

    def _close(self, part: _Partition) -> None:
        self._flush(part)
        if part.writer is None:
            return
        part.writer.close()
        rel = str(part.path.relative_to(self.stage))
        self.entries.append({
            "table": part.table, "day": part.day.isoformat(), "exchange": part.exchange, "sym": part.sym,
            "path": rel, "rows": part.rows, "bytes": part.path.stat().st_size,
            "csv_bytes": part.csv_bytes, "hash": hash_parquet(part.path, SCHEMAS[part.table]),
        })

    def finish(self) -> list[dict[str, Any]]:
        """Close every partition; returns the manifest's partition entries, sorted by path."""
        for part in list(self.open.values()):
            self._close(part)
        self.open.clear()
        if not self.entries:
            raise DatasetError("no rows were imported (empty input, or every row was dropped)")
        return sorted(self.entries, key=lambda e: e["path"])


def missing_id_hint(v: Violation) -> str:
    """The fix to suggest when a trade has no integer id."""
    if v.reason == MISSING_VALUE and v.values.get("trade_id") is None:
        return "; trade ids that are not integers (GUIDs, empty): use --trade-ids sequence"
    return ""


def write_bulk_csv(stage: Path, table: str, day: str, entries: list[dict[str, Any]], batch_rows: int) -> dict[str, Any]:
    """The bulk-load day of ``table`` as one CSV in time order, merged from its partitions a
    batch at a time (the same rows and order as a stable sort of the partitions concatenated in
    path order, as ``generate`` writes it, without holding the day in memory); the header
    alone when the day has none of ``table``'s rows (a book-only capture's trades)."""
    rel = csv_path(table, dt.date.fromisoformat(day))
    dest = inside(stage, rel)
    dest.parent.mkdir(parents=True, exist_ok=True)
    day_entries = [e for e in entries if e["table"] == table and e["day"] == day]
    files = [inside(stage, e["path"]) for e in day_entries]
    iters = [_row_groups(f, max(batch_rows // max(len(files), 1), 1024)) for f in files]
    bufs: list[pa.Table | None] = [None] * len(files)
    done = [False] * len(files)
    schema = SCHEMAS[table]
    rows = 0
    # Quoted fields only where a name needs them (a comma, a quote): otherwise the CSV is as ever.
    quoted = needs_quoting(n for e in day_entries for n in (e["exchange"], e["sym"]))
    with pacsv.CSVWriter(dest, schema, write_options=csv_options(quoted)) as out:

        def refill(i: int) -> None:
            nxt = next(iters[i], None)
            if nxt is None:
                done[i] = True
                return
            t = nxt.cast(schema)
            cur = bufs[i]
            bufs[i] = t if cur is None else pa.concat_tables([cur, t])

        for i in range(len(files)):
            refill(i)
        while True:
            live = [i for i in range(len(files)) if not done[i]]
            if not live:
                bound = None
            else:
                lasts = {i: _last_ts(bufs[i]) for i in live}
                bound = min(lasts.values())
            parts = []
            for i, b in enumerate(bufs):
                if b is None or b.num_rows == 0:
                    continue
                tsv = b.column("ts").cast(pa.int64()).to_numpy()
                n = len(tsv) if bound is None else int(np.searchsorted(tsv, bound, side="left"))
                if n:
                    parts.append(b.slice(0, n))
                    bufs[i] = b.slice(n)
            if parts:
                t = pa.concat_tables(parts).sort_by("ts")  # stable: ties keep path order
                out.write_table(t)
                rows += t.num_rows
            if bound is None:
                break
            for i in live:
                if lasts[i] == bound:
                    refill(i)
    return {"path": rel, "rows": rows, "bytes": dest.stat().st_size}


def _row_groups(path: Path, rows: int) -> Iterator[pa.Table]:
    """A Parquet file's rows, one row group at a time, in slices of ``rows``. Not
    ``iter_batches``: it reads ahead several row groups (70 MB of Arrow memory for 6 MB
    row groups, measured), which defeats the memory limit."""
    pf = pq.ParquetFile(path)
    for g in range(pf.num_row_groups):
        t = pf.read_row_group(g, use_threads=False)
        for start in range(0, t.num_rows, rows):
            yield t.slice(start, rows)


def _last_ts(t: pa.Table | None) -> int:
    if t is None or t.num_rows == 0:
        return np.iinfo(np.int64).min
    return int(t.column("ts")[t.num_rows - 1].cast(pa.int64()).as_py())
