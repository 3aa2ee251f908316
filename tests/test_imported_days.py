"""Imported real-layout data whose multi-exchange day lies inside the month (issue 17).

The importer derives the parameters from the data, so a one-day import has D = W = M = X, and
recorded data's multi-exchange day usually falls inside its month; generated data never does
(X comes after M). Each engine must load every day once, in date order, with every venue's rows
of it: the same day twice doubles rows, or breaks an engine that appends in time order
(ArcticDB refused it). The datasets are written here in Tardis.dev's layout and imported with
``tickbench import tardis``, then run through the real runner, every answer checked against the
reference."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from tickbench.cli import app
from tickbench.data.dataset import Dataset
from tickbench.datasets.base import open_dataset
from tickbench.datasets.paper.params import QueryParams, query_params
from tickbench.engines.registry import availability, engine_infos
from tickbench.results import read_results
from tickbench.run.cell import Protocol
from tickbench.run.session import run
from tickbench.suites.published import QUERIES
from tickbench.suites.registry import run_config

SEED = 11
SYM = "BTC-USD"
VENUES = ("coinbase", "binance-us", "kraken", "bitstamp", "gemini")
BOOK_EVERY_S = 60
TRADE_EVERY_S = 45
LEVELS = 25  # book_snapshot_25; the importer keeps the top 20


def _write_tardis(out: Path, venue: int, day: str) -> list[Path]:
    """One venue's trades and book_snapshot_25 CSVs for ``day``: a random walk on a 0.5 grid
    over the whole UTC day. Each venue's timestamps are offset by its own few µs, so no two
    venues share one (ties across venues would leave "the latest snapshot" ambiguous)."""
    rng = np.random.default_rng([SEED, venue, dt.date.fromisoformat(day).toordinal()])
    name = VENUES[venue]
    day_us = (dt.date.fromisoformat(day) - dt.date(1970, 1, 1)).days * 86_400 * 10**6
    offset = 7 + 13 * venue

    n = 86_400 // BOOK_EVERY_S
    ts = day_us + offset + np.arange(n, dtype=np.int64) * BOOK_EVERY_S * 10**6
    bid = 20_000.0 + 0.5 * venue + 0.5 * np.cumsum(rng.integers(-2, 3, n))
    ask = bid + 0.5 * rng.integers(1, 4, n)
    book: dict[str, object] = {"exchange": [name] * n, "symbol": [SYM] * n, "timestamp": ts,
                               "local_timestamp": ts + 150}
    for i in range(LEVELS):
        book[f"asks[{i}].price"] = ask + 0.5 * i
        book[f"asks[{i}].amount"] = rng.integers(1, 500, n) / 100
        book[f"bids[{i}].price"] = bid - 0.5 * i
        book[f"bids[{i}].amount"] = rng.integers(1, 500, n) / 100
    book_path = out / f"{name}_book_snapshot_25_{day}_{SYM}.csv"
    pl.DataFrame(book).write_csv(book_path)

    m = 86_400 // TRADE_EVERY_S
    tts = day_us + offset + 3 * 10**6 + np.arange(m, dtype=np.int64) * TRADE_EVERY_S * 10**6
    mid = np.interp(tts, ts, (bid + ask) / 2)
    side = rng.integers(0, 2, m)
    trades = pl.DataFrame({
        "exchange": [name] * m, "symbol": [SYM] * m, "timestamp": tts, "local_timestamp": tts + 150,
        "id": (day_us // 10**6) * 10 + np.arange(m, dtype=np.int64) * 10 + venue,
        "side": np.where(side == 1, "buy", "sell"),
        "price": np.round(mid + np.where(side == 1, 0.25, -0.25), 2),
        "amount": rng.integers(1, 10_000, m) / 1000,
    })
    trades_path = out / f"{name}_trades_{day}_{SYM}.csv"
    trades.write_csv(trades_path)
    return [trades_path, book_path]


def _import(tmp: Path, venue_days: list[tuple[int, str]]) -> Dataset:
    """``tickbench import tardis`` of the files written for each (venue, day)."""
    src = tmp / "tardis"
    src.mkdir()
    files = [f for v, d in venue_days for f in _write_tardis(src, v, d)]
    out = tmp / "ds"
    res = CliRunner().invoke(app, ["import", "tardis", *map(str, files), "--out", str(out), "--policy", "drop"])
    assert res.exit_code == 0, res.output
    ds = open_dataset(out, verify_content=True)
    assert not ds.manifest.extra["import"]["dropped"]
    return ds


@pytest.fixture(scope="module")
def one_day(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    """One day of one venue: D = W = M = X."""
    ds = _import(tmp_path_factory.mktemp("one_day"), [(0, "2024-03-05")])
    p = ds.manifest.params
    assert p["day"] == p["multi_day"] == p["bulk_day"] == "2024-03-05"
    assert p["week"] == p["month"] == ["2024-03-05", "2024-03-05"]
    return ds


@pytest.fixture(scope="module")
def inside(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    """Three days of one venue, and four more venues on the middle day: X inside M, not at
    its end, with five venues while the other days have one."""
    days = ["2024-03-04", "2024-03-05", "2024-03-06"]
    ds = _import(tmp_path_factory.mktemp("inside"), [(0, d) for d in days] + [(v, days[1]) for v in range(1, 5)])
    p = ds.manifest.params
    assert p["month"] == [days[0], days[-1]] and p["multi_day"] == days[1]
    assert {r["exchange"] for r in ds.manifest.partitions if r["day"] == days[1]} == {
        "COINBASE", "BINANCEUS", "KRAKEN", "BITSTAMP", "GEMINI"}
    return ds


def test_load_days_are_each_day_once_in_order(one_day: Dataset, inside: Dataset) -> None:
    assert query_params(one_day.params, SEED).load_days() == ["2024-03-05"]
    assert query_params(inside.params, SEED).load_days() == ["2024-03-04", "2024-03-05", "2024-03-06"]


def test_generated_data_loads_the_same_days_as_before(tiny_params: QueryParams) -> None:
    """Generated data's multi-exchange day comes after its month: the month's 30 days, then it."""
    days = tiny_params.load_days()
    assert days == [*tiny_params.days("month"), tiny_params.multi_day] and len(days) == 31


def _engines(kinds: tuple[str, ...]) -> list[object]:
    out: list[object] = []
    for name, info in engine_infos().items():
        if info.kind in kinds:
            marks = [pytest.mark.slow] + ([pytest.mark.server] if info.kind == "server" else [])
            out.append(pytest.param(name, marks=marks, id=name))
    return out


def _check_run(engine: str, ds: Dataset, out: Path) -> None:
    """Run the published suite on ``engine`` over ``ds``: every query verified, the loaded
    rows those of the load days, each counted once."""
    avail = availability(engine)
    if not avail.available:
        pytest.skip(f"{engine} not available here: {avail.reason}")
    info = engine_infos()[engine]
    run(run_config(engines=[engine], data=ds.root, out=out, seed=SEED,
                  protocol=Protocol(warmup=1, repetitions=1, timeout_s=120, load_repetitions=1)))
    results = read_results(out / "results.json")
    by_id = {r.benchmark: r for r in results.records}
    for q in QUERIES:
        rec = by_id[q.id]
        if q.id in info.unsupported:
            assert rec.status == "unsupported"
            continue
        assert (rec.status, rec.verified) == ("ok", True), f"{engine} {q.id}: {rec.status} {rec.reason}"
        assert rec.rows, f"{q.id}: the reference answer is empty, so the check would prove nothing"
    for bench in ("W", "SE"):
        if bench not in info.unsupported:
            assert by_id[bench].status == "ok", f"{engine} {bench}: {by_id[bench].reason}"
    expected_rows = ds.sizes(query_params(ds.params, SEED).load_days())["rows"]
    assert sum(r["rows"] for r in ds.manifest.partitions) == expected_rows  # every day is a load day
    assert results.environment.engines[engine]["load_rows"] == expected_rows


EMBEDDED = ("embedded", "in-memory")


@pytest.mark.parametrize("engine", _engines(EMBEDDED))
def test_one_day_one_venue_import_verifies(engine: str, one_day: Dataset, tmp_path: Path) -> None:
    _check_run(engine, one_day, tmp_path / "run")


@pytest.mark.parametrize("engine", _engines(EMBEDDED))
def test_multi_venue_day_inside_the_month_verifies(engine: str, inside: Dataset, tmp_path: Path) -> None:
    _check_run(engine, inside, tmp_path / "run")


@pytest.mark.parametrize("engine", _engines(("server",)))
def test_server_engines_on_imported_days(engine: str, one_day: Dataset, inside: Dataset, tmp_path: Path) -> None:
    _check_run(engine, one_day, tmp_path / "one_day")
    _check_run(engine, inside, tmp_path / "inside")
