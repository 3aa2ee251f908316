"""The market dataset's generator (SPEC §1.3): determinism whatever the workers, the pinned hash,
the layout and manifest, every invariant, a trade at its venue's quote, and the stylised facts
(activity by rank, venues per instrument, an NBBO that changes venue and now and then locks,
volatility clustering, bursty arrivals, heavy-tailed round-lot sizes)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from tests.conftest import MARKET_TINY, MARKET_TINY_HASH
from tickbench.cli import app
from tickbench.data.dataset import Dataset, DatasetError, hash_table
from tickbench.datasets.base import generate
from tickbench.datasets.market import calendar as mc
from tickbench.datasets.market import generator as mk
from tickbench.datasets.market.schema import MARKET_SCHEMAS

runner = CliRunner()
SCALE, SEED, N = float(MARKET_TINY["scale"]), int(MARKET_TINY["seed"]), int(MARKET_TINY["universe"])


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _all(ds: Dataset, table: str) -> pl.DataFrame:
    return pl.concat([pl.read_parquet(f).with_columns(day=pl.lit(f.parent.name)) for f in ds.files(table)])


def test_calendar_and_universe() -> None:
    assert len(mc.DAYS) == 20 and mc.DAYS[0].isoformat() == "2024-01-02" and mc.DAYS[-1].isoformat() == "2024-01-30"
    assert "2024-01-15" not in {d.isoformat() for d in mc.DAYS} and all(d.weekday() < 5 for d in mc.DAYS)
    assert mc.d_day().isoformat() == "2024-01-16"
    assert [mc.sym_of(r, 1000) for r in (1, 1000)] == ["S0001", "S1000"]
    assert mc.sym_of(7, 10_000) == "S00007"
    assert [mc.venue_count(r) for r in (1, 25, 26, 50, 51, 800, 801, 10_000)] == [8, 8, 7, 7, 6, 3, 2, 2]
    # About 50 M quotes and 5 M trades over the 20 days at SF 1 with 1,000 instruments.
    assert sum(mc.quotes_per_day(r, 1.0) for r in range(1, 1001)) * 20 == pytest.approx(50e6)
    assert sum(mc.trades_per_day(r, 1.0) for r in range(1, 1001)) * 20 == pytest.approx(5e6)
    assert mc.rank_blocks(1000) == [(1, 1), (2, 4), (5, 16), (17, 64), (65, 256), (257, 1000)]
    assert mc.rank_blocks(100_000)[-1] == (65_537, 100_000)


def test_tiny_market_hash_is_pinned(market_tiny: Dataset) -> None:
    assert market_tiny.manifest.content_hash == MARKET_TINY_HASH


def test_same_bytes_with_one_job_and_on_a_cluster(market_tiny_dir: Path, tmp_path: Path) -> None:
    """The fixture used --jobs 2; --jobs 1 and --cluster local:2 write every file identically."""
    one = generate(tmp_path / "one", SCALE, SEED, jobs=1, dataset="market", universe=N)
    assert one.content_hash == MARKET_TINY_HASH
    assert _files(tmp_path / "one") == _files(market_tiny_dir)
    pytest.importorskip("distributed", reason="the cluster extra (pip install 'tickbench[cluster]') is not installed")
    res = runner.invoke(app, ["generate", "--dataset", "market", "--universe", str(N), "--scale", str(SCALE),
                              "--seed", str(SEED), "--cluster", "local:2", "--out", str(tmp_path / "cl")])
    assert res.exit_code == 0, res.output
    assert res.output.strip().splitlines()[-1] == MARKET_TINY_HASH
    assert _files(tmp_path / "cl") == _files(market_tiny_dir)


@pytest.mark.slow
def test_scale_0_05_universe_1000_is_deterministic_across_jobs_and_cluster(tmp_path: Path) -> None:
    pytest.importorskip("distributed", reason="the cluster extra (pip install 'tickbench[cluster]') is not installed")
    outs = {}
    for name, how in (("j1", ["--jobs", "1"]), ("j2", ["--jobs", "2"]), ("cl", ["--cluster", "local:2"])):
        res = runner.invoke(app, ["generate", "--dataset", "market", "--universe", "1000", "--scale", "0.05",
                                  "--seed", "7", *how, "--out", str(tmp_path / name)])
        assert res.exit_code == 0, res.output
        outs[name] = res.output.strip().splitlines()[-1]
    assert outs["j1"] == outs["j2"] == outs["cl"]
    assert _files(tmp_path / "j1") == _files(tmp_path / "j2") == _files(tmp_path / "cl")
    from tickbench.datasets.base import validate

    assert validate(tmp_path / "j2").ok


def test_layout_and_manifest(market_tiny: Dataset) -> None:
    m = market_tiny.manifest
    assert market_tiny.kind == "market" and m.universe == N and market_tiny.universe == N
    assert m.calendar == mc.calendar_dict()
    assert m.params == {"D": "2024-01-16", "W": [d.isoformat() for d in mc.DAYS[:5]],
                        "M": [d.isoformat() for d in mc.DAYS], "bulk_day": "2024-01-16"}
    raw = json.loads((market_tiny.root / "manifest.json").read_text())
    assert raw["kind"] == "market" and raw["universe"] == N
    blocks = mc.rank_blocks(N)
    for table in ("quotes", "trades"):
        entries = [p for p in m.partitions if p["table"] == table]
        assert len(entries) == 20 * len(blocks)
        for e in entries:
            lo, hi = blocks[e["block"]]
            assert e["path"] == f"{table}/{e['day']}/block-{e['block']}.parquet"
            assert e["ranks"] == [lo, hi] and e["syms"] == [mc.sym_of(lo, N), mc.sym_of(hi, N)]
            assert {"rows", "bytes", "csv_bytes", "hash"} <= set(e)
    inst = market_tiny.instruments()
    assert inst.columns == MARKET_SCHEMAS["instruments"].names and inst.height == N
    assert inst["sym"].to_list() == [mc.sym_of(r, N) for r in range(1, N + 1)]
    assert set(m.csv) == {"quotes", "trades"}
    assert [m.csv[t]["path"] for t in ("quotes", "trades")] == [f"csv/{t}_2024-01-16.csv" for t in ("quotes", "trades")]
    # files() finds a symbol's part file; every part holds every venue.
    assert market_tiny.files("quotes", ["2024-01-16"], mc.sym_of(3, N)) == [
        market_tiny.root / "quotes/2024-01-16/block-1.parquet"]
    assert len(market_tiny.files("trades", ["2024-01-16"], exchange="XNAS")) == len(blocks)


def test_paper_manifests_keep_their_form(tiny: Dataset) -> None:
    raw = json.loads((tiny.root / "manifest.json").read_text())
    assert "kind" not in raw and "universe" not in raw and "calendar" not in raw
    assert tiny.kind == "paper"
    with pytest.raises(DatasetError, match="no instruments table"):
        tiny.instruments()


def test_a_block_regenerates_alone(market_tiny: Dataset) -> None:
    entry = next(p for p in market_tiny.manifest.partitions if p["table"] == "quotes" and p["block"] == 2)
    block = mc.Block(mc.DAYS[[d.isoformat() for d in mc.DAYS].index(entry["day"])], 2, *entry["ranks"])
    data = mk.generate_block(SEED, block, N, SCALE)
    assert hash_table(data.quotes) == entry["hash"]


def test_rates_depend_on_rank_alone() -> None:
    """A larger universe adds quieter instruments; an instrument's rows are the same in both."""
    for rank in (3, 70):
        small = mk.generate_unit(SEED, 4, mc.instrument(SEED, rank, 100), 0.05)
        large = mk.generate_unit(SEED, 4, mc.instrument(SEED, rank, 10_000), 0.05)
        for name in ("q_ts", "q_ex", "q_bid", "q_ask", "q_bsize", "q_seq", "t_ts", "t_price", "t_id"):
            assert np.array_equal(getattr(small, name), getattr(large, name)), name


def test_quote_invariants(market_tiny: Dataset) -> None:
    q = _all(market_tiny, "quotes").join(market_tiny.instruments(), on="sym")
    assert (q["bid"] < q["ask"]).all(), "a venue never locks or crosses itself"
    assert (q["bid"] > 0).all() and (q["bsize"] > 0).all() and (q["asize"] > 0).all()
    for col in ("bid", "ask"):
        x = q[col] / q["tick"]
        assert ((x - x.round()).abs() < 1e-6).all(), f"{col} on the tick grid"
    for col in ("bsize", "asize"):
        assert (q[col] == q[col].round()).all(), f"{col} on the lot grid (whole shares)"
    t = q["ts"].cast(pl.Int64)
    start = pl.col("day").str.to_date().cast(pl.Datetime("ns")).cast(pl.Int64) + mc.SESSION_OPEN_S * 10**9
    inside = q.select((t >= start) & (t < start + mc.SESSION_S * 10**9)).to_series()
    assert inside.all(), "every quote inside its day's session"
    # seq unique and increasing with ts per (exchange, sym), across days; rows by sym, ts, exchange, seq.
    by_stream = q.sort("exchange", "sym", "ts", "seq")
    assert by_stream.group_by("exchange", "sym").agg(ok=(pl.col("seq").diff().drop_nulls() > 0).all())["ok"].all()
    for f in market_tiny.files("quotes", ["2024-01-16"]):
        part = pl.read_parquet(f)
        assert part.equals(part.sort("sym", "ts", "exchange", "seq"))


def test_trade_invariants_and_trades_at_their_venue_quote(market_tiny: Dataset) -> None:
    t = _all(market_tiny, "trades").join(market_tiny.instruments(), on="sym")
    assert set(t["side"].unique()) == {"buy", "sell"}
    assert (t["amount"] > 0).all() and (t["amount"] == t["amount"].round()).all()
    x = t["price"] / t["tick"]
    assert ((x - x.round()).abs() < 1e-6).all()
    ok = t.sort("exchange", "sym", "ts", "trade_id").group_by("exchange", "sym").agg(
        ok=(pl.col("trade_id").diff().drop_nulls() > 0).all())
    assert ok["ok"].all(), "trade_id unique and increasing with ts per (exchange, sym)"
    # A buy executes at its venue's ask and a sell at its bid: the venue's latest quote by (ts, seq)
    # with ts <= the trade's ts, on that day.
    q = _all(market_tiny, "quotes").sort("ts", "seq")
    lookup = q.group_by("exchange", "sym", "ts").agg(pl.all().sort_by("seq").last()).sort("ts")
    joined = t.select("ts", "exchange", "sym", "side", "price").sort("ts").join_asof(
        lookup.select("ts", "exchange", "sym", "bid", "ask", qts="ts"), on="ts", by=["exchange", "sym"],
        strategy="backward", check_sortedness=False)
    assert joined["qts"].null_count() == 0, "every trade has its venue's quote before it"
    assert (joined["qts"].dt.date() == joined["ts"].dt.date()).all()
    want = pl.when(pl.col("side") == "buy").then(pl.col("ask")).otherwise(pl.col("bid"))
    assert joined.select((pl.col("price") == want).all()).item()
    # Some trades share a timestamp across venues (a sweep), and some several prints at one venue.
    same_ts = t.group_by("sym", "ts").agg(n=pl.col("exchange").n_unique(), k=pl.len())
    assert (same_ts["n"] > 1).any() and (same_ts["k"] > same_ts["n"]).any()


def test_venues_column_matches_the_data(market_tiny: Dataset) -> None:
    q = _all(market_tiny, "quotes").group_by("sym").agg(n=pl.col("exchange").n_unique(), ex=pl.col("exchange").unique())
    inst = market_tiny.instruments().join(q, on="sym").sort("rank")
    assert (inst["n"] == inst["venues"]).all()
    assert inst.select(pl.col("ex").list.contains(pl.col("primary")).all()).item()
    assert inst.filter(pl.col("rank") <= 25)["venues"].to_list() == [8] * 25
    assert inst["venues"].to_list() == [mc.venue_count(r) for r in range(1, N + 1)]
    prices = _all(market_tiny, "quotes").group_by("sym").agg(pl.col("bid").median())["bid"]
    assert prices.min() < 5 and prices.max() > 100, "prices span about 1 to 500 across the universe"


def test_activity_falls_with_rank_and_tail_days_without_trades(market_tiny: Dataset) -> None:
    m = market_tiny.manifest
    quotes = sum(p["rows"] for p in m.partitions if p["table"] == "quotes")
    trades = sum(p["rows"] for p in m.partitions if p["table"] == "trades")
    expected_q = sum(mc.quotes_per_day(r, SCALE) for r in range(1, N + 1)) * 20
    expected_t = sum(mc.trades_per_day(r, SCALE) for r in range(1, N + 1)) * 20
    assert quotes == pytest.approx(expected_q, rel=0.15) and trades == pytest.approx(expected_t, rel=0.15)
    per_sym = _all(market_tiny, "quotes").group_by("sym").len().sort("sym")["len"].to_numpy()
    ranks = np.arange(1, N + 1)
    slope = np.polyfit(np.log(ranks), np.log(per_sym), 1)[0]
    assert -1.3 < slope < -0.9, f"activity ~ rank^-1.1 (fitted slope {slope:.2f})"
    traded = _all(market_tiny, "trades").group_by("sym", "day").len()
    assert traded.height < 20 * N, "some tail instrument-days have no trade"


def test_nbbo_changes_venue_and_now_and_then_locks(market_tiny: Dataset) -> None:
    from tickbench.datasets.market.reference import nbbo_steps

    q = pl.concat([pl.read_parquet(f) for f in market_tiny.files("quotes", [d.isoformat() for d in mc.DAYS[:5]])])
    steps = nbbo_steps(q.filter(pl.col("sym") == mc.sym_of(1, N)))
    changes = steps.filter("changed")
    locked = (changes["nbo"] <= changes["nbb"]).mean()
    assert 0 < locked < 0.2, f"locked or crossed at {locked:.1%} of NBBO changes"
    best = (q.filter(pl.col("sym") == mc.sym_of(1, N)).sort("ts", "exchange", "seq")
            .join(steps.select("ts", "exchange", "seq", "nbb"), on=["ts", "exchange", "seq"])
            .filter(pl.col("bid") == pl.col("nbb")))
    assert best["exchange"].n_unique() >= 5, "the best bid is set by many venues"


def test_stylised_facts(market_tiny: Dataset) -> None:
    sym = mc.sym_of(1, N)
    q = _all(market_tiny, "quotes").filter(pl.col("sym") == sym)
    inst = market_tiny.instruments().row(0, named=True)
    mid = (q.filter(pl.col("exchange") == inst["primary"]).sort("ts")
           .group_by_dynamic("ts", every="1m").agg(mid=((pl.col("bid") + pl.col("ask")) / 2).last()))
    r = np.diff(np.log(mid["mid"].to_numpy()))
    a = np.abs(r) - np.abs(r).mean()
    acf = float((a[1:] * a[:-1]).mean() / (a * a).mean())
    assert acf > 0.05, f"volatility clusters: |returns| autocorrelated (got {acf:.3f})"
    t = _all(market_tiny, "trades").filter(pl.col("sym") == sym)
    per_min = t.group_by(pl.col("ts").dt.truncate("1m")).len()["len"].to_numpy()
    assert per_min.var() / per_min.mean() > 2, "bursty arrivals: over-dispersed counts per minute"
    x = t["amount"].to_numpy()
    assert ((x - x.mean()) ** 4).mean() / x.var() ** 2 - 3 > 10, "heavy-tailed sizes"
    common = t["amount"].value_counts().sort("count", descending=True)["amount"].to_list()[:3]
    assert common[0] == 100.0 and set(common) <= {100.0, 200.0, 300.0, 500.0}, "round lots cluster"
    assert (x < 100).mean() > 0.1, "odd lots"


def test_csv_day_matches_its_parquet(market_tiny: Dataset) -> None:
    for table, key in (("quotes", "seq"), ("trades", "trade_id")):
        csv = pl.read_csv(market_tiny.csv_file(table), try_parse_dates=True)
        parts = pl.concat([pl.read_parquet(f) for f in market_tiny.files(table, ["2024-01-16"])])
        assert csv.columns == parts.columns and csv.height == parts.height
        assert csv.equals(csv.sort("ts", "sym", "exchange", key)), "time order, then sym, exchange, id"
        assert csv[key].sort().equals(parts[key].sort())


def test_universe_10000_at_a_small_scale(tmp_path: Path) -> None:
    """The tail block of a 10,000-instrument universe: five-digit symbols, two venues each, many
    instrument-days without a trade, every row valid."""
    block = mc.Block(mc.DAYS[3], 7, 4097, 10_000)
    data = mk.generate_block(SEED, block, 10_000, 0.05)
    q = pl.from_arrow(data.quotes)
    t = pl.from_arrow(data.trades)
    assert isinstance(q, pl.DataFrame) and isinstance(t, pl.DataFrame)
    assert q["sym"].str.len_chars().unique().to_list() == [6] and q["sym"].min() >= "S04097"
    assert q.group_by("sym").agg(pl.col("exchange").n_unique())["exchange"].unique().to_list() == [2]
    assert q["sym"].n_unique() == 10_000 - 4096, "every instrument quotes every day"
    assert t["sym"].n_unique() < 0.5 * (10_000 - 4096)
    assert (q["bid"] < q["ask"]).all()


@pytest.mark.slow
def test_a_universe_past_4096_generates_and_validates(tmp_path: Path) -> None:
    """4,097 instruments: every block size of a large universe, the last one cut at a single rank
    (the cost is per instrument-day, so not 10,000: README's table has that one's figures)."""
    from tickbench.datasets.base import validate

    m = generate(tmp_path / "d", 0.002, SEED, jobs=2, dataset="market", universe=4_097)
    assert m.universe == 4_097 and mc.rank_blocks(4_097)[-2:] == [(1_025, 4_096), (4_097, 4_097)]
    assert len(mc.rank_blocks(4_097)) == 8
    report = validate(tmp_path / "d")
    assert report.ok, [s.describe() for s in report.samples]


def test_cli_options(tmp_path: Path, market_tiny: Dataset) -> None:
    def run(*args: str) -> tuple[int, str]:
        res = runner.invoke(app, list(args))
        return res.exit_code, res.output

    code, out = run("generate", "--universe", "50", "--scale", "0.01", "--out", str(tmp_path / "a"))
    assert code == 2 and "--universe applies to --dataset market" in out
    code, out = run("generate", "--dataset", "market", "--symbols", "3", "--out", str(tmp_path / "a"))
    assert code == 2 and "--symbols applies to --dataset paper" in out
    code, out = run("generate", "--dataset", "market", "--universe", "0", "--out", str(tmp_path / "a"))
    assert code == 2 and "--universe 0: must be in [1, 100,000]" in out
    code, out = run("generate", "--dataset", "options", "--out", str(tmp_path / "a"))
    assert code == 2 and "--dataset options" in out
    assert not (tmp_path / "a").exists()
    # An existing market dataset is reused; another universe in the same place is refused.
    code, out = run("generate", "--dataset", "market", "--universe", str(N), "--scale", str(SCALE), "--seed",
                    str(SEED), "--out", str(market_tiny.root))
    assert code == 0 and out.strip().splitlines()[-1] == MARKET_TINY_HASH
    code, out = run("generate", "--dataset", "market", "--universe", "200", "--scale", str(SCALE), "--out",
                    str(market_tiny.root))
    assert code == 2 and "holds a different dataset (market" in out and "universe 100" in out


def test_paper_suites_refuse_a_market_dataset(market_tiny: Dataset, tmp_path: Path) -> None:
    from tickbench.datasets.paper.params import query_params

    with pytest.raises(DatasetError, match=r"market dataset.*paper dataset"):
        query_params(market_tiny.params, SEED)
    res = runner.invoke(app, ["run", "--engines", "duckdb", "--data", str(market_tiny.root), "--out",
                              str(tmp_path / "r")])
    assert res.exit_code == 2
    assert "--suite published runs on the paper dataset" in res.output and "holds a market dataset" in res.output
    assert not (tmp_path / "r").exists()
