"""The whole-market layouts (issue 35): Polars' per-day frames and ArcticDB's cross-section answer
M-LAST, M-STATS and M-TOPN from one read of a day, and M-LAST's walk back to earlier days finds
the pairs that did not quote on M's last day (DataFusion's M-LAST joins each pair's last day of
M to that day's quotes, so such a pair must still be found). In the generated tiny market every
(sym, exchange) pair quotes on every day, so the suite test never walks back; here the last
day's quotes of a few instruments' venues are taken out (and one instrument quotes on one venue
only on M's first day), and each engine's answers are checked against the reference as the run
checks them."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.market_fixtures import write_market
from tickbench.data.dataset import Dataset
from tickbench.datasets.market.params import market_params
from tickbench.datasets.market.reference import answer
from tickbench.engines.registry import adapter, availability
from tickbench.verify import compare, normalize

QUERIES = ("M-LAST", "M-STATS", "M-TOPN")


@pytest.fixture(scope="module")
def thinned(market_tiny: Dataset, tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    """The tiny market with the last day's quotes of four instruments dropped on all venues but
    one (their other venues' latest quotes lie on earlier days), and one instrument's quotes
    kept only on M's first day and one venue."""
    quotes = pl.concat([pl.read_parquet(f) for f in market_tiny.files("quotes")])
    trades = pl.concat([pl.read_parquet(f) for f in market_tiny.files("trades")])
    syms = market_tiny.instruments()["sym"].to_list()
    days = quotes["ts"].dt.date()
    last, first = days.max(), days.min()
    thin, lone = syms[10:14], syms[20]
    keep_venue = quotes.filter(pl.col("sym").is_in(thin)).group_by("sym").agg(pl.col("exchange").min())
    kept = dict(keep_venue.iter_rows())
    drop = (pl.col("sym").is_in(thin) & (pl.col("ts").dt.date() == last)
            & (pl.col("exchange") != pl.col("sym").replace_strict(kept, default=None)))
    lone_venue = quotes.filter(pl.col("sym") == lone)["exchange"].min()
    drop_lone = (pl.col("sym") == lone) & ((pl.col("ts").dt.date() != first) | (pl.col("exchange") != lone_venue))
    quotes = quotes.filter(~drop & ~drop_lone)
    assert quotes.filter(pl.col("sym") == lone).height > 0
    qrows = quotes.select("ts", "exchange", "sym", "bid", "ask", "bsize", "asize", "seq")
    trows = trades.select("ts", "exchange", "sym", "side", "price", "amount", "trade_id")
    as_ns = [pl.col("ts").dt.epoch("ns")]
    return write_market(tmp_path_factory.mktemp("thinned"), syms,
                        quotes=qrows.with_columns(as_ns).rows(), trades=trows.with_columns(as_ns).rows())


@pytest.mark.parametrize("engine", ["polars", "datafusion", pytest.param("arcticdb", marks=pytest.mark.slow)])
def test_whole_market_queries_verify_with_pairs_missing_on_the_last_day(
        engine: str, thinned: Dataset, tmp_path: Path) -> None:
    if not (avail := availability(engine)).available:
        pytest.skip(f"{engine} not available here: {avail.reason}")
    params = market_params(thinned, 7)
    e = adapter(engine, tmp_path / engine, thinned, params)
    e.start()
    try:
        e.load()
        for qid in QUERIES:
            expected = answer(qid, thinned, params)
            got = pl.from_arrow(e.run_query(qid))
            assert isinstance(got, pl.DataFrame)
            verdict = compare(normalize(got, expected), expected)  # as the run verifies
            assert verdict.ok, f"{engine} {qid}: {verdict.reason}"
        last = pl.from_arrow(e.run_query("M-LAST"))
        assert isinstance(last, pl.DataFrame)
        # the walk back was needed: some pairs' latest quote lies before M's last day
        assert last["ts"].dt.date().n_unique() > 1
    finally:
        e.stop()
