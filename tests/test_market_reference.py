"""The market suite's reference (SPEC §2.3) on hand-made quotes and trades whose answers are
worked out by hand: a locked NBBO, several quotes at one timestamp, a venue with no quote yet,
ties between trades of several venues, a symbol with no trades, symbols that do not exist."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from tests.market_fixtures import D, at, write_market
from tickbench.data.dataset import Dataset
from tickbench.datasets.market import calendar as mc
from tickbench.datasets.market import reference as mr
from tickbench.datasets.market.params import MarketParams, Request, UserBlock

TS = pl.Datetime("ns", "UTC")
DAYS = tuple(d.isoformat() for d in mc.DAYS)
W, M = DAYS[:5], DAYS
FIRST = DAYS[0]


def params(**kw: object) -> MarketParams:
    base: dict[str, object] = dict(D=D, W=W, M=M, B=("A", "C"), B50=("A", "B", "ZZZ"), T=(), P=(), UI=(),
                                   VWAB12D=UserBlock(("A",), DAYS[:12]))
    base.update(kw)
    return MarketParams(**base)  # type: ignore[arg-type]


def frame(qid: str, rows: list[tuple[object, ...]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=mr.COLUMNS[qid], orient="row")


def ts(*args: object) -> dt.datetime:
    return dt.datetime(*args, tzinfo=dt.UTC)  # type: ignore[arg-type]


t0 = at(D, "15:00:00")
# A's quotes on D (ts, exchange, sym, bid, ask, bsize, asize, seq), written out of order on purpose.
A_QUOTES = [
    (t0, "XNAS", "A", 10.00, 10.02, 100.0, 200.0, 1),            # step 1: (10.00, 10.02), the first change
    (t0 + 1_000, "BATS", "A", 10.00, 10.02, 300.0, 100.0, 1),    # step 2: same NBBO, no change
    (t0 + 5_000, "XNAS", "A", 10.02, 10.04, 100.0, 100.0, 2),    # step 4 (after ARCX at one ts): locked
    (t0 + 5_000, "ARCX", "A", 10.01, 10.03, 100.0, 100.0, 1),    # step 3: (10.01, 10.02)
    (t0 + 9_000, "BATS", "A", 9.99, 10.03, 100.0, 100.0, 3),     # step 6 (seq 3 after seq 2): no change
    (t0 + 9_000, "BATS", "A", 9.99, 10.03, 500.0, 100.0, 2),     # step 5: (10.02, 10.03)
]


@pytest.fixture
def nbbo_ds(tmp_path: Path) -> Dataset:
    return write_market(tmp_path / "ds", ["A", "B", "C"], A_QUOTES)


def test_nbbo_steps_ties_and_a_locked_change(nbbo_ds: Dataset) -> None:
    got = mr.answer("M-NBBO", nbbo_ds, params())
    # Changes: (10.00, 10.02) spread .02; (10.01, 10.02) .01; (10.02, 10.02) 0, locked; (10.02, 10.03) .01.
    assert_frame_equal(got, frame("M-NBBO", [("A", 4, (0.02 + 0.01 + 0.0 + 0.01) / 4, 1)]), rel_tol=1e-12)
    steps = mr.nbbo_steps(pl.DataFrame(A_QUOTES, schema=["ts", "exchange", "sym", "bid", "ask", "bsize", "asize",
                                                         "seq"], orient="row"))
    assert steps["exchange"].to_list() == ["XNAS", "BATS", "ARCX", "XNAS", "BATS", "BATS"]
    assert steps["seq"].to_list()[-2:] == [2, 3]
    assert steps["changed"].to_list() == [True, False, True, True, True, False]


def test_hibid_and_vwab_over_their_days(tmp_path: Path) -> None:
    rows = [
        (at(FIRST, "15:00:00"), "XNAS", "A", 50.0, 50.1, 100.0, 100.0, 1),  # day 1: in W and M
        (at(DAYS[6], "15:00:00"), "XNAS", "A", 60.0, 60.1, 100.0, 100.0, 1),  # day 7: in M only
        (at(D, "15:00:00"), "XNAS", "A", 40.0, 40.1, 100.0, 100.0, 1),
        (at(D, "16:00:00"), "BATS", "A", 41.0, 41.2, 300.0, 100.0, 1),
        (at(D, "15:00:00"), "XNAS", "B", 99.0, 99.5, 100.0, 100.0, 1),  # B is not in the basket
    ]
    ds = write_market(tmp_path / "ds", ["A", "B", "C"], rows)
    p = params()
    assert_frame_equal(mr.answer("M-HIBID-D", ds, p), frame("M-HIBID-D", [("A", 41.0)]))  # C: no quotes, no row
    assert_frame_equal(mr.answer("M-HIBID-W", ds, p), frame("M-HIBID-W", [("A", 50.0)]))
    assert_frame_equal(mr.answer("M-HIBID-M", ds, p), frame("M-HIBID-M", [("A", 60.0)]))
    assert_frame_equal(mr.answer("M-VWAB-D", ds, p), frame("M-VWAB-D", [("A", (40 * 100 + 41 * 300) / 400)]))
    p12 = params(VWAB12D=UserBlock(("A", "C"), DAYS[:12]))
    assert_frame_equal(mr.answer("M-VWAB-12D", ds, p12), frame("M-VWAB-12D", [
        ("A", dt.date.fromisoformat(FIRST), 50.0), ("A", dt.date.fromisoformat(DAYS[6]), 60.0),
        ("A", dt.date.fromisoformat(D), (40 * 100 + 41 * 300) / 400)]))
    assert mr.answer("M-VWAB-12D", ds, params(VWAB12D=UserBlock(("A",), DAYS[8:20])))["day"].to_list() == [
        dt.date.fromisoformat(D)]  # the window of user 8: trading days 9-20


def test_snapshot_keeps_every_t_and_sym_with_nulls(tmp_path: Path) -> None:
    t = at(D, "15:00:00")
    quotes = [
        (t, "XNAS", "A", 10.00, 10.03, 100.0, 100.0, 1),
        (t + 2_000_000, "XNAS", "A", 10.01, 10.02, 100.0, 100.0, 2),  # exactly at the second probe: counts
        (t + 2_000_000, "BATS", "A", 9.98, 10.01, 100.0, 100.0, 1),
        (t + 2_000_000, "BATS", "A", 9.97, 10.05, 100.0, 100.0, 2),  # same ts, higher seq: BATS' latest
        (t + 9_000_000, "ARCX", "A", 10.10, 10.11, 100.0, 100.0, 1),  # after both probes
    ]
    trades = [
        (t + 1_000, "XNAS", "A", "buy", 10.03, 100.0, 7),
        (t + 1_000, "ARCX", "A", "sell", 10.00, 50.0, 9),  # same ts: ARCX before XNAS (bytes): XNAS is last
        (t + 3_000_000, "XNAS", "A", "buy", 10.02, 10.0, 8),  # after the second probe
    ]
    ds = write_market(tmp_path / "ds", ["A", "B", "C"], quotes, trades)
    probes = (t - 1_000, t + 2_000_000)
    got = mr.answer("M-SNAP", ds, params(T=probes))
    p1, p2 = (ts(2024, 1, 16, 14, 59, 59, 999_999), ts(2024, 1, 16, 15, 0, 0, 2_000))
    want = frame("M-SNAP", [
        (p1, "A", None, None, None, None), (p1, "C", None, None, None, None),
        (p2, "A", 10.03, 100.0, 10.01, 10.02), (p2, "C", None, None, None, None),
    ])
    assert_frame_equal(got, want)


def test_theoretical_pnl_marks_the_own_venue_at_ts_plus_h(tmp_path: Path) -> None:
    t = at(D, "15:00:00")
    s = 1_000_000_000
    quotes = [
        (t, "XNAS", "A", 10.00, 10.02, 100.0, 100.0, 1),
        (t + s, "XNAS", "A", 10.04, 10.06, 100.0, 100.0, 2),  # exactly at ts + 1 s: included
        (t + 5 * s, "BATS", "A", 20.00, 20.02, 100.0, 100.0, 1),  # another venue: never the mark
        (t + 59 * s, "XNAS", "A", 9.90, 9.92, 100.0, 100.0, 3),
        (t + 59 * s, "XNAS", "A", 9.80, 9.84, 100.0, 100.0, 4),  # same ts, higher seq: the latest
    ]
    trades = [
        (t, "XNAS", "A", "buy", 10.02, 100.0, 1),
        (t + 2 * s, "XNAS", "A", "sell", 10.04, 50.0, 2),
        (t + 3 * s, "EDGX", "A", "buy", 10.05, 10.0, 1),  # EDGX never quotes A: no mark, no rows
    ]
    ds = write_market(tmp_path / "ds", ["A", "B"], quotes, trades)
    p = params(P=(("EDGX", "A", 1), ("XNAS", "A", 1), ("XNAS", "A", 2)))
    got = mr.answer("M-THEOPL", ds, p)
    want = frame("M-THEOPL", [
        ("XNAS", "A", 1, 1, 100 * (10.05 - 10.02)), ("XNAS", "A", 1, 10, 100 * (10.05 - 10.02)),
        ("XNAS", "A", 1, 60, 100 * (9.82 - 10.02)), ("XNAS", "A", 1, 300, 100 * (9.82 - 10.02)),
        ("XNAS", "A", 2, 1, -50 * (10.05 - 10.04)), ("XNAS", "A", 2, 10, -50 * (10.05 - 10.04)),
        ("XNAS", "A", 2, 60, -50 * (9.82 - 10.04)), ("XNAS", "A", 2, 300, -50 * (9.82 - 10.04)),
    ])
    assert_frame_equal(got, want, rel_tol=1e-12)


def _stats_trades() -> list[tuple[object, ...]]:
    t = at(D, "15:00:00")
    return [
        (t, "XNAS", "A", "buy", 10.0, 100.0, 5),
        (t, "BATS", "A", "sell", 9.0, 300.0, 9),  # same ts: BATS before XNAS, so A opens at 9.0
        (t + 1_000, "XNAS", "A", "buy", 11.0, 100.0, 6),
        (t + 1_000, "XNAS", "A", "buy", 12.0, 100.0, 7),  # same ts and venue: id 7 is last, A closes at 12.0
        (t + 60_000_000_000, "XNAS", "B", "buy", 20.0, 10.0, 1),  # B: one trade, sd null
    ]


def test_stats_keeps_one_trade_groups_with_null_sd(tmp_path: Path) -> None:
    ds = write_market(tmp_path / "ds", ["A", "B", "C"], [], _stats_trades())
    got = mr.answer("M-STATS", ds, params())
    prices, amounts = [10.0, 9.0, 11.0, 12.0], [100.0, 300.0, 100.0, 100.0]
    mean = sum(prices) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in prices) / 3)
    vwap = sum(p * a for p, a in zip(prices, amounts, strict=True)) / sum(amounts)
    want = frame("M-STATS", [("A", 4, 600.0, vwap, 9.0, 12.0, 9.0, 12.0, sd),
                             ("B", 1, 10.0, 20.0, 20.0, 20.0, 20.0, 20.0, None)])  # C: no trades, no row
    assert_frame_equal(got, want, rel_tol=1e-12)


def test_stats_ui_windows_are_half_open(tmp_path: Path) -> None:
    ds = write_market(tmp_path / "ds", ["A", "B", "C"], [], _stats_trades())
    t = at(D, "15:00:00")
    ui = (Request(("A", "C"), t + 1_000, t + 60_000_000_000),  # A's last two trades; C none
          Request(("B",), t, t + 60_000_000_000),  # B's trade is at the end: excluded
          Request(("A", "B"), t, t + 60_000_000_001))
    got = mr.answer("M-STATS-UI", ds, params(UI=ui))
    sd2 = math.sqrt(((11 - 11.5) ** 2 + (12 - 11.5) ** 2) / 1)
    assert got["req"].to_list() == [0, 2, 2]
    assert got["sym"].to_list() == ["A", "A", "B"]
    assert got.row(0) == (0, "A", 2, 200.0, 11.5, 11.0, 12.0, 11.0, 12.0, pytest.approx(sd2))
    assert got.row(2) == (2, "B", 1, 10.0, 20.0, 20.0, 20.0, 20.0, 20.0, None)
    assert got.schema == pl.Schema(mr.COLUMNS["M-STATS-UI"])


def test_asof_spread_skips_trades_without_a_quote_and_missing_symbols(tmp_path: Path) -> None:
    t = at(D, "15:00:00")
    quotes = [
        (t, "XNAS", "A", 10.00, 10.02, 100.0, 100.0, 1),
        (t + 5_000, "XNAS", "A", 10.00, 10.04, 100.0, 100.0, 2),
        (t + 5_000, "BATS", "B", 5.00, 5.02, 100.0, 100.0, 1),
    ]
    trades = [
        (t, "XNAS", "A", "buy", 10.02, 100.0, 1),  # the quote at the same ts: mid 10.01
        (t + 5_000, "XNAS", "A", "sell", 10.00, 100.0, 2),  # mid 10.02
        (t - 1_000, "BATS", "B", "buy", 5.02, 10.0, 1),  # before BATS' first quote of B: skipped
        (t + 6_000, "XNAS", "B", "buy", 5.02, 10.0, 1),  # XNAS never quotes B: skipped
    ]
    ds = write_market(tmp_path / "ds", ["A", "B", "C"], quotes, trades)
    got = mr.answer("M-ASOF", ds, params(B50=("A", "B", "C", "NOPE")))
    eff = (2 * 0.01 / 10.01 + 2 * 0.02 / 10.02) / 2
    assert_frame_equal(got, frame("M-ASOF", [("A", 2, eff)]), rel_tol=1e-12)


def test_ohlcv_volume_curve_and_top_n(tmp_path: Path) -> None:
    trades = [
        (at(D, "14:30:00"), "XNAS", "A", "buy", 10.0, 100.0, 1),
        (at(D, "14:34:59", 999_999), "XNAS", "A", "buy", 11.0, 100.0, 2),
        (at(D, "14:35:00"), "BATS", "A", "sell", 9.5, 50.0, 1),
        (at(D, "20:59:59"), "XNAS", "A", "buy", 12.0, 20.0, 3),
        (at(FIRST, "14:36:00"), "XNAS", "A", "buy", 10.0, 30.0, 1),  # another day: same volume-curve bucket
    ]
    trades += [(at(D, "16:00:00"), "XNAS", f"S{i:02d}", "buy", float(i), 100.0, 1) for i in range(1, 23)]
    trades += [(at(D, "16:00:00"), "XNAS", "T22", "buy", 22.0, 100.0, 1)]  # ties S22 on notional
    syms = ["A", *(f"S{i:02d}" for i in range(1, 23)), "T22"]
    ds = write_market(tmp_path / "ds", syms, [], trades)
    p = params(B=("A",), B50=("A", "NOPE"))
    assert_frame_equal(mr.answer("M-OHLCV", ds, p), frame("M-OHLCV", [
        ("A", ts(2024, 1, 16, 14, 30), 10.0, 11.0, 10.0, 11.0, 200.0),
        ("A", ts(2024, 1, 16, 14, 35), 9.5, 9.5, 9.5, 9.5, 50.0),
        ("A", ts(2024, 1, 16, 20, 55), 12.0, 12.0, 12.0, 12.0, 20.0)]))
    assert_frame_equal(mr.answer("M-VOLCURV", ds, p), frame("M-VOLCURV", [
        ("A", 0, 200.0 / 20), ("A", 5, 80.0 / 20), ("A", 385, 20.0 / 20)]))
    top = mr.answer("M-TOPN", ds, p)
    assert top["rank"].to_list() == list(range(1, 21))
    # A: 10*100 + 11*100 + 9.5*50 + 12*20 = 2815; then S22 and T22 at 2200 each, by sym
    assert top["sym"].to_list()[:4] == ["A", "S22", "T22", "S21"]
    assert top["notional"].to_list()[:2] == [2815.0, 2200.0] and top.schema == pl.Schema(mr.COLUMNS["M-TOPN"])
    assert "S03" not in top["sym"].to_list()  # 24 instruments traded on D: the four smallest are left out


def test_last_quote_over_the_month_by_ts_then_seq(tmp_path: Path) -> None:
    quotes = [
        (at(FIRST, "15:00:00"), "XNAS", "A", 1.0, 1.1, 1.0, 2.0, 1),
        (at(FIRST, "15:00:00"), "BATS", "A", 2.0, 2.1, 1.0, 2.0, 1),  # BATS quotes A on day 1 only
        (at(D, "15:00:00"), "XNAS", "A", 3.0, 3.1, 1.0, 2.0, 5),
        (at(D, "15:00:00"), "XNAS", "A", 4.0, 4.1, 3.0, 4.0, 6),  # same ts, higher seq: the latest
        (at(DAYS[2], "20:00:00"), "XNAS", "B", 7.0, 7.5, 1.0, 1.0, 1),
    ]
    ds = write_market(tmp_path / "ds", ["A", "B", "C"], quotes)
    assert_frame_equal(mr.answer("M-LAST", ds, params()), frame("M-LAST", [
        ("A", "BATS", ts(2024, 1, 2, 15), 2.0, 1.0, 2.1, 2.0),
        ("A", "XNAS", ts(2024, 1, 16, 15), 4.0, 3.0, 4.1, 4.0),
        ("B", "XNAS", ts(2024, 1, 4, 20), 7.0, 1.0, 7.5, 1.0)]))


def test_no_rows_give_empty_answers_with_the_spec_columns(tmp_path: Path) -> None:
    ds = write_market(tmp_path / "ds", ["A", "B", "C"])
    p = params(T=(at(D, "15:00:00"),), P=(("XNAS", "A", 1),), UI=(Request(("A",), at(D, "15:00:00"),
                                                                         at(D, "16:00:00")),))
    for qid in mr.QUERIES:
        got = mr.answer(qid, ds, p)
        assert got.schema == pl.Schema(mr.COLUMNS[qid]), qid
        assert got.height == (2 if qid == "M-SNAP" else 0), qid


@pytest.mark.parametrize("qid", mr.QUERIES)
def test_generated_answers_have_the_spec_columns_and_order(market_tiny: Dataset, market_tiny_params: MarketParams,
                                                           qid: str) -> None:
    got = mr.answer(qid, market_tiny, market_tiny_params)
    assert got.schema == pl.Schema(mr.COLUMNS[qid])
    assert got.height > 0
    assert got.equals(got.sort(list(mr.SORT[qid])))


def test_generated_nbbo_by_hand(market_tiny: Dataset, market_tiny_params: MarketParams) -> None:
    """M-NBBO against a plain loop over the quotes of two basket symbols."""
    p = market_tiny_params
    got = {r["sym"]: r for r in mr.answer("M-NBBO", market_tiny, p).iter_rows(named=True)}
    for sym in p.B[:2]:
        rows = (pl.read_parquet([str(f) for f in market_tiny.files("quotes", [p.D])])
                .filter(pl.col("sym") == sym).sort("ts", "exchange", "seq").iter_rows(named=True))
        latest: dict[str, tuple[float, float]] = {}
        before: tuple[float, float] | None = None
        changes, spreads, locked = 0, [], 0
        for r in rows:
            latest[r["exchange"]] = (r["bid"], r["ask"])
            now = (max(b for b, _ in latest.values()), min(a for _, a in latest.values()))
            if now != before:
                changes += 1
                spreads.append(now[1] - now[0])
                locked += now[1] <= now[0]
            before = now
        assert got[sym]["n_changes"] == changes
        assert got[sym]["n_locked"] == locked
        assert got[sym]["mean_spread"] == pytest.approx(sum(spreads) / len(spreads), rel=1e-12)
