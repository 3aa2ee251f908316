"""Check a paper dataset against the invariants of SPEC §1, and the row checks the importers share.

The invariants every dataset must satisfy (generated or imported):

* book: every price and size present and finite (20 levels per side), every size > 0, every
  price > 0, bids strictly decreasing, asks strictly increasing, ``b1price < a1price``, rows
  time-ordered per (exchange, sym), snapshot ``ts`` unique per (exchange, sym);
* trades: every value present, ``price > 0``, ``amount > 0``, ``side`` in ``buy``/``sell``,
  rows time-ordered per (exchange, sym), ``trade_id`` unique per (exchange, sym);
* names: ``exchange`` and ``sym`` of 1 to 64 bytes of UTF-8 without control characters
  (:func:`tickbench.data.dataset.name_problem`);
* layout: every row lies in its partition (its day, exchange and sym).

The row-local checks are Polars expressions (:func:`book_reason`, :func:`trades_reason`); the
order checks work on one (exchange, sym) stream in row order and carry their state from one
batch to the next (:func:`order_reasons`), so a partition is read a row group at a time and a
file larger than memory can be checked. The generator's stronger guarantees (tick grid, trades at
the touch) are checked by its own tests, not here: SPEC §1 asks them of generated data only.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow.parquet as pq
from pyarrow import ArrowException

from tickbench.data.dataset import (
    MAX_NAME_BYTES,
    DatasetError,
    Manifest,
    check_rows,
    combine_hashes,
    inside,
)
from tickbench.data.violations import (
    AMOUNT_NOT_POSITIVE,
    BACKWARDS,
    BAD_SIDE,
    BATCH_ROWS,
    DEFAULT_SAMPLES,
    HASH_MISMATCH,
    ID_NOT_INCREASING,
    MISSING_VALUE,
    OUTSIDE_PARTITION,
    SIZE_NOT_POSITIVE,
    ValidationReport,
    Violation,
    hash_parquet,
)
from tickbench.datasets.paper.schema import LEVELS, SCHEMAS

NS_PER_DAY = 86_400 * 1_000_000_000

MISSING_LEVEL = "missing or non-finite level (book shallower than 20 levels?)"
BIDS_UNSORTED = "bids not strictly decreasing"
ASKS_UNSORTED = "asks not strictly increasing"
CROSSED = "crossed book (b1price >= a1price)"
PRICE_NOT_POSITIVE = "price not > 0"
BAD_NAME = f"exchange or sym not a usable name (at most {MAX_NAME_BYTES} bytes of UTF-8, no control character)"
TS_OUT_OF_RANGE = "timestamp outside int64 nanoseconds (1677-09-21 to 2262-04-11)"
DUPLICATE_TS = "duplicate snapshot ts"
DUPLICATE_ID = "duplicate trade_id"


def _bid_price(i: int) -> pl.Expr:
    return pl.col(f"b{i}price")


def _ask_price(i: int) -> pl.Expr:
    return pl.col(f"a{i}price")


def bad_names() -> pl.Expr:
    """True where ``exchange`` or ``sym`` is a name :func:`~tickbench.data.dataset.name_problem`
    refuses (null where one is missing: that is a missing value)."""
    return pl.any_horizontal([
        (pl.col(c).str.len_bytes() == 0) | (pl.col(c).str.len_bytes() > MAX_NAME_BYTES)
        | pl.col(c).str.contains(r"[\x00-\x1f\x7f-\x9f]")
        for c in ("exchange", "sym")
    ])


def book_reason() -> pl.Expr:
    """The first row-local invariant a book row breaks, or null: one reason per bad row, so
    counts per reason add up to the rows dropped."""
    levels = [pl.col(f"{s}{i}{k}") for s in "ba" for i in range(1, LEVELS + 1) for k in ("price", "size")]
    missing = pl.any_horizontal([(c.is_null() | ~c.is_finite()).fill_null(True) for c in levels])
    meta_missing = pl.any_horizontal([pl.col(c).is_null() for c in ("ts", "exchange", "sym")])
    sizes = pl.any_horizontal([pl.col(f"{s}{i}size") <= 0 for s in "ba" for i in range(1, LEVELS + 1)])
    prices = pl.any_horizontal([pl.col(f"{s}{i}price") <= 0 for s in "ba" for i in range(1, LEVELS + 1)])
    bids = pl.any_horizontal([_bid_price(i + 1) >= _bid_price(i) for i in range(1, LEVELS)])
    asks = pl.any_horizontal([_ask_price(i + 1) <= _ask_price(i) for i in range(1, LEVELS)])
    return (
        pl.when(meta_missing).then(pl.lit(MISSING_VALUE))
        .when(bad_names()).then(pl.lit(BAD_NAME))
        .when(missing).then(pl.lit(MISSING_LEVEL))
        .when(sizes).then(pl.lit(SIZE_NOT_POSITIVE))
        .when(prices).then(pl.lit(PRICE_NOT_POSITIVE))
        .when(bids).then(pl.lit(BIDS_UNSORTED))
        .when(asks).then(pl.lit(ASKS_UNSORTED))
        .when(_bid_price(1) >= _ask_price(1)).then(pl.lit(CROSSED))
        .otherwise(pl.lit(None, dtype=pl.String))
    )


def trades_reason() -> pl.Expr:
    """The first row-local invariant a trade row breaks, or null."""
    missing = pl.any_horizontal(
        [pl.col(c).is_null() for c in ("ts", "exchange", "sym", "side", "trade_id")]
        + [(pl.col(c).is_null() | ~pl.col(c).is_finite()).fill_null(True) for c in ("price", "amount")]
    )
    return (
        pl.when(missing).then(pl.lit(MISSING_VALUE))
        .when(bad_names()).then(pl.lit(BAD_NAME))
        .when(~pl.col("side").is_in(["buy", "sell"])).then(pl.lit(BAD_SIDE))
        .when(pl.col("price") <= 0).then(pl.lit(PRICE_NOT_POSITIVE))
        .when(pl.col("amount") <= 0).then(pl.lit(AMOUNT_NOT_POSITIVE))
        .otherwise(pl.lit(None, dtype=pl.String))
    )


ROW_REASON = {"book": book_reason, "trades": trades_reason}


@dataclass
class StreamState:
    """What the order checks of one (table, exchange, sym) stream remember between batches:
    the latest kept ``ts`` and (trades) the largest kept ``trade_id``."""

    last_ts: int | None = None
    last_id: int | None = None


def order_reasons(
    ts: np.ndarray, ok: np.ndarray, state: StreamState, unique_ts: bool, ids: np.ndarray | None = None
) -> np.ndarray:
    """Order checks of one stream's rows (in row order) that passed the row-local checks.

    A row goes *backwards* when its ``ts`` is below the latest ``ts`` kept before it, a book
    row is a *duplicate* when its ``ts`` equals it (the first of equal timestamps is kept), and
    with ``ids`` a trade whose ``trade_id`` is not above every kept one before it is *not
    increasing* (strictly increasing ids are unique: one number of state, whatever the size of
    the stream). Returns an object array of reasons (None = kept) and advances ``state`` past
    the kept rows, so the next batch continues where this one stopped.
    """
    out = np.full(len(ts), None, dtype=object)
    idx = np.flatnonzero(ok)
    if len(idx) == 0:
        return out
    t = ts[idx]
    start = np.iinfo(np.int64).min if state.last_ts is None else state.last_ts
    prev = np.maximum.accumulate(np.concatenate(([start], t[:-1])))
    back = t < prev
    dup = (t == prev) if unique_ts else np.zeros_like(back)  # prev starts at int64 min: never equal
    out[idx[back]] = BACKWARDS
    out[idx[dup & ~back]] = DUPLICATE_TS
    kept = idx[~back & ~dup]
    if len(kept):
        state.last_ts = int(max(start, ts[kept].max()))
    if ids is not None and len(kept):
        k = ids[kept]
        first = np.iinfo(np.int64).min if state.last_id is None else state.last_id
        prev_id = np.maximum.accumulate(np.concatenate(([first], k[:-1])))
        bad = k <= prev_id
        out[kept[bad]] = ID_NOT_INCREASING
        good = k[~bad]
        if len(good):
            state.last_id = int(max(first, good.max()))
    return out


def flagged(reasons: np.ndarray) -> np.ndarray:
    """True where an object array of reasons holds one (None and "" mean no reason)."""
    return np.asarray(reasons, dtype=bool)


def row_values(table: str, row: dict[str, Any], reason: str) -> dict[str, Any]:
    """The few values of ``row`` that show why it breaks ``reason``."""
    keys: list[str] = ["ts", "exchange", "sym"]
    if table == "trades":
        keys += ["side", "price", "amount", "trade_id"]
    elif reason == BIDS_UNSORTED:
        i = next((i for i in range(1, LEVELS) if not row[f"b{i + 1}price"] < row[f"b{i}price"]), 1)
        keys += [f"b{i}price", f"b{i + 1}price"]
    elif reason == ASKS_UNSORTED:
        i = next((i for i in range(1, LEVELS) if not row[f"a{i + 1}price"] > row[f"a{i}price"]), 1)
        keys += [f"a{i}price", f"a{i + 1}price"]
    elif reason in (SIZE_NOT_POSITIVE, MISSING_LEVEL, PRICE_NOT_POSITIVE):
        bad = [f"{s}{i}{k}" for s in "ba" for i in range(1, LEVELS + 1) for k in ("price", "size")
               if row[f"{s}{i}{k}"] is None or not np.isfinite(row[f"{s}{i}{k}"]) or row[f"{s}{i}{k}"] <= 0]
        keys += bad[:4]
    else:
        keys += ["b1price", "a1price"]
    return {k: _plain(row.get(k)) for k in keys if k in row}


def _plain(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return v.isoformat()
    return v


def _check_partition(root: Path, entry: dict[str, Any], report: ValidationReport) -> tuple[np.ndarray | None, str]:
    """Stream one partition file's row groups through the checks; returns the trade ids (to
    check uniqueness across days) and the partition's recomputed hash."""
    table, rel = entry["table"], entry["path"]
    path = inside(root, rel)
    try:
        pf = pq.ParquetFile(path)
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{path}: unreadable Parquet ({exc})") from exc
    if pf.schema_arrow.names != SCHEMAS[table].names:
        raise DatasetError(f"{path}: columns {pf.schema_arrow.names} are not the {table} schema of SPEC §1")
    day_start = (dt.date.fromisoformat(entry["day"]) - dt.date(1970, 1, 1)).days * NS_PER_DAY
    state = StreamState()
    ids: list[np.ndarray] = []
    offset = 0
    for batch in pf.iter_batches(batch_size=BATCH_ROWS):
        df = pl.from_arrow(batch)
        assert isinstance(df, pl.DataFrame)
        df = df.with_columns(_reason=ROW_REASON[table]())
        ts = df["ts"].cast(pl.Int64).fill_null(0).to_numpy()
        local = df["_reason"].to_numpy()
        ordered = order_reasons(ts, ~flagged(local), state, unique_ts=table == "book")
        outside = ((ts < day_start) | (ts >= day_start + NS_PER_DAY)
                   | (df["exchange"] != entry["exchange"]).fill_null(True).to_numpy()
                   | (df["sym"] != entry["sym"]).fill_null(True).to_numpy())
        for i in np.flatnonzero(flagged(local) | flagged(ordered) | outside):
            reason = local[i] or ordered[i] or OUTSIDE_PARTITION
            row = df.row(int(i), named=True)
            report.add(Violation(rel, offset + int(i), reason, row_values(table, row, reason)))
        if table == "trades":
            ids.append(df["trade_id"].fill_null(0).to_numpy())
        report.rows += df.height
        offset += df.height
    report.files += 1
    all_ids = np.concatenate(ids) if ids else None
    return all_ids, hash_parquet(path, SCHEMAS[table])


def _duplicate_ids(
    stream: list[tuple[dict[str, Any], np.ndarray]], report: ValidationReport
) -> None:
    """Report trade ids seen twice in one (exchange, sym) stream: within a file by sorting, across
    files only where their id ranges overlap (they do not in a well-formed dataset)."""
    seen: list[tuple[int, int, np.ndarray]] = []  # (min, max, sorted ids) of earlier files
    for entry, ids in stream:
        if len(ids) == 0:
            continue
        order = np.argsort(ids, kind="stable")
        s = ids[order]
        dup_rows = order[1:][s[1:] == s[:-1]]
        for lo, hi, prev in seen:
            if lo <= s[-1] and s[0] <= hi:
                pos = np.searchsorted(prev, ids)
                hit = (pos < len(prev)) & (prev[np.minimum(pos, len(prev) - 1)] == ids)
                dup_rows = np.union1d(dup_rows, np.flatnonzero(hit))
        for i in np.sort(dup_rows):
            report.add(Violation(entry["path"], int(i), DUPLICATE_ID, {"trade_id": int(ids[i])}))
        seen.append((int(s[0]), int(s[-1]), s))


def validate_paper(directory: Path, manifest: Manifest, max_samples: int = DEFAULT_SAMPLES) -> ValidationReport:
    """Check every partition of the paper dataset in ``directory`` (its manifest already read and
    checked: :func:`tickbench.datasets.base.validate`) against SPEC §1's invariants and its
    manifest's hashes. Raises :class:`DatasetError` when a file cannot be read; bad rows are
    reported, not raised."""
    report = ValidationReport(str(directory), max_samples=max_samples)
    streams: dict[tuple[str, str], list[tuple[dict[str, Any], np.ndarray]]] = {}
    hashes: dict[str, str] = {}
    for entry in sorted(manifest.partitions, key=lambda e: (e["table"], e["exchange"], e["sym"], e["day"])):
        if not inside(directory, entry["path"]).is_file():
            raise DatasetError(f"{directory}: missing {entry['path']} named in its manifest")
        try:
            ids, h = _check_partition(directory, entry, report)
        except (OSError, ValueError, ArrowException) as exc:  # garbage of a Parquet file's size, say
            raise DatasetError(f"{directory / entry['path']}: unreadable as Parquet of the {entry['table']} schema "
                               f"({' '.join(str(exc).split())[:200]}); the dataset was modified") from None
        hashes[entry["path"]] = h
        if h != entry["hash"]:
            report.add(Violation(entry["path"], -1, HASH_MISMATCH, {"manifest": entry["hash"], "rows": h}))
        else:  # the rows are the manifest's: an entry's row count other than theirs was edited in
            check_rows(inside(directory, entry["path"]), entry)
        if ids is not None:
            streams.setdefault((entry["exchange"], entry["sym"]), []).append((entry, ids))
    for stream in streams.values():
        _duplicate_ids(stream, report)
    if combine_hashes(hashes) != manifest.content_hash and not report.counts[HASH_MISMATCH]:
        report.add(Violation("manifest.json", -1, HASH_MISMATCH, {"content_hash": manifest.content_hash}))
    return report
