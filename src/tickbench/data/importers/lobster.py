"""LOBSTER message and orderbook files (NASDAQ TotalView-ITCH reconstructions).

Layout as published by LOBSTER ("Data structure", lobsterdata.com/info/DataStructure.php, and
the README shipped with its sample files): per ticker and trading day a pair of header-less CSV
files named ``TICKER_YYYY-MM-DD_STARTMS_ENDMS_message_LEVEL.csv`` and ``…_orderbook_LEVEL.csv``
with one row per event, row *i* of the orderbook being the book after message *i*.

* message: ``time`` (seconds after midnight, decimals down to ns), ``event type`` (1 submit, 2
  partial cancel, 3 delete, 4 execution of a visible order, 5 execution of a hidden order, 6
  cross/auction trade, 7 trading halt), ``order id``, ``size`` (shares), ``price`` (dollars ×
  10000, an integer), ``direction`` (1 buy order, -1 sell order).
* orderbook: ``ask price 1, ask size 1, bid price 1, bid size 1, ask price 2, …`` for LEVEL
  levels; prices are dollars × 10000; an empty level holds a dummy price with size 0.

Conversion: times are New York local time on the file's day, stored as UTC; prices are divided
by 10000; the venue is ``NASDAQ`` and the symbol the ticker. Trades are the executions (types 4
and 5): a visible sell order executed is a ``buy`` trade and vice versa (LOBSTER's note; a hidden
execution's direction is as NASDAQ reports it). Their ``trade_id`` is ``days since epoch × 10^10
+ message row``: unique per ticker and increasing with time. Type 6 crosses have no taker side
and are not imported. The book keeps one snapshot per ``--sample`` messages (default 40; the
messages sharing one timestamp count as one update and the snapshot is the book after the last
of them); ``--sample 1`` keeps every row.

Depth: SPEC §1's book has 20 levels per side, all present. Files requested with fewer than 20
levels are refused (padding would invent levels and break the invariants), and an empty level
in a 20+-level file is a missing level, reported like every other bad row.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import polars as pl
import pyarrow as pa

from tickbench.data.dataset import DatasetError
from tickbench.data.importers.common import (
    BAD_COL,
    NS_MAX,
    ROW_COL,
    TS,
    Chunk,
    ReaderOptions,
    csv_batches,
    group_ends,
    reading,
    trades_select,
)
from tickbench.datasets.paper.schema import BOOK_SCHEMA, LEVELS
from tickbench.datasets.paper.validate import TS_OUT_OF_RANGE

NAME = re.compile(r"^(?P<ticker>[^_]+)_(?P<day>\d{4}-\d{2}-\d{2})_(?P<start>\d+)_(?P<end>\d+)_"
                  r"(?P<kind>message|orderbook)_(?P<level>\d+)\.csv(\.gz)?$")
MESSAGE_COLS = ["time", "type", "order_id", "size", "price", "direction"]
PRICE_SCALE = 10_000
EXCHANGE = "NASDAQ"
BOOK_SAMPLE = 40
NY = ZoneInfo("America/New_York")


def _parse(path: Path) -> re.Match[str]:
    m = NAME.match(path.name)
    if not m:
        raise DatasetError(f"{path}: not a LOBSTER file name (TICKER_YYYY-MM-DD_START_END_message_LEVEL.csv "
                           "or …_orderbook_LEVEL.csv)")
    return m


def produces(paths: list[Path]) -> str:
    """The dataset kind these files make (its name; the datasets' importer writes it)."""
    return "paper"


def read(paths: list[Path], opts: ReaderOptions) -> Iterator[Chunk]:
    """Pair the message and orderbook files and read them in lock step, in name order."""
    pairs: dict[str, dict[str, Path]] = {}
    for p in paths:
        m = _parse(p)
        key = f"{m['ticker']}_{m['day']}_{m['start']}_{m['end']}_{m['level']}"
        if m["kind"] in pairs.setdefault(key, {}):
            raise DatasetError(f"{p}: given twice (or as .csv and .csv.gz)")
        pairs[key][m["kind"]] = p
    for key in sorted(pairs):
        files = pairs[key]
        if "message" not in files:
            raise DatasetError(f"{files['orderbook']}: its message file (the event times) was not given")
        m = _parse(files["message"])
        level = int(m["level"])
        if "orderbook" in files and level < LEVELS:
            raise DatasetError(
                f"{files['orderbook']}: LOBSTER files with {level} levels; tickbench's book has {LEVELS} levels "
                f"per side, all present (SPEC §1), and padding would invent them. Request {LEVELS} or more "
                "levels from LOBSTER, or pass only the message files to import the trades alone.")
        with reading(files["message"], "a LOBSTER message/orderbook pair"):
            yield from _pair(files["message"], files.get("orderbook"), m["ticker"],
                             dt.date.fromisoformat(m["day"]), level, opts)


def _midnight_ns(day: dt.date) -> int:
    """New York midnight of ``day`` in ns since the epoch (the session is far from a DST switch)."""
    noon = dt.datetime(day.year, day.month, day.day, 12, tzinfo=NY)
    offset = noon.utcoffset()
    assert offset is not None
    return ((day - dt.date(1970, 1, 1)).days * 86_400 - int(offset.total_seconds())) * 1_000_000_000


def _pair(message: Path, orderbook: Path | None, ticker: str, day: dt.date, level: int,
          opts: ReaderOptions) -> Iterator[Chunk]:
    mtypes = {"time": pa.float64(), "type": pa.int64(), "order_id": pa.int64(), "size": pa.int64(),
              "price": pa.int64(), "direction": pa.int64()}
    bnames = [f"{s}{k}{i}" for i in range(1, level + 1) for s in ("a", "b") for k in ("p", "s")]
    base = _midnight_ns(day)
    id_base = (day - dt.date(1970, 1, 1)).days * 10**10
    sample = opts.sample_or(BOOK_SAMPLE)
    # a message row is ~40 bytes, an orderbook row ~10 per level and side: read the message file in
    # proportionally smaller blocks so the matching orderbook rows stay within the block budget
    msg_opts = replace(opts, block_bytes=max(opts.block_bytes * 40 // (40 * level), 1 << 16))
    msgs = csv_batches(message, mtypes, msg_opts, names=MESSAGE_COLS)
    books = csv_batches(orderbook, dict.fromkeys(bnames, pa.int64()), opts, names=bnames) if orderbook else None
    pending_book: pl.DataFrame | None = None
    cur = next(msgs, None)
    row = 0
    groups = 0
    while cur is not None:
        nxt = next(msgs, None)
        m = pl.from_arrow(cur)
        assert isinstance(m, pl.DataFrame)
        # In float first: a time that would leave int64 ns is refused, never wrapped.
        at = (pl.col("time") * 1e9).round(0) + base
        fits = at.is_finite() & at.is_between(-float(NS_MAX), float(NS_MAX), closed="none")
        m = m.with_row_index(ROW_COL, offset=row).with_columns(
            pl.col(ROW_COL).cast(pl.Int64),
            ts=pl.when(fits).then((pl.col("time") * 1e9).round(0).cast(pl.Int64, strict=False) + base),
            **{BAD_COL: pl.when(pl.col("time").is_finite() & ~fits).then(pl.lit(TS_OUT_OF_RANGE))
               .otherwise(pl.lit(None, dtype=pl.String))})
        row += m.height
        execs = m.filter(pl.col("type").is_in([4, 5]))
        execs = execs.with_columns(_descale(execs["price"]))
        yield Chunk("trades", execs.select(
            pl.col("ts").cast(TS), pl.lit(EXCHANGE).alias("exchange"), pl.lit(ticker).alias("sym"),
            pl.when(pl.col("direction") == -1).then(pl.lit("buy")).otherwise(pl.lit("sell")).alias("side"),
            "price", pl.col("size").cast(pl.Float64).alias("amount"),
            (pl.col(ROW_COL) + id_base).alias("trade_id"), ROW_COL, BAD_COL,
        ).select(*trades_select(), BAD_COL), message.name)
        if books is not None:
            b = pending_book
            while b is None or b.height < m.height:
                more = next(books, None)
                if more is None:
                    raise DatasetError(f"{orderbook}: fewer rows than its message file {message.name}")
                add = pl.from_arrow(more)
                assert isinstance(add, pl.DataFrame)
                b = add if b is None else pl.concat([b, add])
            pending_book = b.slice(m.height)
            b = b.slice(0, m.height)
            ts = m["ts"].fill_null(-1).to_numpy()  # a bad time (dropped or refused later) ends no group
            if sample == 1:
                keep = np.ones(m.height, dtype=bool)
            else:
                next_ts = None if nxt is None else _ts_of(nxt.column(0)[0].as_py(), base)
                ends = np.flatnonzero(group_ends(ts, next_ts))
                keep = np.zeros(m.height, dtype=bool)
                keep[ends[(groups + np.arange(1, len(ends) + 1)) % sample == 0]] = True
                groups += len(ends)
            yield Chunk("book", _book(m.select("ts", ROW_COL, BAD_COL), b, ticker, level).filter(pl.Series(keep)),
                        orderbook.name if orderbook else message.name)
        cur = nxt
    if books is not None and ((pending_book is not None and pending_book.height) or next(books, None) is not None):
        raise DatasetError(f"{orderbook}: more rows than its message file ({row})")


def _ts_of(seconds: object, base: int) -> int:
    """One message time as ns since the epoch, as the batch computes it (-1 where it has none)."""
    if not isinstance(seconds, float | int) or not math.isfinite(seconds):
        return -1
    ns = round(seconds * 1e9) + base
    return ns if -NS_MAX <= ns <= NS_MAX else -1


def _descale(s: pl.Series) -> pl.Series:
    """Integer price × 10000 to dollars, by true division (the nearest float to the decimal
    price; Polars would multiply by the reciprocal, one ulp off for many prices)."""
    return pl.Series(s.name, s.to_numpy().astype(np.float64) / PRICE_SCALE)


def _book(m: pl.DataFrame, b: pl.DataFrame, ticker: str, level: int) -> pl.DataFrame:
    b = b.with_columns([_descale(b[f"{s}p{i}"]) for s in "ab" for i in range(1, LEVELS + 1)])
    cols: list[pl.Expr] = []
    for side, src in (("b", "b"), ("a", "a")):
        for i in range(1, LEVELS + 1):
            size = pl.col(f"{src}s{i}")
            empty = size == 0  # LOBSTER's dummy level: a sentinel price and size 0
            price = pl.col(f"{src}p{i}")
            cols.append(pl.when(empty).then(None).otherwise(price).alias(f"{side}{i}price"))
            cols.append(pl.when(empty).then(None).otherwise(size.cast(pl.Float64)).alias(f"{side}{i}size"))
    return pl.concat([m, b], how="horizontal").select(
        pl.col("ts").cast(TS), pl.lit(EXCHANGE).alias("exchange"), pl.lit(ticker).alias("sym"), *cols, ROW_COL,
        BAD_COL,
    ).select([*BOOK_SCHEMA.names, ROW_COL, BAD_COL])
