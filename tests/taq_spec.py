"""Daily TAQ BBO and TRADE files written as NYSE's Daily TAQ Client Specification (version 3)
lays them out, from its field lists, independently of the importer:

* a header row of the fields' names, the BBO file's spelled with underscores, the TRADE file's
  with spaces (``Sale Condition``, ``Trade Volume``, …), as the published files have them;
* one record per line, fields separated by ``|``, every field of the list present (the ones a
  file leaves empty as empty strings); ``Time`` is ``HHMMSS`` and nine digits of nanoseconds in
  New York time of the day in the file's name; BBO sizes in round lots (100 shares), TRADE
  volume in shares; ``Trade Correction Indicator`` ``00`` for a regular trade;
* a last line ``END|<YYYYMMDD>|<records>`` padded with empty fields (a published TRADE file of
  2016-10-24 ends ``END|20161024|27052068|||||||||||||``);
* files named ``EQY_US_ALL_BBO_<YYYYMMDD>`` and ``EQY_US_ALL_TRADE_<YYYYMMDD>``.

Exchange codes are the specification's participant codes of the venues the generated market
dataset quotes on.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from tickbench.data.dataset import Dataset

BBO_FIELDS = [
    "Time", "Exchange", "Symbol", "Bid_Price", "Bid_Size", "Offer_Price", "Offer_Size", "Quote_Condition",
    "Sequence_Number", "National_BBO_Ind", "FINRA_BBO_Indicator", "FINRA_ADF_MPID_Indicator",
    "Quote_Cancel_Correction", "Source_Of_Quote", "Retail_Interest_Indicator", "Short_Sale_Restriction_Indicator",
    "LULD_BBO_Indicator", "SIP_Generated_Message_Identifier", "National_BBO_LULD_Indicator",
    "Participant_Timestamp", "FINRA_ADF_Timestamp", "FINRA_ADF_Market_Participant_Quote_Indicator",
    "Security_Status_Indicator",
]
TRADE_FIELDS = [
    "Time", "Exchange", "Symbol", "Sale Condition", "Trade Volume", "Trade Price", "Trade Stop Stock Indicator",
    "Trade Correction Indicator", "Sequence Number", "Trade Id", "Source of Trade", "Trade Reporting Facility",
    "Participant Timestamp", "Trade Reporting Facility TRF Timestamp", "Trade Through Exempt Indicator",
]
# Participant codes (the specification's "Exchange codes") of the generated dataset's venues.
CODE = {"XNYS": "N", "XNAS": "Q", "ARCX": "P", "BATS": "Z", "EDGX": "K", "IEXG": "V", "MEMX": "U", "XBOS": "B"}
NEW_YORK = "America/New_York"


def ny_time(col: str = "ts") -> pl.Expr:
    """``HHMMSS`` and nine digits of nanoseconds of a UTC timestamp, in New York time."""
    return pl.col(col).dt.convert_time_zone(NEW_YORK).dt.strftime("%H%M%S%9f")


def trailer(day: dt.date, records: int, width: int) -> str:
    """``END|YYYYMMDD|records`` padded with empty fields to ``width`` fields."""
    return "|".join(["END", day.strftime("%Y%m%d"), str(records)] + [""] * (width - 3))


@dataclass(frozen=True)
class Day:
    bbo: Path
    trade: Path
    quotes: int  # two-sided quotes written
    one_sided: int  # one-sided quotes written
    trades: int


def _line(values: dict[str, object], fields: list[str]) -> str:
    return "|".join("" if values.get(f) is None else str(values[f]) for f in fields)


def write_day(ds: Dataset, out: Path, day: str, one_sided_every: int = 0, syms: list[str] | None = None) -> Day:
    """The BBO and TRADE files of ``day`` of the generated market dataset ``ds`` (``syms`` only,
    when given); every ``one_sided_every``-th quote is followed by a one-sided quote of the same
    venue (its bid side empty: price 0, size 0) an instant later, then the venue's quote again."""
    d = dt.date.fromisoformat(day)
    out.mkdir(parents=True, exist_ok=True)
    q = pl.concat([pl.read_parquet(f) for f in ds.files("quotes", [day])])
    t = pl.concat([pl.read_parquet(f) for f in ds.files("trades", [day])])
    if syms is not None:
        q, t = q.filter(pl.col("sym").is_in(syms)), t.filter(pl.col("sym").is_in(syms))
    q = q.sort("sym", "ts", "exchange", "seq").with_columns(_time=ny_time())
    t = t.sort("sym", "ts", "exchange", "trade_id").with_columns(_time=ny_time())
    lines, seq, one_sided = [], 0, 0
    for i, r in enumerate(q.iter_rows(named=True)):
        rec = {"Time": r["_time"], "Exchange": CODE[r["exchange"]], "Symbol": r["sym"], "Bid_Price": r["bid"],
               "Bid_Size": max(round(r["bsize"] / 100), 1), "Offer_Price": r["ask"],
               "Offer_Size": max(round(r["asize"] / 100), 1), "Quote_Condition": "R", "Source_Of_Quote": "C",
               "National_BBO_Ind": "0", "Participant_Timestamp": r["_time"]}
        seq += 1
        lines.append(_line({**rec, "Sequence_Number": seq}, BBO_FIELDS))
        if one_sided_every and i % one_sided_every == one_sided_every - 1:
            # The same venue withdraws its bid and quotes again, both at the same instant.
            seq += 1
            lines.append(_line({**rec, "Bid_Price": "0.00", "Bid_Size": 0, "Sequence_Number": seq}, BBO_FIELDS))
            seq += 1
            lines.append(_line({**rec, "Sequence_Number": seq}, BBO_FIELDS))
            one_sided += 1
    stamp = d.strftime("%Y%m%d")
    bbo = out / f"EQY_US_ALL_BBO_{stamp}"
    bbo.write_text("\n".join([
        "|".join(BBO_FIELDS), *lines, trailer(d, len(lines), len(BBO_FIELDS))]) + "\n")
    trades = [_line({"Time": r["_time"], "Exchange": CODE[r["exchange"]], "Symbol": r["sym"],
                     "Sale Condition": "@   ", "Trade Volume": int(r["amount"]), "Trade Price": r["price"],
                     "Trade Stop Stock Indicator": "N", "Trade Correction Indicator": "00", "Sequence Number": n + 1,
                     "Trade Id": r["trade_id"], "Source of Trade": "C", "Participant Timestamp": r["_time"],
                     "Trade Through Exempt Indicator": "0"}, TRADE_FIELDS)
              for n, r in enumerate(t.iter_rows(named=True))]
    trade = out / f"EQY_US_ALL_TRADE_{stamp}"
    # One empty field more than the header, as the published TRADE file's trailer has.
    trade.write_text("\n".join([
        "|".join(TRADE_FIELDS), *trades, trailer(d, len(trades), len(TRADE_FIELDS) + 1)]) + "\n")
    return Day(bbo, trade, len(lines) - one_sided, one_sided, len(trades))
