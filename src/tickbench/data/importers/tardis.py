"""Tardis.dev downloadable CSV files (gzip or plain), one reader per data type.

Column layouts, as published in Tardis.dev's documentation ("Downloadable CSV files" → "Data
types", docs.tardis.dev/downloadable-csv-files): comma-delimited, header row, timestamps in
microseconds since the epoch (UTC), decimal point ``.``.

* ``trades``: ``exchange,symbol,timestamp,local_timestamp,id,side,price,amount``; ``id`` is the
  exchange's trade id (numeric, a GUID or empty), ``side`` the taker side ``buy``/``sell``
  (``unknown`` when the exchange does not say: such a row breaks the side invariant).
* ``book_snapshot_25`` (and ``book_snapshot_5``, refused: fewer than 20 levels):
  ``exchange,symbol,timestamp,local_timestamp,asks[0].price,asks[0].amount,bids[0].price,
  bids[0].amount,…,asks[24].price,asks[24].amount,bids[24].price,bids[24].amount``; the top 20
  levels per side are kept, an empty level is a missing value.
* ``incremental_book_L2``: ``exchange,symbol,timestamp,local_timestamp,is_snapshot,side,price,
  amount``; ``amount`` is the level's new size (0 removes it), rows of one exchange message share
  ``local_timestamp``, and an ``is_snapshot=true`` row after a non-snapshot row starts a new book.
  The book is rebuilt and one snapshot is kept per ``--sample`` messages (default 40).

* ``quotes`` (top of book, for a market dataset): ``exchange,symbol,timestamp,local_timestamp,
  ask_amount,ask_price,bid_price,bid_amount``; a quote's ``seq`` is 1, 2, 3 … per (exchange,
  symbol) in file order (Tardis gives none), so files of one stream are read in name order.

A ``quotes`` file (with ``trades`` files) makes a market dataset (SPEC §1.3, :func:`read_market`);
book files make the paper's (:func:`read`); the two do not mix.

``timestamp`` is the exchange's time (Tardis falls back to ``local_timestamp`` when the exchange
gives none); ``--clock local`` stamps rows with the arrival time instead. Venue ids such as
``coinbase`` or ``binance-us`` become ``COINBASE``, ``BINANCEUS``; symbols are kept as given.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pyarrow as pa

from tickbench.data.dataset import DatasetError
from tickbench.data.importers.common import (
    BAD_COL,
    ROW_COL,
    Chunk,
    L2Rebuilder,
    ReaderOptions,
    assign_sequence_ids,
    check_ts,
    csv_batches,
    header,
    normalize_exchange,
    reading,
    trades_select,
    us_bad,
    us_to_ns,
    us_to_ts,
    with_row_index,
)
from tickbench.datasets.paper.schema import BOOK_SCHEMA, LEVELS

TRADES = ["exchange", "symbol", "timestamp", "local_timestamp", "id", "side", "price", "amount"]
QUOTES = ["exchange", "symbol", "timestamp", "local_timestamp", "ask_amount", "ask_price", "bid_price", "bid_amount"]
INCREMENTAL = ["exchange", "symbol", "timestamp", "local_timestamp", "is_snapshot", "side", "price", "amount"]
SNAPSHOT_PREFIX = ["exchange", "symbol", "timestamp", "local_timestamp"]
INCREMENTAL_SAMPLE = 40


def _snapshot_levels(cols: list[str]) -> int:
    """The depth of a ``book_snapshot_N`` header, or 0 when ``cols`` is not one."""
    if cols[:4] != SNAPSHOT_PREFIX or (len(cols) - 4) % 4:
        return 0
    n = (len(cols) - 4) // 4
    want = [f"{s}[{i}].{k}" for i in range(n) for s in ("asks", "bids") for k in ("price", "amount")]
    return n if cols[4:] == want else 0


def kind(path: Path) -> str:
    """Which Tardis data type a file holds, from its header."""
    cols = header(path)
    if cols == TRADES:
        return "trades"
    if cols == QUOTES:
        return "quotes"
    if cols == INCREMENTAL:
        return "incremental_book_L2"
    n = _snapshot_levels(cols)
    if n >= LEVELS:
        return "book_snapshot"
    if n:
        raise DatasetError(f"{path}: a book_snapshot_{n} file has {n} levels; tickbench's book has {LEVELS} "
                           "(SPEC §1): import book_snapshot_25 or incremental_book_L2 instead")
    raise DatasetError(f"{path}: not a Tardis trades, quotes, book_snapshot_25 or incremental_book_L2 CSV "
                       f"(header {','.join(cols[:8])}…)")


def produces(paths: list[Path]) -> str:
    """The dataset kind these files make (its name; the datasets' importer writes it): a quotes
    file among them makes the market's (SPEC §1.3), trades and book files the paper's."""
    return "market" if any(kind(p) == "quotes" for p in paths) else "paper"


def read_market(paths: list[Path], opts: ReaderOptions) -> Iterator[Chunk]:
    """Quotes and trades files as a market dataset's rows; files of one kind in name order."""
    kinds = {p: kind(p) for p in paths}
    book = sorted(p.name for p, k in kinds.items() if k not in ("quotes", "trades"))
    if book:
        raise DatasetError(f"{book[0]}: a book file among quotes files; a market dataset takes Tardis quotes and "
                           "trades files, the paper's dataset trades and book files: import them apart")
    if "trades" not in kinds.values():
        first = min((p for p, k in kinds.items() if k == "quotes"), key=lambda p: p.name)
        raise DatasetError(f"{first}: Tardis quotes files without a trades file: a market dataset needs quotes and "
                           "trades; add the trades files of the same days")
    clock = "timestamp" if opts.clock == "exchange" else "local_timestamp"
    counters: dict[tuple[str, str], int] = {}
    seqs: dict[tuple[str, str], int] = {}
    for path in sorted(paths, key=lambda p: (kinds[p], p.name)):
        with reading(path, f"a Tardis {kinds[path]} CSV"):
            if kinds[path] == "trades":
                yield from _trades(path, opts, clock, counters)
            else:
                yield from _quotes(path, opts, clock, seqs)


def _quotes(path: Path, opts: ReaderOptions, clock: str, seqs: dict[tuple[str, str], int]) -> Iterator[Chunk]:
    types = {"exchange": pa.string(), "symbol": pa.string(), "timestamp": pa.int64(), "local_timestamp": pa.int64(),
             "ask_amount": pa.float64(), "ask_price": pa.float64(), "bid_price": pa.float64(),
             "bid_amount": pa.float64()}
    row = 0
    for batch in csv_batches(path, types, opts):
        df = with_row_index(pl.from_arrow(batch), row)  # type: ignore[arg-type]
        row += batch.num_rows
        df = df.select(
            us_to_ts(clock).alias("ts"), normalize_exchange().alias("exchange"), pl.col("symbol").alias("sym"),
            pl.col("bid_price").alias("bid"), pl.col("ask_price").alias("ask"),
            pl.col("bid_amount").alias("bsize"), pl.col("ask_amount").alias("asize"), ROW_COL, us_bad(clock))
        df = assign_sequence_ids(df, seqs, "seq")
        yield Chunk("quotes", df.select("ts", "exchange", "sym", "bid", "ask", "bsize", "asize", "seq", ROW_COL,
                                        BAD_COL), path.name)


def read(paths: list[Path], opts: ReaderOptions) -> Iterator[Chunk]:
    """Every file's rows as SPEC rows; files of one kind are read in name order."""
    kinds = {p: kind(p) for p in paths}
    if "quotes" in kinds.values():
        raise DatasetError(f"{next(p for p, k in kinds.items() if k == 'quotes')}: a Tardis quotes file makes a "
                           "market dataset; import quotes and trades files without book files")
    clock = "timestamp" if opts.clock == "exchange" else "local_timestamp"
    counters: dict[tuple[str, str], int] = {}
    for path in sorted(paths, key=lambda p: (kinds[p], p.name)):
        k = kinds[path]
        with reading(path, f"a Tardis {k} CSV"):
            if k == "trades":
                yield from _trades(path, opts, clock, counters)
            elif k == "book_snapshot":
                yield from _snapshots(path, opts, clock)
            else:
                yield from _incremental(path, opts, clock)


def _trades(path: Path, opts: ReaderOptions, clock: str, counters: dict[tuple[str, str], int]) -> Iterator[Chunk]:
    types = {"exchange": pa.string(), "symbol": pa.string(), "timestamp": pa.int64(), "local_timestamp": pa.int64(),
             "id": pa.string(), "side": pa.string(), "price": pa.float64(), "amount": pa.float64()}
    row = 0
    for batch in csv_batches(path, types, opts):
        df = with_row_index(pl.from_arrow(batch), row)  # type: ignore[arg-type]
        row += batch.num_rows
        df = df.select(
            us_to_ts(clock).alias("ts"), normalize_exchange().alias("exchange"), pl.col("symbol").alias("sym"),
            "side", "price", "amount", pl.col("id").cast(pl.Int64, strict=False).alias("trade_id"), ROW_COL,
            us_bad(clock),
        )
        if opts.trade_ids == "sequence":
            df = assign_sequence_ids(df, counters)
        yield Chunk("trades", df.select(*trades_select(), BAD_COL), path.name)


def _snapshots(path: Path, opts: ReaderOptions, clock: str) -> Iterator[Chunk]:
    sample = opts.sample_or(1)
    cols = header(path)
    types = {c: pa.float64() for c in cols[4:]}
    types.update({"exchange": pa.string(), "symbol": pa.string(), "timestamp": pa.int64(),
                  "local_timestamp": pa.int64()})
    levels = [pl.col(f"{src}[{i}].{k}").alias(f"{dst}{i + 1}{'price' if k == 'price' else 'size'}")
              for dst, src in (("b", "bids"), ("a", "asks")) for i in range(LEVELS) for k in ("price", "amount")]
    row = 0
    for batch in csv_batches(path, types, opts):
        df = with_row_index(pl.from_arrow(batch), row)  # type: ignore[arg-type]
        row += batch.num_rows
        if sample > 1:
            df = df.filter(pl.col(ROW_COL) % sample == sample - 1)
        out = df.select(us_to_ts(clock).alias("ts"), normalize_exchange().alias("exchange"),
                        pl.col("symbol").alias("sym"), *levels, ROW_COL, us_bad(clock))
        yield Chunk("book", out.select([*BOOK_SCHEMA.names, ROW_COL, BAD_COL]), path.name)


def _incremental(path: Path, opts: ReaderOptions, clock: str) -> Iterator[Chunk]:
    types = {"exchange": pa.string(), "symbol": pa.string(), "timestamp": pa.int64(), "local_timestamp": pa.int64(),
             "is_snapshot": pa.bool_(), "side": pa.string(), "price": pa.float64(), "amount": pa.float64()}
    rb = L2Rebuilder(opts.sample_or(INCREMENTAL_SAMPLE))
    row = 0
    for batch in csv_batches(path, types, opts):
        df = pl.from_arrow(batch)
        assert isinstance(df, pl.DataFrame)
        df = df.with_columns(normalize_exchange(), us_to_ns(clock).alias("_ts"), us_bad(clock))
        ts = df["_ts"].to_list()
        check_ts(ts, df[BAD_COL].to_list(), row, path.name, opts)
        rb.feed(df["exchange"].to_list(), df["symbol"].to_list(), df["local_timestamp"].to_list(),
                ts, df["is_snapshot"].to_list(), df["side"].to_list(), df["price"].to_list(),
                df["amount"].to_list(), row, path.name)
        row += batch.num_rows
        yield Chunk("book", rb.take(), path.name)
    yield Chunk("book", rb.take(final=True), path.name)
    if rb.skipped:
        opts.notes.setdefault("skipped_before_first_snapshot", {})[path.name] = rb.skipped
