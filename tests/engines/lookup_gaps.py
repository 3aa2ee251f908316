"""A crafted book for the lookups (O-T, O-NBBO) of engines that read the probes' recent
windows first and look further back only for a probe whose window is empty.

From the tiny dataset's instrument S, rows are cut so that answers lie 30 minutes, hours,
across midnight (the previous day's partition) and 35 hours back; on the multi-exchange day a
venue is silent for the half hour before a probe and another has no row before two probes.
Two probes share a minute, one falls exactly on a snapshot and one precedes every row. An
engine loads :attr:`Gaps.book` its own way, runs O-T and O-NBBO with :attr:`Gaps.params`, and
:meth:`Gaps.check` compares the answers with the latest rows at or before each probe.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass

import polars as pl

from tickbench.data.dataset import Dataset
from tickbench.datasets.paper.params import QueryParams

H, M, S = dt.timedelta(hours=1), dt.timedelta(minutes=1), dt.timedelta(seconds=1)


def ns(t: dt.datetime) -> int:
    """A whole-µs UTC datetime as ns since the epoch."""
    return int(t.timestamp()) * 10**9 + t.microsecond * 1000


def utc(frame: pl.DataFrame) -> pl.DataFrame:
    """Every timestamp column in µs, UTC (an engine's naive timestamps are UTC)."""
    return frame.with_columns(
        (pl.col(c).dt.replace_time_zone("UTC") if frame.schema[c].time_zone is None  # type: ignore[union-attr]
         else pl.col(c).dt.convert_time_zone("UTC")).dt.cast_time_unit("us")
        for c in frame.columns if isinstance(frame.schema[c], pl.Datetime))


@dataclass(frozen=True)
class Gaps:
    book: pl.DataFrame  # S's first three days of the month and its multi-exchange day, cut
    params: QueryParams
    ot: list[dt.datetime]
    nbbo: list[dt.datetime]
    month_gaps: list[tuple[dt.datetime, dt.datetime]]  # (lo, hi]: rows cut before a probe

    @classmethod
    def make(cls, tiny: Dataset, params: QueryParams) -> Gaps:
        day0 = dt.datetime.fromisoformat(params.month[0]).replace(tzinfo=dt.UTC)
        x = dt.datetime.fromisoformat(params.multi_day).replace(tzinfo=dt.UTC)
        d1, d2, sym = day0 + 24 * H, day0 + 48 * H, params.symbol
        month = pl.concat([pl.read_parquet(f) for f in tiny.files("book", params.days("month")[:3], sym)])
        multi = pl.concat([pl.read_parquet(f) for f in tiny.files("book", [params.multi_day], sym)])
        on_row = month.filter(pl.col("ts") > day0 + 5 * H)["ts"][0]
        ot = [day0 + 30 * S, day0 + 2 * H, day0 + 2 * H + 20 * S, on_row, day0 + 8 * H, day0 + 12 * H,
              d1 + 20 * S, d2 + 12 * H, d2 + 13 * H, d2 + 14 * H]
        gaps = [(day0 - S, day0 + M), (day0 + 7.5 * H, day0 + 8 * H), (day0 + 9 * H, day0 + 12 * H),
                (d1 - 30 * S, d1 + 20 * S), (d1 + H, d2 + 12 * H)]
        for lo, hi in gaps:
            month = month.filter(~pl.col("ts").is_between(lo, hi, closed="right"))
        nb_on_row = multi.filter((pl.col("exchange") == "COINBASE") & (pl.col("ts") > x + 4 * H))["ts"][0]
        nbbo = [x + 30 * M, x + 45 * M, x + 2 * H, x + 3 * H, nb_on_row, x + 6 * H, x + 9 * H,
                x + 9 * H + 30 * S, x + 15 * H, x + 23 * H]
        multi = multi.filter(~((pl.col("exchange") == "KRAKEN") & pl.col("ts").is_between(x + 2.5 * H, x + 3 * H))
                             & ~((pl.col("exchange") == "GEMINI") & (pl.col("ts") < x + H)))
        bound = dataclasses.replace(params, ot_times=tuple(ns(t) for t in ot), nbbo_times=tuple(ns(t) for t in nbbo))
        return cls(pl.concat([month, multi]), bound, ot, nbbo, gaps[1:])

    def check(self, got_ot: pl.DataFrame, got_nbbo: pl.DataFrame) -> None:
        """Assert both answers equal the latest rows at or before each probe."""
        got_ot, got_nbbo = utc(got_ot), utc(got_nbbo)
        x = dt.datetime.fromisoformat(self.params.multi_day).replace(tzinfo=dt.UTC)
        month = self.book.filter(pl.col("ts") < x)
        latest = [month.filter(pl.col("ts") <= t).sort("ts").tail(1) for t in self.ot]
        want = [(t, w.row(0, named=True)) for t, w in zip(self.ot, latest, strict=True) if w.height]
        assert len(want) == 9  # the first probe precedes every row: no answer
        assert got_ot["t"].to_list() == [t for t, _ in want]
        for col in ("ts", "b1price", "b1size", "a1price", "a1size"):
            assert got_ot[col].to_list() == [w[col] for _, w in want], col
        assert got_ot["ts"][2] == self.ot[3]  # the probe on a snapshot finds that snapshot
        # the answers of the probes behind a gap lie before it: the look further back found them
        for probe, (lo, _) in zip((self.ot[4], self.ot[5], self.ot[6], self.ot[7]), self.month_gaps, strict=True):
            assert got_ot.filter(pl.col("t") == probe)["ts"].item() <= lo

        multi = self.book.filter(pl.col("ts") >= x)
        rows = []
        for t in self.nbbo:
            last = multi.filter(pl.col("ts") <= t).sort("ts").group_by("exchange").agg(pl.all().last())
            rows.append((t, last["b1price"].max(), last["a1price"].min(), set(last["exchange"])))
        assert "GEMINI" not in rows[0][3] | rows[1][3] and "KRAKEN" in rows[3][3]
        assert got_nbbo["t"].to_list() == self.nbbo
        assert got_nbbo["nbb"].to_list() == [r[1] for r in rows]
        assert got_nbbo["nbo"].to_list() == [r[2] for r in rows]
