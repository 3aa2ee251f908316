"""Real-format files made from a generated market dataset: Daily TAQ BBO and TRADE files (New York
time, pipe-delimited, round-lot quote sizes, a day's sequence numbers, no trade side, the END
trailer) and Tardis.dev ``quotes`` and ``trades`` CSVs, as those vendors publish them."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl

from tickbench.data.dataset import Dataset
from tickbench.data.importers.taq import EXCHANGES, _utc_offset_ns
from tickbench.datasets.market.calendar import EPOCH, NS_PER_DAY

TAQ_CODE = {mic: code for code, mic in sorted(EXCHANGES.items(), reverse=True)}  # XNAS → Q (not T)
ID_STRIDE = 100_000_000  # the generator's: seq and trade_id of day d start at d * stride
QUOTE_HEADER = ("Time|Exchange|Symbol|Bid_Price|Bid_Size|Offer_Price|Offer_Size|Quote_Condition|Sequence_Number|"
                "National_BBO_Ind|FINRA_BBO_Indicator|FINRA_ADF_MPID_Indicator|Quote_Cancel_Correction|"
                "Source_Of_Quote|Retail_Interest_Indicator|Short_Sale_Restriction_Indicator|LULD_BBO_Indicator|"
                "SIP_Generated_Message_Identifier|National_BBO_LULD_Indicator|Participant_Timestamp|"
                "FINRA_ADF_Timestamp|FINRA_ADF_Market_Participant_Quote_Indicator|Security_Status_Indicator")
TRADE_HEADER = ("Time|Exchange|Symbol|Sale_Condition|Trade_Volume|Trade_Price|Trade_Stop_Stock_Indicator|"
                "Trade_Correction_Indicator|Sequence_Number|Trade_Id|Source_of_Trade|Trade_Reporting_Facility|"
                "Participant_Timestamp|Trade_Reporting_Facility_TRF_Timestamp|Trade_Through_Exempt_Indicator")


def _ny_time(day: dt.date) -> pl.Expr:
    """``HHMMSS`` + nine digits of ns of the day in New York time."""
    tod = pl.col("ts").cast(pl.Int64) - (day - EPOCH).days * NS_PER_DAY + _utc_offset_ns(day)
    sec, ns = tod // 1_000_000_000, tod % 1_000_000_000
    two = [(x).cast(pl.String).str.zfill(2) for x in (sec // 3600, sec // 60 % 60, sec % 60)]
    return pl.concat_str([*two, ns.cast(pl.String).str.zfill(9)])


def _numbered(*exprs: pl.Expr | str, frame: pl.DataFrame) -> pl.DataFrame:
    """``frame.select(exprs)`` with the columns named by position (the file has its own header)."""
    return frame.select([(pl.col(e) if isinstance(e, str) else e).alias(f"c{i}") for i, e in enumerate(exprs)])


def write_taq(ds: Dataset, out: Path, days: list[str], extra_trades: list[str] | None = None) -> list[Path]:
    """A BBO and a TRADE file per day of ``days`` (``extra_trades``: raw lines appended to the
    first day's trades, before the trailer)."""
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for n, day in enumerate(days):
        d = dt.date.fromisoformat(day)
        base = (d - EPOCH).days * ID_STRIDE
        q = pl.concat([pl.read_parquet(f) for f in ds.files("quotes", [day])]).sort("ts", "exchange", "seq")
        quotes = _numbered(
            _ny_time(d), pl.col("exchange").replace_strict(TAQ_CODE), "sym", "bid",
            (pl.col("bsize") / 100).ceil().cast(pl.Int64), "ask", (pl.col("asize") / 100).ceil().cast(pl.Int64),
            pl.lit("R"), pl.col("seq") - base, *[pl.lit("")] * 14, frame=q)
        t = pl.concat([pl.read_parquet(f) for f in ds.files("trades", [day])]).sort("ts", "exchange", "trade_id")
        trades = _numbered(
            _ny_time(d), pl.col("exchange").replace_strict(TAQ_CODE), "sym", pl.lit("@"),
            pl.col("amount").cast(pl.Int64), "price", pl.lit(""), pl.lit("00"), pl.col("trade_id") - base,
            pl.col("trade_id").cast(pl.String), pl.lit("C"), *[pl.lit("")] * 4, frame=t)
        stamp = d.strftime("%Y%m%d")
        for name, header, frame, extra in (
            (f"EQY_US_ALL_BBO_{stamp}", QUOTE_HEADER, quotes, []),
            (f"EQY_US_ALL_TRADE_{stamp}", TRADE_HEADER, trades, extra_trades if n == 0 and extra_trades else []),
        ):
            lines = ["|".join("" if v is None else str(v) for v in row) for row in frame.iter_rows()]
            lines += extra
            (out / name).write_text("\n".join([header, *lines, f"END|{stamp}|{len(lines)}"]) + "\n")
            files.append(out / name)
    return files


def write_tardis(ds: Dataset, out: Path, days: list[str]) -> list[Path]:
    """One Tardis ``quotes`` and one ``trades`` CSV (gzip) per day of ``days``, venue ids in
    lower case as Tardis names them, microsecond timestamps, native trade ids."""
    out.mkdir(parents=True, exist_ok=True)
    files = []
    us = (pl.col("ts").cast(pl.Int64) // 1_000)
    for day in days:
        q = pl.concat([pl.read_parquet(f) for f in ds.files("quotes", [day])]).sort("ts", "exchange", "seq")
        q.select(exchange=pl.col("exchange").str.to_lowercase(), symbol="sym", timestamp=us, local_timestamp=us + 50,
                 ask_amount="asize", ask_price="ask", bid_price="bid", bid_amount="bsize").write_csv(
            out / f"all_quotes_{day}.csv")
        t = pl.concat([pl.read_parquet(f) for f in ds.files("trades", [day])]).sort("ts", "exchange", "trade_id")
        t.select(exchange=pl.col("exchange").str.to_lowercase(), symbol="sym", timestamp=us, local_timestamp=us + 50,
                 id="trade_id", side="side", price="price", amount="amount").write_csv(out / f"all_trades_{day}.csv")
        files += [out / f"all_quotes_{day}.csv", out / f"all_trades_{day}.csv"]
    return files
