"""The market suite's parameters (SPEC §2.3) and their params.json (SPEC §4)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tickbench.data.dataset import Dataset, DatasetError
from tickbench.datasets.market import calendar as mc
from tickbench.datasets.market.params import (
    MarketParams,
    MarketParamsError,
    basket_size,
    check_users,
    decile_shares,
    draw_b50,
    draw_basket,
    draw_block,
    draw_requests,
    draw_times,
    generated_names,
    iso_ns,
    market_params,
    parse_iso_ns,
    read_params_json,
    session_ns,
    write_params_json,
)

DAYS = tuple(d.isoformat() for d in mc.DAYS)
D = "2024-01-16"


@pytest.mark.parametrize(("n", "size", "shares"), [
    (1000, 10, [1] * 10), (10_000, 100, [10] * 10), (1550, 15, [2] * 5 + [1] * 5), (100, 10, [1] * 10)])
def test_basket_is_an_equal_share_of_each_decile(n: int, size: int, shares: list[int]) -> None:
    assert basket_size(n) == size and decile_shares(n) == shares
    b = draw_basket(7, generated_names(n))
    assert len(b) == size == len(set(b)) and list(b) == sorted(b)
    ranks = [int(s[1:]) for s in b]
    deciles = [(r - 1) * 10 // n for r in ranks]
    assert [deciles.count(k) for k in range(10)] == shares
    assert draw_basket(7, generated_names(n)) == b and draw_basket(8, generated_names(n)) != b


def test_b50_holds_45_instruments_and_5_that_do_not_exist() -> None:
    b50 = draw_b50(7, generated_names(1000))
    assert len(set(b50)) == 50 and list(b50) == sorted(b50)
    real = [s for s in b50 if 1 <= int(s[1:]) <= 1000]
    assert len(real) == 45 and all(len(s) == 5 for s in real)
    assert len([s for s in b50 if int(s[1:]) > 1000]) == 5
    with pytest.raises(MarketParamsError, match="universe 40"):
        draw_b50(7, generated_names(40))


def test_times_and_requests_lie_in_the_session() -> None:
    lo, hi = session_ns(D)
    t = draw_times(7, D)
    assert len(set(t)) == 10 and list(t) == sorted(t) and all(lo <= x < hi and x % 1000 == 0 for x in t)
    assert draw_times(7, D, user=1) != t
    reqs = draw_requests(7, generated_names(1000), D)
    assert len(reqs) == 10
    for r in reqs:
        assert len(r.syms) == 10 == len(set(r.syms))
        assert lo <= r.start < r.end <= hi and 60 * 10**9 <= r.end - r.start <= mc.SESSION_S * 10**9
    names = generated_names(1000)
    lengths = sorted(r.end - r.start for r in draw_requests(7, names, D) + draw_requests(7, names, D, user=1))
    assert lengths[0] < 30 * 60 * 10**9 < lengths[-1], "log-uniform: short and long windows"


def test_one_hundred_users_cover_a_universe_of_1000_exactly() -> None:
    blocks = [draw_block(7, generated_names(1000), DAYS, i) for i in range(100)]
    syms = [s for b in blocks for s in b.syms]
    assert len(syms) == 1000 == len(set(syms)) and set(syms) == {mc.sym_of(r, 1000) for r in range(1, 1001)}
    assert blocks[0].days == DAYS[:12] and blocks[8].days == DAYS[8:20] and blocks[9].days == DAYS[:12]
    assert blocks[3] == draw_block(7, generated_names(1000), DAYS, 3), "a block does not depend on the user count"
    with pytest.raises(MarketParamsError, match=r"101 users needs 101 disjoint blocks of 10 instruments \(1,010\); "
                                                r"the universe has 1,000"):
        draw_block(7, generated_names(1000), DAYS, 100)
    with pytest.raises(MarketParamsError, match=r"100 users .* the universe has 500 \(at most 50 users here"):
        check_users(100, 500)
    check_users(100, 1000)


def test_market_params_of_a_dataset(market_tiny: Dataset, market_tiny_params: MarketParams) -> None:
    p = market_tiny_params
    assert p.D == D and DAYS[:5] == p.W and p.M == DAYS
    assert 0 < len(p.P) <= 100 and list(p.P) == sorted(p.P) and len(set(p.P)) == len(p.P)
    trades = pl.concat([pl.read_parquet(f) for f in market_tiny.files("trades", [D])])
    ids = set(trades.select("exchange", "sym", "trade_id").iter_rows())
    assert set(p.P) <= ids and {s for _, s, _ in p.P} <= set(p.B)
    assert market_params(market_tiny, 7) == p
    other = market_params(market_tiny, 7, user=3)
    assert (other.B, other.B50, other.P) == (p.B, p.B50, p.P), "B, B50 and P are the run's"
    assert other.T != p.T and other.UI != p.UI and other.VWAB12D.days == DAYS[3:15]
    assert not set(other.VWAB12D.syms) & set(p.VWAB12D.syms)


def test_paper_dataset_has_no_market_params(tiny: Dataset) -> None:
    with pytest.raises(DatasetError, match="market suite runs on a market dataset"):
        market_params(tiny, 7)


def test_params_json_has_the_spec_form_and_reads_back(market_tiny_params: MarketParams, tmp_path: Path) -> None:
    p = market_tiny_params
    path = tmp_path / "answers" / "duckdb" / "params.json"
    write_params_json(path, p)
    raw = json.loads(path.read_text())
    assert list(raw) == ["D", "W", "M", "B", "B50", "T", "P", "UI", "VWAB12D"]
    assert raw["D"] == D and raw["W"] == list(DAYS[:5]) and raw["M"] == list(DAYS)
    assert all(len(t) == len("2024-01-16T15:04:05.123456789Z") and t.endswith("Z") for t in raw["T"])
    assert raw["P"][0] == list(p.P[0]) and isinstance(raw["P"][0][2], int)
    assert set(raw["UI"][0]) == {"syms", "from", "to"} and set(raw["VWAB12D"]) == {"syms", "days"}
    assert read_params_json(path) == p
    user = tmp_path / "answers" / "duckdb" / "users" / "2" / "params.json"
    write_params_json(user, p)
    assert read_params_json(user, user=2).user == 2
    # An imported calendar's session and venues are written and read back; the generated ones are implicit.
    imported = dataclasses.replace(p, session=(3600, 7200), venues=("XNYS", "LTSE"))
    write_params_json(path, imported)
    raw = json.loads(path.read_text())
    assert raw["session"] == {"open_s": 3600, "close_s": 7200} and raw["venues"] == ["XNYS", "LTSE"]
    assert read_params_json(path) == imported and imported.bindings()["venues"] == ["XNYS", "LTSE"]
    (tmp_path / "bad.json").write_text('{"D": "2024-01-16"}')
    with pytest.raises(MarketParamsError, match=r"not a market suite params\.json"):
        read_params_json(tmp_path / "bad.json")


def test_iso_times_round_trip() -> None:
    for ns in (0, 1_705_415_400_000_000_000, 1_705_415_400_123_456_789):
        assert parse_iso_ns(iso_ns(ns)) == ns
    assert iso_ns(1_705_415_400_123_456_789) == "2024-01-16T14:30:00.123456789Z"
    assert parse_iso_ns("2024-01-16T14:30:00.5+00:00") == 1_705_415_400_500_000_000
    with pytest.raises(ValueError, match="ISO-8601 UTC"):
        parse_iso_ns("2024-01-16 14:30:00")


def test_draws_do_not_depend_on_pythons_hash() -> None:
    code = ("from tickbench.datasets.market.params import draw_basket, draw_b50, draw_times, draw_requests, "
            "generated_names; "
            "n = generated_names(1000); print(draw_basket(7, n), draw_b50(7, n), draw_times(7, '2024-01-16'), "
            "draw_requests(7, n, '2024-01-16')[0])")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(outs) == 1
