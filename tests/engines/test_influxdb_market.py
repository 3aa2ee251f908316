"""InfluxDB's market tables and query files: names from data are bound parameters, never code;
each quote and trade stays a point of its own (ties on a time get a ``tie`` tag); trades carry
their place in the instrument-day's (ts, exchange, trade_id) order; and the latest quote of a
venue is the one of greatest (ts, seq) even when several share its time, on a real server."""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from tickbench.data.dataset import Dataset
from tickbench.datasets.market.params import MarketParams
from tickbench.datasets.market.reference import answer
from tickbench.engines.influxdb.market import (
    expand,
    flat_bindings,
    parse_market_header,
    quote_lines,
    trade_lines,
)
from tickbench.engines.registry import adapter, availability
from tickbench.run.visibility import wait_settled, wait_visible
from tickbench.verify import compare, normalize

installed = availability("influxdb")
needs_install = pytest.mark.skipif(
    not installed.available, reason=f"influxdb is not installed: {installed.reason}")
T0 = 1_705_415_400_000_000_000  # 2024-01-16 14:30:00 UTC


def test_a_basket_is_an_or_of_bound_parameters() -> None:
    binds = {"b_syms": ['A"B', "C) OR 1=1"], "ui_pair_sym": ["x", "y", "z"], "ui_pair_req": [0, 1, 1],
             "t_times": [dt.datetime(2024, 1, 16, 15)]}
    assert expand("WHERE @in(sym, b_syms)", binds, None) == 'WHERE ("sym" = $b_syms_0 OR "sym" = $b_syms_1)'
    assert expand("@in(sym, ui_pair_sym by ui_pair_req) AND time <= $t_times[]", binds, 0, 1) == \
        '("sym" = $ui_pair_sym_1 OR "sym" = $ui_pair_sym_2) AND time <= $t_times_0'
    flat = flat_bindings(binds)
    assert flat["b_syms_1"] == "C) OR 1=1" and flat["t_times_0"] == T0 + 1_800_000_000_000
    assert flat_bindings({"days": [dt.date(2024, 1, 16)]})["days_0"] == T0 - (14 * 3600 + 1800) * 10**9


def test_header() -> None:
    h = parse_market_header("-- each: t=t_times\n-- key: sym\n-- grid: sym=b_syms\n-- rank: rank=-notional, sym\n"
                            "-- nan: sd\n-- columns: time=ts\nSELECT 1")
    assert h.each == ("t", "t_times") and h.key == ("sym",) and h.grid == ("sym", "b_syms")
    assert h.rank == ("rank", ("-notional", "sym")) and h.nan == ("sd",) and h.renames == {"time": "ts"}


def test_ties_become_tags_and_trades_know_their_place() -> None:
    ts = pl.Series([T0, T0, T0, T0 + 1]).cast(pl.Datetime("ns", "UTC"))
    quotes = pl.DataFrame({"ts": ts, "exchange": "X", "sym": "A B", "bid": [1.0, 1.5, 2.0, 2.5],
                           "ask": 3.0, "bsize": 1.0, "asize": 1.0, "seq": [2, 1, 3, 4]})
    lines = quote_lines(quotes).to_list()
    assert lines[0] == f"quotes,exchange=X,sym=A\\ B,tie=1 bid=1.0,ask=3.0,bsize=1.0,asize=1.0,seq=2i {T0}\n"
    assert [line.split(",tie=")[1].split(" ")[0] for line in lines] == ["1", "0", "2", "0"]
    trades = pl.DataFrame({"ts": ts, "exchange": ["Y", "X", "X", "X"], "sym": "A", "side": "buy",
                           "price": 1.0, "amount": 1.0, "trade_id": [1, 8, 7, 9]})
    ords = {int(line.split("trade_id=")[1].split("i")[0]): line.split("ord=")[1].split("i")[0]
            for line in trade_lines(trades).to_list()}
    assert ords == {7: "0", 8: "1", 1: "2", 9: "3"}  # (ts, exchange, trade_id)


@pytest.fixture
def workdir() -> Iterator[Path]:
    # Not under pytest's tmp_path: influxd may run as an unprivileged user, which must reach it.
    d = Path(tempfile.mkdtemp(prefix="tickbench-influxdb-market-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.server
@needs_install
def test_the_latest_quote_wins_a_tie_on_its_time(market_tiny: Dataset, market_tiny_params: MarketParams,
                                                 workdir: Path) -> None:
    """Quotes of one venue sharing the latest time sit in different ``tie`` series; the latest
    quote (M-LAST, M-SNAP) must be the one of greatest seq, whichever series holds it."""
    from tickbench.engines.influxdb.market import quote_lines as lines

    day = market_tiny_params.D
    quotes = pl.read_parquet(market_tiny.files("quotes", [day]))
    last = quotes.group_by("exchange", "sym").agg(pl.all().sort_by("ts", "seq").last())
    # Two more quotes at each pair's last ts, seqs above its own: the second of greater seq
    # but written first, with the smaller bid.
    extra = pl.concat([last.with_columns(seq=pl.col("seq") + 2, bid=pl.col("bid") - 0.02),
                       last.with_columns(seq=pl.col("seq") + 1, bid=pl.col("bid") - 0.01)]).select(quotes.columns)
    tied = pl.concat([quotes, extra])
    engine = adapter("influxdb", workdir, market_tiny, market_tiny_params)
    engine.start()
    try:
        engine._market_write(engine.db, [lines(tied)], tied.height)  # type: ignore[attr-defined]
        wait_visible(engine)
        wait_settled(engine)
        engine.connect()  # type: ignore[attr-defined]
        got = pl.from_arrow(engine.run_market_query(  # type: ignore[attr-defined]
            "M-LAST", engine.query_text("M-LAST"), None))
        want = tied.group_by("exchange", "sym").agg(pl.all().sort_by("ts", "seq").last()).select(
            "sym", "exchange", "ts", "bid", "bsize", "ask", "asize").sort("sym", "exchange")
        assert compare(normalize(got, want), want).ok  # type: ignore[arg-type]
        assert (got["bid"] == want["bid"]).all()  # type: ignore[index]
    finally:
        engine.stop()


def test_answers_are_shaped_as_the_reference(market_tiny: Dataset, market_tiny_params: MarketParams) -> None:
    """The shape the adapter gives an empty answer: the SPEC's columns and types."""
    from tickbench.engines.influxdb.market import MarketHeader, shape

    table = shape("M-STATS", pl.DataFrame(), MarketHeader())
    ref = answer("M-STATS", market_tiny, market_tiny_params)
    assert table.column_names == ref.columns


def test_a_markout_file_names_its_horizons_and_its_second_round() -> None:
    from tickbench.engines.influxdb.market import THEN

    h = parse_market_header("-- each: trade_id=p_trade_ids\n-- marks: h=1, 10, 60, 300\nSELECT 1\n-- then\nSELECT 2")
    assert h.marks == ("h", (1, 10, 60, 300)) and h.each == ("trade_id", "p_trade_ids")
    assert len(THEN.split("SELECT 1\n-- then\nSELECT 2")) == 2
