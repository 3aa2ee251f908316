"""NYSE Daily TAQ quote and trade files (pipe-delimited, gzip or plain), into a market dataset.

As NYSE's Daily TAQ client specification (version 3) lays them out: a header row of field names,
one record per line, ``|`` between fields, and a last line ``END|<YYYYMMDD>|<records>``, padded
with empty fields (``END|20161024|27052068|||||||||||||``).

* quotes (``EQY_US_ALL_BBO_<YYYYMMDD>``, ``SPLITS_US_ALL_BBO_<X>_<YYYYMMDD>``): ``Time``,
  ``Exchange``, ``Symbol``, ``Bid_Price``, ``Bid_Size``, ``Offer_Price``, ``Offer_Size``, …,
  ``Sequence_Number``, …; sizes in round lots of 100 shares. A side with price 0 and size 0 has
  no quote: such a one-sided quote is left out and counted (the dataset's quotes are two-sided,
  SPEC §1.3; METHODOLOGY says what a venue's latest quote then is).
* trades (``EQY_US_ALL_TRADE_<YYYYMMDD>``): ``Time``, ``Exchange``, ``Symbol``, ``Sale Condition``,
  ``Trade Volume``, ``Trade Price``, …, ``Trade Correction Indicator``, ``Sequence Number``, …
  (the TRADE header spells its names with spaces); volume in shares. A corrected or cancelled
  trade (correction indicator other than ``00``) is not a trade of the day: left out and
  counted. TAQ does not say which side took liquidity: the market import infers it
  (:mod:`.market`).

The trailer is the file's own integrity check: a file without one (cut short at a line
boundary), with more than one or one before the last line, or whose date is not the name's or
whose count is not the number of records is refused, naming both values. ``Time`` is ``HHMMSS``
and nine digits of nanoseconds (six of microseconds before October 2016) of the trading day in
New York time; the day is the file name's date, so a file must keep its published name (the
date in it), and it must lie in 1970-01-01 … 2262-04-10 (the times every engine holds). Times
become UTC with that day's offset; a time of 24:00 or later is a bad row saying so. Field names
are matched without case, spaces or underscores (``Trade Price``, ``Bid_Price``, ``BidPrice``).
Exchange codes become the venues' MICs (``N`` → ``XNYS``, ``Q``/``T`` → ``XNAS``, …; an unknown
code stays as it is). ``Sequence_Number`` counts a day's messages; ``seq`` and ``trade_id`` are
the day's number since the epoch times 10^10 plus it, so they keep increasing across days.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
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
    first_line,
    reading,
    with_row_index,
)
from tickbench.data.violations import shown
from tickbench.datasets.market.calendar import EPOCH, NS_PER_DAY, NS_PER_S
from tickbench.datasets.market.validate import ENGINE_TS_RANGE

NEW_YORK = ZoneInfo("America/New_York")
ROUND_LOT = 100.0
DAY_STRIDE = 10**10  # seq and trade_id of day d: d * stride + the day's Sequence_Number
# TAQ's participant codes (Daily TAQ client specification, "Exchange codes") as MICs.
EXCHANGES = {
    "A": "XASE", "B": "XBOS", "C": "XCIS", "D": "FINRA", "H": "MIHX", "I": "XISX", "J": "EDGA", "K": "EDGX",
    "L": "LTSE", "M": "XCHI", "N": "XNYS", "P": "ARCX", "Q": "XNAS", "S": "CTS", "T": "XNAS", "U": "MEMX",
    "V": "IEXG", "W": "XCBO", "X": "XPHL", "Y": "BATY", "Z": "BATS",
}
# The fields read, keyed by _key(name), as the specification spells them in each file's header.
QUOTE_FIELDS = {"time": "Time", "exchange": "Exchange", "symbol": "Symbol", "bidprice": "Bid_Price",
                "bidsize": "Bid_Size", "offerprice": "Offer_Price", "offersize": "Offer_Size",
                "sequencenumber": "Sequence_Number"}
TRADE_FIELDS = {"time": "Time", "exchange": "Exchange", "symbol": "Symbol", "tradevolume": "Trade Volume",
                "tradeprice": "Trade Price", "tradecorrectionindicator": "Trade Correction Indicator",
                "sequencenumber": "Sequence Number"}
FIELDS = {"quotes": QUOTE_FIELDS, "trades": TRADE_FIELDS}
WHAT = {"quotes": "BBO (quote)", "trades": "TRADE"}
DATE_IN_NAME = re.compile(r"(?<!\d)(\d{8})(?!\d)")
# The days every engine's timestamps hold (market_validate.ENGINE_TS_RANGE): a New York day's
# session in UTC stays inside 1970-01-01 … 2262-04-11 23:47.
FIRST_DAY, LAST_DAY = dt.date(1970, 1, 1), dt.date(2262, 4, 10)
BAD_SEQUENCE = f"TAQ Sequence_Number outside [0, {DAY_STRIDE:.0e})"
BAD_TIME = "TAQ Time not HHMMSS and 9 (or 6) digits of the second"
PAST_MIDNIGHT = "TAQ Time 24:00 or later, or minutes or seconds of 60 or more (not a time of the day)"
CORRECTED = "corrected or cancelled trade (TAQ correction indicator not 00)"
ONE_SIDED = "one-sided quote (TAQ: a side with price 0 and size 0, no quote on that side), not kept"
TRAILER = "END"


def _key(name: str) -> str:
    """A field name without case, spaces or underscores: TRADE headers spell ``Trade Volume``,
    BBO headers ``Bid_Price``, older files ``BidPrice``."""
    return name.replace("_", "").replace(" ", "").lower()


def _header(path: Path) -> list[str]:
    line = first_line(path)
    return line.split("|") if line else []


def kind(path: Path) -> str:
    """``quotes`` or ``trades``, from the file's header."""
    cols = _header(path)
    keys = {_key(c) for c in cols}
    for k, fields in (("quotes", QUOTE_FIELDS), ("trades", TRADE_FIELDS)):
        if set(fields) <= keys:
            return k
    # Which kind it was meant to be: its name (EQY_US_ALL_BBO_…, …_TRADE_…), else the header's fields.
    name = path.name.upper()
    if "BBO" in name or "QUOTE" in name:
        meant = "quotes"
    elif "TRADE" in name:
        meant = "trades"
    else:
        meant = max(("quotes", "trades"), key=lambda k: len(set(FIELDS[k]) & keys))
        if not set(FIELDS[meant]) & (keys - {"time", "exchange", "symbol", "sequencenumber"}):
            raise DatasetError(f"{path}: not a Daily TAQ BBO (quote) or TRADE file: its header "
                               f"({shown('|'.join(cols)[:120])}) has neither Bid_Price nor Trade Price")
    lacks = [v for k, v in FIELDS[meant].items() if k not in keys]
    raise DatasetError(f"{path}: not a Daily TAQ {WHAT[meant]} file: its header lacks {', '.join(lacks)}")


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
    if not FIRST_DAY <= day <= LAST_DAY:
        raise DatasetError(f"{path}: its day {day} is outside {FIRST_DAY} … {LAST_DAY}, the days every engine's "
                           f"timestamps hold ({ENGINE_TS_RANGE}); check the date in the file's name")
    return day


def _utc_offset_ns(day: dt.date) -> int:
    """New York's offset from UTC during ``day``'s session, ns (negative: behind UTC)."""
    noon = dt.datetime(day.year, day.month, day.day, 12, tzinfo=NEW_YORK)
    off = noon.utcoffset()
    assert off is not None
    return int(off.total_seconds()) * NS_PER_S


def _time_ns(col: str) -> tuple[pl.Expr, pl.Expr]:
    """``HHMMSS`` + nanoseconds (15 digits) or microseconds (12) as ns since midnight (null when
    it is not a time of the day), and the verdict on a value that is not (null when it is)."""
    t = pl.col(col).str.strip_chars()
    digits = t.str.contains(r"^\d{12}(\d{3})?$")
    h = t.str.slice(0, 2).cast(pl.Int64, strict=False)
    m = t.str.slice(2, 2).cast(pl.Int64, strict=False)
    s = t.str.slice(4, 2).cast(pl.Int64, strict=False)
    frac = t.str.slice(6).cast(pl.Int64, strict=False)
    scale = pl.when(t.str.len_chars() == 15).then(pl.lit(1)).otherwise(pl.lit(1_000))
    ok = digits & (h < 24) & (m < 60) & (s < 60)
    bad = (pl.when(t.is_null() | ok).then(pl.lit(None, dtype=pl.String))
           .when(digits).then(pl.lit(PAST_MIDNIGHT)).otherwise(pl.lit(BAD_TIME)))
    return pl.when(ok).then(((h * 60 + m) * 60 + s) * NS_PER_S + frac * scale), bad


@dataclass
class _Trailer:
    """What a file's ``END|<YYYYMMDD>|<records>`` line (padded with empty fields to the header's
    width, or not) says, and where it was: the file's own check that it arrived whole."""

    path: Path
    day: dt.date
    records: int = 0  # data lines read (every record, kept or not)
    lines: list[tuple[int, str]] = field(default_factory=list)  # (line number, text) of END lines

    def skip(self, row: Any) -> str:
        """pyarrow's handler of a line with another field count than the header: a trailer of
        another width is noted and skipped; any other such line stops the read."""
        text = str(row.text)
        if text.split("|", 1)[0].strip() == TRAILER:
            self.lines.append((int(row.number) if row.number is not None else -1, text))
            return "skip"
        return "error"

    def check(self) -> None:
        """Refuse the file unless its last line is one trailer whose day is the file name's and
        whose count is the records read."""
        where = f"{self.path}: "
        stamp = self.day.strftime("%Y%m%d")
        if not self.lines:
            raise DatasetError(f"{where}no trailer line END|{stamp}|<records> after its {self.records:,} records: "
                               "the file is cut short (an interrupted download or copy); fetch it again")
        last_line = self.records + len(self.lines) + 1  # the header is line 1
        early = [n for n, _ in self.lines if n != last_line]
        if early:
            raise DatasetError(f"{where}an END line (line {early[0]:,}) with records after it: the trailer belongs "
                               "on the last line alone; the file is damaged or two files joined")
        fields = [f.strip() for f in self.lines[0][1].split("|")]
        day, count = [*fields, "", ""][1:3]
        if day != stamp:
            raise DatasetError(f"{where}its trailer says day {_plain(day)}, its name {stamp}: a file renamed or "
                               "damaged; keep the published name")
        if not count.isdigit() or int(count) != self.records:
            raise DatasetError(f"{where}its trailer counts {_plain(count, True)} records, the file holds "
                               f"{self.records:,}: the file is damaged or incomplete; fetch it again")
        if any(fields[3:]):
            raise DatasetError(f"{where}its trailer line holds more than END|date|count: "
                               f"{shown(self.lines[0][1][:80])}")


def _plain(value: str, number: bool = False) -> str:
    """A trailer's field as the message shows it: digits as they are (a count with thousands
    separators), anything else quoted and cut."""
    if value.isdigit() and len(value) <= 20:
        return f"{int(value):,}" if number else value
    return shown(value[:20])


def produces(paths: list[Path]) -> str:
    """The dataset kind these files make (its name; the datasets' importer writes it)."""
    return "market"


def read(paths: list[Path], opts: ReaderOptions) -> Iterator[Chunk]:
    """Every file's records as market rows; files of one kind in day order."""
    files = sorted(((kind(p), day_of(p), p.name, p) for p in paths), key=lambda k: (k[0], k[1], k[2]))
    for k, day, _, path in files:
        with reading(path, f"a Daily TAQ {WHAT[k]} file"):
            yield from (_quotes if k == "quotes" else _trades)(path, day, opts)


def _batches(path: Path, day: dt.date, fields: dict[str, str], numeric: dict[str, pa.DataType],
             opts: ReaderOptions) -> Iterator[pl.DataFrame]:
    """The file's records (the fields read renamed to their keys, ``_row`` their index), its
    trailer checked once the last is read."""
    cols = _header(path)
    by_key = {_key(c): c for c in cols}
    # Numbers read as text first: the trailer of the header's width holds END and a date there.
    types: dict[str, pa.DataType] = {c: pa.string() for c in cols}
    trailer = _Trailer(path, day)
    parse = pacsv.ParseOptions(delimiter="|", invalid_row_handler=trailer.skip)
    row = parsed = 0
    for batch in csv_batches(path, types, opts, parse=parse):
        df = pl.from_arrow(batch)
        assert isinstance(df, pl.DataFrame)
        df = df.rename({by_key[k]: k for k in fields}).select(list(fields))
        end = pl.col("time").str.strip_chars() == TRAILER
        for i in df.with_row_index("_i").filter(end)["_i"].to_list():  # a trailer as wide as the header
            text = "|".join("" if v is None else str(v) for v in batch.slice(i, 1).to_pylist()[0].values())
            trailer.lines.append((parsed + i + 2, text))  # the header is line 1
        parsed += batch.num_rows
        df = _typed(df.filter(~end | pl.col("time").is_null()), numeric)
        trailer.records += df.height
        yield with_row_index(df, row)
        row += df.height
    trailer.check()


def _typed(df: pl.DataFrame, numeric: dict[str, pa.DataType]) -> pl.DataFrame:
    """The numeric fields as numbers: text that is none (``abc``, an empty field) is null, a
    missing value the row checks report."""
    dtypes = {pa.float64(): pl.Float64, pa.int64(): pl.Int64}
    return df.with_columns(pl.col(k).str.strip_chars().cast(dtypes[t], strict=False) for k, t in numeric.items())


def _when(day: dt.date, id_col: str) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """ts (UTC) of the ``time`` column on ``day``, the day's id (``seq``/``trade_id``) of the
    ``sequencenumber`` column, and the reader's verdict on them (never a wrapped value)."""
    tod, bad_time = _time_ns("time")
    ts = tod + ((day - EPOCH).days * NS_PER_DAY - _utc_offset_ns(day))
    n = pl.col("sequencenumber")
    in_range = n.is_between(0, DAY_STRIDE - 1)
    ids = pl.when(in_range).then(n + (day - EPOCH).days * DAY_STRIDE).alias(id_col)
    bad = pl.coalesce(bad_time, pl.when(n.is_not_null() & ~in_range).then(pl.lit(BAD_SEQUENCE))).alias(BAD_COL)
    return ts.cast(pl.Datetime("ns", "UTC")).alias("ts"), ids, bad


def _venue() -> pl.Expr:
    code = pl.col("exchange").str.strip_chars()
    return code.replace_strict(EXCHANGES, default=code, return_dtype=pl.String).alias("exchange")


def _quotes(path: Path, day: dt.date, opts: ReaderOptions) -> Iterator[Chunk]:
    numeric = {"bidprice": pa.float64(), "bidsize": pa.float64(), "offerprice": pa.float64(),
               "offersize": pa.float64(), "sequencenumber": pa.int64()}
    ts, seq, bad = _when(day, "seq")
    empty_side = ((pl.col("bidprice") == 0) & (pl.col("bidsize") == 0)) | (
        (pl.col("offerprice") == 0) & (pl.col("offersize") == 0))
    for df in _batches(path, day, QUOTE_FIELDS, numeric, opts):
        # A side without a quote: the dataset's quotes are two-sided (SPEC §1.3), so the venue's
        # previous quote stays its latest (METHODOLOGY: a venue's latest quote).
        one_sided = df.filter(empty_side.fill_null(False)).height
        if one_sided:
            opts.dropped[ONE_SIDED] += one_sided
            df = df.filter(~empty_side.fill_null(False))
        yield Chunk("quotes", df.select(
            ts, _venue(), pl.col("symbol").str.strip_chars().alias("sym"),
            pl.col("bidprice").alias("bid"), pl.col("offerprice").alias("ask"),
            (pl.col("bidsize") * ROUND_LOT).alias("bsize"), (pl.col("offersize") * ROUND_LOT).alias("asize"),
            seq, ROW_COL, bad), path.name)


def _trades(path: Path, day: dt.date, opts: ReaderOptions) -> Iterator[Chunk]:
    numeric = {"tradevolume": pa.float64(), "tradeprice": pa.float64(), "sequencenumber": pa.int64()}
    ts, trade_id, bad = _when(day, "trade_id")
    for df in _batches(path, day, TRADE_FIELDS, numeric, opts):
        regular = pl.col("tradecorrectionindicator").str.strip_chars().fill_null("00") == "00"
        corrected = df.filter(~regular).height
        if corrected:
            opts.dropped[CORRECTED] += corrected
        yield Chunk("trades", df.filter(regular).select(
            ts, _venue(), pl.col("symbol").str.strip_chars().alias("sym"), pl.lit(None, pl.String).alias("side"),
            pl.col("tradeprice").alias("price"), pl.col("tradevolume").alias("amount"),
            trade_id, ROW_COL, bad), path.name)
