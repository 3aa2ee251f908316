"""The reference implementation against a second, deliberately plain one (Python loops over
rows) for the queries whose logic has the most room for error: buckets, last-in-bucket with
ties, returns over the previous non-empty bucket, sample standard deviation, as-of lookups."""

from __future__ import annotations

import itertools
import math
import statistics
from collections import defaultdict

import polars as pl
import pytest

from tickbench.data.dataset import Dataset
from tickbench.datasets.paper import reference
from tickbench.datasets.paper.params import QueryParams

MIN = 60 * 10**9


def _rows(ds: Dataset, table: str, days: list[str], sym: str) -> list[dict]:
    return pl.concat([pl.read_parquet(f) for f in ds.files(table, days, sym)]).with_columns(
        pl.col("ts").cast(pl.Int64)).to_dicts()


def _vol(closes: dict[int, float], group: int) -> dict[int, float]:
    keys = sorted(closes)
    by_group: dict[int, list[float]] = defaultdict(list)
    for prev, cur in itertools.pairwise(keys):
        by_group[cur // group * group].append(math.log(closes[cur]) - math.log(closes[prev]))
    return {g: statistics.stdev(v) for g, v in by_group.items() if len(v) >= 2}


def test_vwap_by_hand(tiny: Dataset, tiny_params: QueryParams) -> None:
    num: dict[int, float] = defaultdict(float)
    den: dict[int, float] = defaultdict(float)
    for r in _rows(tiny, "trades", tiny_params.days("day"), tiny_params.symbol):
        b = r["ts"] // MIN * MIN
        num[b] += r["price"] * r["amount"]
        den[b] += r["amount"]
    got = reference.answer("T-VWAP", tiny, tiny_params)
    assert got.columns == ["bucket", "vwap"]
    assert got["bucket"].cast(pl.Int64).to_list() == sorted(num)
    assert got["vwap"].to_list() == pytest.approx([num[b] / den[b] for b in sorted(num)], rel=1e-12)


def test_trade_volatility_by_hand(tiny: Dataset, tiny_params: QueryParams) -> None:
    last: dict[int, tuple[int, int, float]] = {}
    for r in _rows(tiny, "trades", tiny_params.days("day"), tiny_params.symbol):
        b = r["ts"] // (5 * MIN) * (5 * MIN)
        key = (r["ts"], r["trade_id"], r["price"])
        if b not in last or key[:2] > last[b][:2]:
            last[b] = key
    want = _vol({b: v[2] for b, v in last.items()}, 60 * MIN)
    got = reference.answer("C-VT", tiny, tiny_params)
    assert got["hour"].cast(pl.Int64).to_list() == sorted(want)
    assert got["vol"].to_list() == pytest.approx([want[h] for h in sorted(want)], rel=1e-9)


def test_mid_volatility_over_the_week_by_hand(tiny: Dataset, tiny_params: QueryParams) -> None:
    closes: dict[int, tuple[int, float]] = {}
    for r in _rows(tiny, "book", tiny_params.days("week"), tiny_params.symbol):
        b = r["ts"] // (60 * MIN) * (60 * MIN)
        if b not in closes or r["ts"] > closes[b][0]:
            closes[b] = (r["ts"], (r["a1price"] + r["b1price"]) / 2)
    want = _vol({b: v[1] for b, v in closes.items()}, 240 * MIN)
    got = reference.answer("C-VO2", tiny, tiny_params)
    assert got["bucket4h"].cast(pl.Int64).to_list() == sorted(want)
    assert got["vol"].to_list() == pytest.approx([want[h] for h in sorted(want)], rel=1e-9)


def test_nbbo_by_hand(tiny: Dataset, tiny_params: QueryParams) -> None:
    rows = _rows(tiny, "book", tiny_params.days("multi_day"), tiny_params.symbol)
    got = reference.answer("O-NBBO", tiny, tiny_params)
    assert got.height == len(tiny_params.nbbo_times)
    for t, nbb, nbo in got.with_columns(pl.col("t").cast(pl.Int64)).iter_rows():
        latest: dict[str, dict] = {}
        for r in rows:
            if r["ts"] <= t and (r["exchange"] not in latest or r["ts"] > latest[r["exchange"]]["ts"]):
                latest[r["exchange"]] = r
        assert len(latest) == 5
        assert nbb == max(r["b1price"] for r in latest.values())
        assert nbo == min(r["a1price"] for r in latest.values())


def test_every_query_answers_with_spec_columns(tiny: Dataset, tiny_params: QueryParams) -> None:
    from tickbench.suites.published import QUERIES

    for q in QUERIES:
        got = reference.answer(q.id, tiny, tiny_params)
        assert tuple(got.columns) == q.columns, q.id
        assert got.height > 0, q.id
        assert got.sort(list(q.sort_by)).equals(got), f"{q.id} sorted by {q.sort_by}"


def test_top_of_book_as_of_by_hand(tiny: Dataset, tiny_params: QueryParams) -> None:
    rows = _rows(tiny, "book", tiny_params.days("month"), tiny_params.symbol)
    got = reference.answer("O-T", tiny, tiny_params)
    assert got.height == len(tiny_params.ot_times)
    for r in got.with_columns(pl.col("t", "ts").cast(pl.Int64)).iter_rows(named=True):
        want = max((x for x in rows if x["ts"] <= r["t"]), key=lambda x: x["ts"])
        assert r["ts"] == want["ts"]
        assert [r[c] for c in ("b1price", "b1size", "a1price", "a1size")] == [
            want[c] for c in ("b1price", "b1size", "a1price", "a1size")]
