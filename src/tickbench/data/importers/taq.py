"""NYSE Daily TAQ quote and trade files (pipe-delimited, gzip or plain), into a market dataset.

As NYSE's Daily TAQ client specification (version 3) lays them out: a header row of field names,
one record per line, ``|`` between fields, and a last line ``END|<YYYYMMDD>|<records>``.

* quotes (``EQY_US_ALL_BBO_<YYYYMMDD>``, ``SPLITS_US_ALL_BBO_<X>_<YYYYMMDD>``): ``Time``,
  ``Exchange``, ``Symbol``, ``Bid_Price``, ``Bid_Size``, ``Offer_Price``, ``Offer_Size``, …,
  ``Sequence_Number``, …; sizes in round lots of 100 shares.
* trades (``EQY_US_ALL_TRADE_<YYYYMMDD>``): ``Time``, ``Exchange``, ``Symbol``, ``Sale_Condition``,
  ``Trade_Volume``, ``Trade_Price``, …, ``Trade_Correction_Indicator``, ``Sequence_Number``, …;
  volume in shares. A corrected or cancelled trade (correction indicator other than ``00``) is
  not a trade of the day: left out and counted. TAQ does not say which side took liquidity:
  the market import infers it (:mod:`.market`).

``Time`` is ``HHMMSS`` and nine digits of nanoseconds (six of microseconds before October 2016)
of the trading day in New York time; the day is the file name's date, so a file must keep its
published name (the date in it). Times become UTC with that day's offset. Field names are
matched without case or underscores (``Bid_Price``, ``BidPrice``). Exchange codes become the
venues' MICs (``N`` → ``XNYS``, ``Q``/``T`` → ``XNAS``, …; an unknown code stays as it is).
``Sequence_Number`` counts a day's messages; ``seq`` and ``trade_id`` are the day's number
since the epoch times 10^10 plus it, so they keep increasing across days.
"""

from __future__ import annotations

import datetime as dt
import gzip
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import polars as pl
import pyarrow as pa
import pyarrow.csv as pacsv

from tickbench.data.dataset import DatasetError
from tickbench.data.importers.common import (
    BAD_COL,
    ROW_COL,
    Chunk,
    ReaderOptions,
    csv_batches,
    reading,
    with_row_index,
)
from tickbench.data.market_calendar import EPOCH, NS_PER_DAY, NS_PER_S
from tickbench.data.validate import TS_OUT_OF_RANGE

NEW_YORK = ZoneInfo("America/New_York")
ROUND_LOT = 100.0
DAY_STRIDE = 10**10  # seq and trade_id of day d: d * stride + the day's Sequence_Number
# TAQ's participant codes (Daily TAQ client specification, "Exchange codes") as MICs.
EXCHANGES = {
    "A": "XASE", "B": "XBOS", "C": "XCIS", "D": "FINRA", "H": "MIHX", "I": "XISX", "J": "EDGA", "K": "EDGX",
    "L": "LTSE", "M": "XCHI", "N": "XNYS", "P": "ARCX", "Q": "XNAS", "S": "CTS", "T": "XNAS", "U": "MEMX",
    "V": "IEXG", "W": "XCBO", "X": "XPHL", "Y": "BATY", "Z": "BATS",
}
QUOTE_FIELDS = {"time": "Time", "exchange": "Exchange", "symbol": "Symbol", "bidprice": "Bid_Price",
                "bidsize": "Bid_Size", "offerprice": "Offer_Price", "offersize": "Offer_Size",
                "sequencenumber": "Sequence_Number"}
TRADE_FIELDS = {"time": "Time", "exchange": "Exchange", "symbol": "Symbol", "tradevolume": "Trade_Volume",
                "tradeprice": "Trade_Price", "tradecorrectionindicator": "Trade_Correction_Indicator",
                "sequencenumber": "Sequence_Number"}
DATE_IN_NAME = re.compile(r"(?<!\d)(\d{8})(?!\d)")
FIRST_DAY, LAST_DAY = dt.date(1678, 1, 1), dt.date(2262, 4, 10)
BAD_SEQUENCE = f"TAQ Sequence_Number outside [0, {DAY_STRIDE:.0e})"
CORRECTED = "corrected or cancelled trade (TAQ correction indicator not 00)"


def _key(name: str) -> str:
    return name.strip().replace("_", "").lower()


def _header(path: Path) -> list[str]:
    opener: Any = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", newline="") as f:
            line = f.readline()
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise DatasetError(f"{path}: unreadable ({exc})") from exc
    return line.rstrip("\r\n").split("|") if line else []


def kind(path: Path) -> str:
    """``quotes`` or ``trades``, from the file's header."""
    keys = {_key(c) for c in _header(path)}
    if set(QUOTE_FIELDS) <= keys:
        return "quotes"
    if set(TRADE_FIELDS) <= keys:
        return "trades"
    raise DatasetError(f"{path}: not a Daily TAQ quote (BBO) or trade file: its header lacks "
                       f"{', '.join(sorted(set(QUOTE_FIELDS.values()) - {c for c in _header(path)}))[:200]}")


def day_of(path: Path) -> dt.date:
    """The trading day in a TAQ file's name (``…_YYYYMMDD``)."""
    found = DATE_IN_NAME.findall(path.name)
    if len(found) != 1:
        raise DatasetError(f"{path}: a TAQ file's name holds its day (EQY_US_ALL_BBO_YYYYMMDD, "
                           "EQY_US_ALL_TRADE_YYYYMMDD): keep the published name")
    try:
        day = dt.datetime.strptime(found[0], "%Y%m%d").date()
    except ValueError:
        raise DatasetError(f"{path}: {found[0]} in its name is not a date YYYYMMDD") from None
    if not FIRST_DAY <= day <= LAST_DAY:  # int64 nanoseconds since the epoch hold no other
        raise DatasetError(f"{path}: its day {day} is outside {FIRST_DAY} … {LAST_DAY}")
    return day


def _utc_offset_ns(day: dt.date) -> int:
    """New York's offset from UTC during ``day``'s session, ns (negative: behind UTC)."""
    noon = dt.datetime(day.year, day.month, day.day, 12, tzinfo=NEW_YORK)
    off = noon.utcoffset()
    assert off is not None
    return int(off.total_seconds()) * NS_PER_S


def _time_ns(col: str) -> pl.Expr:
    """``HHMMSS`` + nanoseconds (15 digits) or microseconds (12) as ns since midnight; null
    when it is neither."""
    t = pl.col(col).str.strip_chars()
    digits = t.str.contains(r"^\d{12}(\d{3})?$")
    h = t.str.slice(0, 2).cast(pl.Int64, strict=False)
    m = t.str.slice(2, 2).cast(pl.Int64, strict=False)
    s = t.str.slice(4, 2).cast(pl.Int64, strict=False)
    frac = t.str.slice(6).cast(pl.Int64, strict=False)
    scale = pl.when(t.str.len_chars() == 15).then(pl.lit(1)).otherwise(pl.lit(1_000))
    ok = digits & (h < 24) & (m < 60) & (s < 60)
    return pl.when(ok).then(((h * 60 + m) * 60 + s) * NS_PER_S + frac * scale)


def _skip_end(row: Any) -> str:
    """The trailer ``END|date|count`` is the file's last line, not a record."""
    return "skip" if str(row.text).startswith("END|") else "error"


def read(paths: list[Path], opts: ReaderOptions) -> Iterator[Chunk]:
    """Every file's records as market rows; files of one kind in day order."""
    files = sorted(((kind(p), day_of(p), p.name, p) for p in paths), key=lambda k: (k[0], k[1], k[2]))
    for k, day, _, path in files:
        with reading(path, f"a Daily TAQ {k} file"):
            yield from (_quotes if k == "quotes" else _trades)(path, day, opts)


def _batches(path: Path, fields: dict[str, str], numeric: dict[str, pa.DataType],
             opts: ReaderOptions) -> Iterator[tuple[pl.DataFrame, int]]:
    cols = _header(path)
    by_key = {_key(c): c for c in cols}
    types: dict[str, pa.DataType] = {c: pa.string() for c in cols}
    for k, t in numeric.items():
        types[by_key[k]] = t
    parse = pacsv.ParseOptions(delimiter="|", invalid_row_handler=_skip_end)
    row = 0
    for batch in csv_batches(path, types, opts, parse=parse):
        df = pl.from_arrow(batch)
        assert isinstance(df, pl.DataFrame)
        df = df.rename({by_key[k]: k for k in fields})
        yield with_row_index(df, row), batch.num_rows
        row += batch.num_rows


def _when(day: dt.date, id_col: str) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """ts (UTC) of the ``time`` column on ``day``, the day's id (``seq``/``trade_id``) of the
    ``sequencenumber`` column, and the reader's verdict on them (never a wrapped value)."""
    tod = _time_ns("time")
    ts = tod + ((day - EPOCH).days * NS_PER_DAY - _utc_offset_ns(day))
    n = pl.col("sequencenumber")
    in_range = n.is_between(0, DAY_STRIDE - 1)
    ids = pl.when(in_range).then(n + (day - EPOCH).days * DAY_STRIDE).alias(id_col)
    bad = (pl.when(tod.is_null() & pl.col("time").is_not_null()).then(pl.lit(TS_OUT_OF_RANGE))
           .when(n.is_not_null() & ~in_range).then(pl.lit(BAD_SEQUENCE))
           .otherwise(pl.lit(None, dtype=pl.String)).alias(BAD_COL))
    return ts.cast(pl.Datetime("ns", "UTC")).alias("ts"), ids, bad


def _venue() -> pl.Expr:
    code = pl.col("exchange").str.strip_chars()
    return code.replace_strict(EXCHANGES, default=code, return_dtype=pl.String).alias("exchange")


def _quotes(path: Path, day: dt.date, opts: ReaderOptions) -> Iterator[Chunk]:
    numeric = {"bidprice": pa.float64(), "bidsize": pa.float64(), "offerprice": pa.float64(),
               "offersize": pa.float64(), "sequencenumber": pa.int64()}
    ts, seq, bad = _when(day, "seq")
    for df, _ in _batches(path, QUOTE_FIELDS, numeric, opts):
        yield Chunk("quotes", df.select(
            ts, _venue(), pl.col("symbol").str.strip_chars().alias("sym"),
            pl.col("bidprice").alias("bid"), pl.col("offerprice").alias("ask"),
            (pl.col("bidsize") * ROUND_LOT).alias("bsize"), (pl.col("offersize") * ROUND_LOT).alias("asize"),
            seq, ROW_COL, bad), path.name)


def _trades(path: Path, day: dt.date, opts: ReaderOptions) -> Iterator[Chunk]:
    numeric = {"tradevolume": pa.float64(), "tradeprice": pa.float64(), "sequencenumber": pa.int64()}
    ts, trade_id, bad = _when(day, "trade_id")
    for df, _ in _batches(path, TRADE_FIELDS, numeric, opts):
        regular = pl.col("tradecorrectionindicator").str.strip_chars().fill_null("00") == "00"
        corrected = df.filter(~regular).height
        if corrected:
            opts.dropped[CORRECTED] += corrected
        yield Chunk("trades", df.filter(regular).select(
            ts, _venue(), pl.col("symbol").str.strip_chars().alias("sym"), pl.lit(None, pl.String).alias("side"),
            pl.col("tradeprice").alias("price"), pl.col("tradevolume").alias("amount"),
            trade_id, ROW_COL, bad), path.name)
