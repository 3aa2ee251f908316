"""Rows recorded with cryptofeed, written flat to CSV (header row, gzip or plain) or Parquet.

cryptofeed itself hands each event to a backend callback as a dict; this reader takes those
dicts written one per row, with the column names cryptofeed gives them (``cryptofeed/types.pyx``
``Trade.to_dict``, ``cryptofeed/backends/backend.py`` ``BackendCallback`` which adds
``receipt_timestamp``, and ``cryptofeed/backends/_util.py`` ``book_flatten`` for books):

* trades: ``exchange, symbol, side, amount, price, id, type, timestamp, receipt_timestamp``
  (any order, further columns ignored; ``type`` optional). ``side`` is ``buy``/``sell``.
* L2 book: one row per price level, ``exchange, symbol, side, price, size, timestamp, delta``
  plus ``receipt_timestamp``: ``side`` is ``bid``/``ask``, ``delta`` false for the levels of a
  full book (a snapshot) and true for an update, where ``size`` 0 removes the level. The rows of
  one book callback share ``timestamp`` and ``receipt_timestamp``. The book is rebuilt and one
  snapshot kept per ``--sample`` callbacks (default 40).

Timestamps are float seconds since the epoch (cryptofeed's convention; rounded to the
microsecond, which is all a float64 of today's epoch seconds holds) or Parquet timestamps.
``timestamp`` is the exchange's time (cryptofeed stores the receipt time there when the exchange
gives none); ``--clock local`` uses ``receipt_timestamp``. Exchange names are upper-cased without
separators (``BINANCE_US`` → ``BINANCEUS``). The kind of a file is told by its columns.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pyarrow as pa

from tickbench.data.dataset import DatasetError
from tickbench.data.importers.common import (
    BAD_COL,
    NS_MAX,
    ROW_COL,
    TS,
    US_MAX,
    Chunk,
    L2Rebuilder,
    ReaderOptions,
    assign_sequence_ids,
    check_ts,
    csv_batches,
    header,
    normalize_exchange,
    parquet_batches,
    reading,
    trades_select,
    with_row_index,
)
from tickbench.datasets.paper.validate import TS_OUT_OF_RANGE

TRADE_COLS = {"exchange", "symbol", "side", "amount", "price", "id", "timestamp", "receipt_timestamp"}
BOOK_COLS = {"exchange", "symbol", "side", "price", "size", "timestamp", "delta", "receipt_timestamp"}
BOOK_SAMPLE = 40


def _columns(path: Path) -> list[str]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            return list(pq.read_schema(path).names)
        except (pa.ArrowInvalid, OSError) as exc:
            raise DatasetError(f"{path}: unreadable Parquet ({exc})") from exc
    return header(path)


def kind(path: Path) -> str:
    cols = set(_columns(path))
    if cols >= TRADE_COLS:
        return "trades"
    if cols >= BOOK_COLS:
        return "book"
    raise DatasetError(f"{path}: not a cryptofeed trades file (columns {sorted(TRADE_COLS)}) nor an L2 book "
                       f"file ({sorted(BOOK_COLS)}); it has {sorted(cols)}")


def _batches(path: Path, opts: ReaderOptions, types: dict[str, pa.DataType]) -> Iterator[pl.DataFrame]:
    it = parquet_batches(path, opts) if path.suffix == ".parquet" else csv_batches(path, types, opts)
    for batch in it:
        df = pl.from_arrow(batch)
        assert isinstance(df, pl.DataFrame)
        yield df


_NS_PER = {"ns": 1, "us": 1_000, "ms": 1_000_000}


def _to_ns(df: pl.DataFrame, col: str) -> tuple[pl.Series, pl.Series]:
    """Column ``col`` (float seconds, numeric text, or a Parquet timestamp) as integer ns since
    the epoch, and the :data:`BAD_COL` verdict: a value outside int64 ns is null ts with the
    reason, never wrapped; a missing or non-finite one is null ts (a missing value)."""
    s = df[col]
    if isinstance(s.dtype, pl.Datetime):
        factor = _NS_PER[s.dtype.time_unit]
        raw = s.to_physical()
        ok = raw.is_between(-(NS_MAX // factor), NS_MAX // factor)
        present = raw.is_not_null()
        ns = pl.select(pl.when(ok).then(raw * factor)).to_series()
    else:
        seconds = s.cast(pl.Float64, strict=False)
        us = (seconds * 1e6).round(0)
        present = seconds.is_finite().fill_null(False)  # 1e305 s is out of range, not missing
        ok = present & us.is_between(-US_MAX, US_MAX)
        ns = pl.select(pl.when(ok).then(us.cast(pl.Int64, strict=False) * 1000)).to_series()
    bad = pl.select(pl.when(present & ~ok.fill_null(False)).then(pl.lit(TS_OUT_OF_RANGE))
                    .otherwise(pl.lit(None, dtype=pl.String))).to_series()
    return ns.alias(col), bad.alias(BAD_COL)


def produces(paths: list[Path]) -> str:
    """The dataset kind these files make (its name; the datasets' importer writes it)."""
    return "paper"


def read(paths: list[Path], opts: ReaderOptions) -> Iterator[Chunk]:
    """Every file's rows as SPEC rows; files of one kind are read in name order."""
    kinds = {p: kind(p) for p in paths}
    clock = "timestamp" if opts.clock == "exchange" else "receipt_timestamp"
    counters: dict[tuple[str, str], int] = {}
    for path in sorted(paths, key=lambda p: (kinds[p], p.name)):
        with reading(path, f"a cryptofeed {kinds[path]} file"):
            if kinds[path] == "trades":
                yield from _trades(path, opts, clock, counters)
            else:
                yield from _book(path, opts, clock)


def _trades(path: Path, opts: ReaderOptions, clock: str, counters: dict[tuple[str, str], int]) -> Iterator[Chunk]:
    types = {"exchange": pa.string(), "symbol": pa.string(), "side": pa.string(), "amount": pa.float64(),
             "price": pa.float64(), "id": pa.string(), "timestamp": pa.float64(), "receipt_timestamp": pa.float64()}
    row = 0
    for df in _batches(path, opts, types):
        ts, bad = _to_ns(df, clock)
        df = with_row_index(df, row).with_columns(ts.alias("_ts"), bad)
        row += df.height
        # Numbers as text (cryptofeed writes Decimals) are read as numbers; text that is no
        # number is a missing value, reported like every bad row.
        df = df.select(
            pl.col("_ts").cast(TS).alias("ts"), normalize_exchange(pl.col("exchange").cast(pl.String)),
            pl.col("symbol").cast(pl.String).alias("sym"), pl.col("side").cast(pl.String),
            pl.col("price").cast(pl.Float64, strict=False), pl.col("amount").cast(pl.Float64, strict=False),
            pl.col("id").cast(pl.String).cast(pl.Int64, strict=False).alias("trade_id"), ROW_COL, BAD_COL,
        )
        if opts.trade_ids == "sequence":
            df = assign_sequence_ids(df, counters)
        yield Chunk("trades", df.select(*trades_select(), BAD_COL), path.name)


def _book(path: Path, opts: ReaderOptions, clock: str) -> Iterator[Chunk]:
    types = {"exchange": pa.string(), "symbol": pa.string(), "side": pa.string(), "price": pa.float64(),
             "size": pa.float64(), "timestamp": pa.float64(), "receipt_timestamp": pa.float64(), "delta": pa.bool_()}
    rb = L2Rebuilder(opts.sample_or(BOOK_SAMPLE))
    row = 0
    for df in _batches(path, opts, types):
        ts, bad = _to_ns(df, clock)
        check_ts(ts.to_list(), bad.to_list(), row, path.name, opts)
        msg = list(zip(_to_ns(df, "timestamp")[0].to_list(), _to_ns(df, "receipt_timestamp")[0].to_list(),
                       strict=True))
        ex = df.select(normalize_exchange(pl.col("exchange").cast(pl.String)))["exchange"]
        rb.feed(ex.to_list(), df["symbol"].cast(pl.String).to_list(), msg, ts.to_list(),
                (~df["delta"].cast(pl.Boolean)).to_list(), df["side"].cast(pl.String).to_list(),
                df["price"].cast(pl.Float64, strict=False).to_list(),
                df["size"].cast(pl.Float64, strict=False).to_list(), row, path.name)
        row += df.height
        yield Chunk("book", rb.take(), path.name)
    yield Chunk("book", rb.take(final=True), path.name)
    if rb.skipped:
        opts.notes.setdefault("skipped_before_first_snapshot", {})[path.name] = rb.skipped
