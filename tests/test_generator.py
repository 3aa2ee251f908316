"""The generator: determinism, the pinned hash, every invariant of SPEC §1, and the
stylised facts of SPEC §1.2 (volatility clustering, bursty arrivals, heavy tails, venues that
lead and lag)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.conftest import TINY_HASH, TINY_SCALE, TINY_SEED
from tickbench.data.dataset import Dataset, hash_table
from tickbench.data.schema import TRADES_SCHEMA
from tickbench.datasets.base import generate
from tickbench.datasets.paper import calendar as cal
from tickbench.datasets.paper.generator import generate_partition
from tickbench.datasets.paper.schema import BOOK_SCHEMA

BIDS = [f"b{i}price" for i in range(1, 21)]
ASKS = [f"a{i}price" for i in range(1, 21)]
SIZES = [f"{s}{i}size" for s in "ba" for i in range(1, 21)]


def test_tiny_hash_is_pinned(tiny: Dataset) -> None:
    assert tiny.manifest.content_hash == TINY_HASH


def test_hash_does_not_depend_on_jobs(tmp_path: Path, tiny: Dataset) -> None:
    one = generate(tmp_path / "one", TINY_SCALE, TINY_SEED, jobs=1)
    assert one.content_hash == tiny.manifest.content_hash  # the fixture used jobs=2
    for a, b in zip(one.partitions, tiny.manifest.partitions, strict=True):
        assert a["hash"] == b["hash"]
        assert (tmp_path / "one" / a["path"]).read_bytes() == (tiny.root / b["path"]).read_bytes()


def test_another_seed_gives_another_dataset() -> None:
    part = next(p for p in cal.partitions(0.001) if p.sym == "ETH-USD")
    inst = cal.instrument("ETH-USD")
    a = generate_partition(1, part, inst)
    b = generate_partition(2, part, inst)
    assert hash_table(a.book) != hash_table(b.book)


def test_a_partition_regenerates_alone(tiny: Dataset) -> None:
    entry = next(p for p in tiny.manifest.partitions if p["table"] == "book" and p["sym"] == "BTC-USD")
    part = next(p for p in cal.partitions(TINY_SCALE) if p.day.isoformat() == entry["day"]
                and p.sym == entry["sym"] and p.exchange == entry["exchange"])
    data = generate_partition(TINY_SEED, part, cal.instrument(part.sym))
    assert hash_table(data.book) == entry["hash"]


def test_schema_and_partition_layout(tiny: Dataset) -> None:
    days = {p["day"] for p in tiny.manifest.partitions}
    assert len(days) == 32  # 30-day period + multi-exchange day + bulk-load day
    multi = {p["exchange"] for p in tiny.manifest.partitions if p["day"] == cal.MULTI_DAY.isoformat()}
    assert multi == set(cal.VENUES)
    t = pl.read_parquet(tiny.files("trades", ["2022-06-18"], "BTC-USD")[0])
    b = pl.read_parquet(tiny.files("book", ["2022-06-18"], "BTC-USD")[0])
    assert t.columns == TRADES_SCHEMA.names
    assert b.columns == BOOK_SCHEMA.names
    assert t.schema["ts"] == pl.Datetime("ns", "UTC")


def test_row_counts_follow_the_published_rates(tiny: Dataset) -> None:
    month = {d.isoformat() for d in cal.month_days()}
    rows = {(p["table"], p["sym"]): 0 for p in tiny.manifest.partitions}
    for p in tiny.manifest.partitions:
        if p["day"] in month:
            rows[(p["table"], p["sym"])] += p["rows"]
    # SF 0.01 of the published 30-day counts, within 10 %.
    for (table, sym), published in {("trades", "BTC-USD"): 8.81e6, ("book", "BTC-USD"): 15.66e6,
                                    ("trades", "ETH-USD"): 10.01e6, ("book", "ETH-USD"): 14.06e6,
                                    ("book", "USDT-USD"): 0.92e6}.items():
        assert rows[(table, sym)] == pytest.approx(published * TINY_SCALE, rel=0.1)
    bulk = tiny.manifest.csv
    assert bulk["trades"]["rows"] == pytest.approx(1_000_000 * TINY_SCALE, rel=0.1)
    assert bulk["book"]["rows"] == pytest.approx(1_500_000 * TINY_SCALE, rel=0.1)


def _each_partition(ds: Dataset, table: str) -> list[pl.DataFrame]:
    return [pl.read_parquet(f) for f in ds.files(table)]


def test_book_invariants(tiny: Dataset) -> None:
    for b in _each_partition(tiny, "book"):
        bid = b.select(BIDS).to_numpy()
        ask = b.select(ASKS).to_numpy()
        assert (np.diff(bid, axis=1) < 0).all(), "bids strictly decreasing"
        assert (np.diff(ask, axis=1) > 0).all(), "asks strictly increasing"
        assert (bid[:, 0] < ask[:, 0]).all(), "uncrossed"
        assert (b.select(SIZES).to_numpy() > 0).all(), "sizes > 0"
        ts = b["ts"].cast(pl.Int64).to_numpy()
        assert (np.diff(ts) > 0).all(), "time-ordered with unique snapshot ts"
        assert b["exchange"].n_unique() == 1 and b["sym"].n_unique() == 1


def _on_grid(values: np.ndarray, decimals: int) -> bool:
    scaled = values * 10**decimals
    return bool(np.all(np.abs(scaled - np.rint(scaled)) < 1e-6 * np.maximum(1, np.abs(scaled)) * 1e-3))


def test_prices_on_tick_grid_and_sizes_on_lot_grid(tiny: Dataset) -> None:
    for sym in ("BTC-USD", "ETH-USD", "USDT-USD"):
        inst = cal.instrument(sym)
        b = pl.read_parquet(tiny.files("book", ["2022-06-20"], sym)[0])
        t = pl.read_parquet(tiny.files("trades", ["2022-06-20"], sym)[0])
        assert _on_grid(b.select(BIDS + ASKS).to_numpy(), inst.price_decimals)
        assert _on_grid(t["price"].to_numpy(), inst.price_decimals)
        assert _on_grid(t["amount"].to_numpy(), inst.lot_decimals)
        assert _on_grid(b.select(SIZES).to_numpy(), inst.lot_decimals)
        assert (t["amount"] > 0).all()


def test_trades_execute_at_the_touch_of_their_venue(tiny: Dataset) -> None:
    """A buy fills at the ask levels, a sell at the bid levels, of the latest snapshot of its
    own venue at or before the trade: the first fill of each order at the best level."""
    cases = [("2022-06-18", "BTC-USD", "COINBASE"), (cal.MULTI_DAY.isoformat(), "ETH-USD", "KRAKEN")]
    for day, sym, venue in cases:
        t = pl.read_parquet(tiny.files("trades", [day], sym, venue)[0])
        b = pl.read_parquet(tiny.files("book", [day], sym, venue)[0])
        bts = b["ts"].cast(pl.Int64).to_numpy()
        tts = t["ts"].cast(pl.Int64).to_numpy()
        idx = np.searchsorted(bts, tts, side="right") - 1
        assert (idx >= 0).all(), "every trade has a snapshot before it"
        assert not np.isin(tts, bts).any(), "no trade shares a snapshot's timestamp"
        ask = b.select(ASKS).to_numpy()[idx]
        bid = b.select(BIDS).to_numpy()[idx]
        price = t["price"].to_numpy()[:, None]
        buy = (t["side"] == "buy").to_numpy()
        assert (ask[buy] == price[buy]).any(axis=1).all()
        assert (bid[~buy] == price[~buy]).any(axis=1).all()
        first_fill = np.r_[True, tts[1:] != tts[:-1]]
        assert (ask[buy & first_fill, 0] == price[buy & first_fill, 0]).all()
        assert (bid[~buy & first_fill, 0] == price[~buy & first_fill, 0]).all()
        assert set(t["side"].unique()) == {"buy", "sell"}


def test_trade_ids_unique_and_increasing_with_time(tiny: Dataset) -> None:
    t = pl.concat([pl.read_parquet(f) for f in tiny.files("trades", sym="BTC-USD", exchange="COINBASE")])
    t = t.sort("ts", "trade_id")
    ids = t["trade_id"].to_numpy()
    assert (np.diff(ids) > 0).all()
    assert t["ts"].is_sorted()


def test_stylised_facts(tiny: Dataset) -> None:
    month = [d.isoformat() for d in cal.month_days()]
    b = pl.concat([pl.read_parquet(f) for f in tiny.files("book", month, "BTC-USD")])
    mid = ((b["a1price"] + b["b1price"]) / 2).to_numpy()
    # 1-minute returns: volatility clustering = autocorrelated absolute returns.
    minute = (b["ts"].cast(pl.Int64) // 60_000_000_000).to_numpy()
    last = np.r_[minute[1:] != minute[:-1], True]
    r = np.diff(np.log(mid[last]))
    a = np.abs(r) - np.abs(r).mean()
    acf = float((a[1:] * a[:-1]).mean() / (a * a).mean())
    assert acf > 0.05, f"absolute returns are autocorrelated (got {acf:.3f})"
    # Bursty arrivals: counts per minute are over-dispersed (variance >> mean, not Poisson).
    t = pl.read_parquet(tiny.files("trades", ["2022-06-18"], "ETH-USD")[0])
    per_min = np.bincount((t["ts"].cast(pl.Int64) // 60_000_000_000).to_numpy() % 1440, minlength=1440)
    assert per_min.var() / per_min.mean() > 2
    # Heavy-tailed trade sizes: excess kurtosis well above a normal's 0.
    x = t["amount"].to_numpy()
    kurt = ((x - x.mean()) ** 4).mean() / x.var() ** 2 - 3
    assert kurt > 10
    # Round lots cluster: some round sizes are far more frequent than their neighbours.
    assert (x == 0.1).sum() > 5 * max(1, (x == 0.1000001).sum())


def test_nbbo_changes_venue(tiny: Dataset) -> None:
    day = cal.MULTI_DAY.isoformat()
    frames = [pl.read_parquet(f) for f in tiny.files("book", [day], "BTC-USD")]
    assert len(frames) == len(cal.VENUES)
    grid = np.arange(3600, 86_400, 600) * 1_000_000_000 + cal.day_ns(cal.MULTI_DAY)
    leaders = set()
    for t in grid:
        quotes = []
        for f in frames:
            i = int(np.searchsorted(f["ts"].cast(pl.Int64).to_numpy(), t, "right")) - 1
            quotes.append((f["b1price"][i], f["exchange"][0]))
        leaders.add(max(quotes)[1])
    assert len(leaders) >= 2


def test_bulk_csv_matches_its_parquet(tiny: Dataset) -> None:
    csv = pl.read_csv(tiny.csv_file("trades"), try_parse_dates=True)
    pq = pl.concat([pl.read_parquet(f) for f in tiny.files("trades", [cal.BULK_DAY.isoformat()])])
    assert csv.height == pq.height
    assert csv["ts"].is_sorted()
    assert np.allclose(np.sort(csv["price"].to_numpy()), np.sort(pq["price"].to_numpy()), rtol=0, atol=0)
