"""Importing real quotes and trades of many instruments as a market dataset: Daily TAQ and Tardis.dev
files (made from the tiny generated market dataset, in the vendors' formats) import, validate,
and give every M- query's reference answer; bad input is refused or dropped and counted."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.market_fixtures import QUICK_MARKET
from tests.market_import_fixtures import write_taq, write_tardis
from tickbench.data.dataset import Dataset, DatasetError
from tickbench.data.importers import ImportFailure
from tickbench.datasets.base import import_dataset, open_dataset, validate
from tickbench.datasets.market.params import MARKET, dataset_calendar, market_params
from tickbench.datasets.market.reference import REFERENCES, answer
from tickbench.datasets.market.validate import TRADE_WITHOUT_QUOTES, VENUE_CROSSED
from tickbench.engines.registry import availability

DAYS = ["2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05", "2024-01-08"]


def _quotes(ds: Dataset) -> pl.DataFrame:
    return pl.concat([pl.read_parquet(f) for f in ds.files("quotes")]).sort("sym", "ts", "exchange", "seq")


@pytest.fixture(scope="module")
def taq_import(market_tiny: Dataset, tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    root = tmp_path_factory.mktemp("taq")
    files = write_taq(market_tiny, root / "files", DAYS)
    import_dataset("taq", files, root / "data")
    return open_dataset(root / "data")


def test_a_taq_capture_imports_as_a_market_dataset_that_validates(taq_import: Dataset, market_tiny: Dataset) -> None:
    ds = taq_import
    assert ds.kind == MARKET and ds.manifest.source == "import:taq"
    report = validate(ds.root)
    assert report.ok, (report.counts, report.samples[:3])
    inst = ds.instruments()
    original = pl.concat([pl.read_parquet(f) for f in market_tiny.files("quotes", DAYS)])
    assert inst.height == ds.universe == original["sym"].n_unique()
    # New York time of each file's day back to UTC: every quote at its original instant, on its venue.
    mine, theirs = _quotes(ds), original.sort("sym", "ts", "exchange", "seq")
    cols = ["ts", "exchange", "sym", "bid", "ask"]
    assert mine.select(cols).equals(theirs.select(cols))
    cal = dataset_calendar(ds)
    assert cal.days == tuple(DAYS) and (cal.open_s, cal.close_s) == (14 * 3600 + 30 * 60, 21 * 3600)
    assert ds.params == {"D": DAYS[2], "W": DAYS, "M": DAYS, "bulk_day": DAYS[2]}
    # Ranks by trade count; the most traded instrument first.
    trades = pl.concat([pl.read_parquet(f) for f in ds.files("trades")])
    counts = trades.group_by("sym").len().sort("len", "sym", descending=[True, False])
    assert inst.sort("rank")["sym"][0] == counts["sym"][0]


def test_taq_trades_get_their_side_from_the_prevailing_quote(taq_import: Dataset, market_tiny: Dataset) -> None:
    # Generated buys execute at their venue's ask and sells at its bid: the quote rule recovers them.
    mine = pl.concat([pl.read_parquet(f) for f in taq_import.files("trades")])
    theirs = pl.concat([pl.read_parquet(f) for f in market_tiny.files("trades", DAYS)])
    both = mine.join(theirs, on=["ts", "exchange", "sym", "price", "amount"], suffix="_gen")
    assert both.height >= 0.99 * theirs.height
    agree = (both["side"] == both["side_gen"]).mean()
    assert agree is not None and float(agree) >= 0.97  # type: ignore[arg-type]


def test_every_market_reference_answer_computes_on_an_import(taq_import: Dataset) -> None:
    p = market_params(taq_import, 7)
    assert DAYS[2] == p.D and len(p.B) == 10 and len(p.VWAB12D.days) == len(DAYS)
    assert set(p.B) <= set(taq_import.instruments()["sym"].to_list())
    sizes = {q: answer(q, taq_import, p).height for q in REFERENCES}
    assert all(n > 0 for n in sizes.values()), sizes


def test_a_tardis_quotes_and_trades_capture_imports_as_a_market_dataset(market_tiny: Dataset, tmp_path: Path) -> None:
    files = write_tardis(market_tiny, tmp_path / "files", DAYS[:3])
    done = subprocess.run([sys.executable, "-m", "tickbench.cli", "import", "tardis", *map(str, files),
                           "--out", str(tmp_path / "data")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    ds = open_dataset(tmp_path / "data")
    assert ds.kind == MARKET and ds.manifest.source == "import:tardis" and done.stdout.strip().endswith(
        ds.manifest.content_hash)
    assert validate(ds.root).ok
    original = pl.concat([pl.read_parquet(f) for f in market_tiny.files("trades", DAYS[:3])])
    mine = pl.concat([pl.read_parquet(f) for f in ds.files("trades")])
    assert mine.sort("ts", "exchange", "trade_id").equals(original.sort("ts", "exchange", "trade_id"))
    q = _quotes(ds)
    assert q.group_by("exchange", "sym").agg(ok=(pl.col("seq").diff().drop_nulls() > 0).all())["ok"].all()
    assert {q: answer(q, ds, market_params(ds, 7)).height for q in ("M-NBBO", "M-SNAP", "M-ASOF", "M-LAST")}
    run = subprocess.run([sys.executable, "-m", "tickbench.cli", "run", "--engines", "duckdb", "--suite", "market",
                          "--data", str(ds.root), "--repetitions", "1", "--users", "1", *QUICK_MARKET,
                          "--out", str(tmp_path / "run")],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-2000:]
    records = json.loads((tmp_path / "run" / "results.json").read_text())["records"]
    assert all(r["verified"] is True for r in records if r["benchmark"] in REFERENCES)
    assert len([r for r in records if r["benchmark"] in REFERENCES]) == len(REFERENCES)


def test_off_exchange_and_corrected_trades_are_refused_or_dropped_and_counted(market_tiny: Dataset,
                                                                              tmp_path: Path) -> None:
    sym = market_tiny.instruments()["sym"][0]
    extra = [f"120000000000000|D|{sym}|@|100|10.00||00|99999999|X1|E||||",  # a TRF print: D never quotes
             f"120000000000001|N|{sym}|@|100|10.00||12|99999998|X2|C||||"]  # a corrected trade
    files = write_taq(market_tiny, tmp_path / "files", DAYS[:2], extra_trades=extra)
    with pytest.raises(DatasetError, match=f"trades of '{sym}' on 'FINRA'.*--policy drop"):
        import_dataset("taq", files, tmp_path / "refused")
    assert not (tmp_path / "refused").exists()
    result = import_dataset("taq", files, tmp_path / "data", policy="drop")
    assert result.dropped[TRADE_WITHOUT_QUOTES] == 1
    assert result.dropped["corrected or cancelled trade (TAQ correction indicator not 00)"] == 1
    assert validate(tmp_path / "data").ok


def test_a_crossed_quote_or_bad_file_name_is_refused_naming_it(market_tiny: Dataset, tmp_path: Path) -> None:
    files = write_taq(market_tiny, tmp_path / "files", DAYS[:1])
    bbo = next(f for f in files if "BBO" in f.name)
    lines = bbo.read_text().splitlines()
    cols = lines[5].split("|")
    cols[3], cols[5] = cols[5], cols[3]  # bid above ask
    lines[5] = "|".join(cols)
    bbo.write_text("\n".join(lines) + "\n")
    with pytest.raises(ImportFailure, match=re.escape(f"{bbo.name} row 4: {VENUE_CROSSED}")):
        import_dataset("taq", files, tmp_path / "x")
    renamed = bbo.with_name("quotes.txt")
    bbo.rename(renamed)
    with pytest.raises(DatasetError, match=r"quotes\.txt: a TAQ file's name holds its day"):
        import_dataset("taq", [renamed], tmp_path / "y")
    late = bbo.with_name("EQY_US_ALL_BBO_99991231")
    renamed.rename(late)
    with pytest.raises(DatasetError, match="its day 9999-12-31 is outside"):
        import_dataset("taq", [late], tmp_path / "z")
    assert not any(p.name in ("x", "y", "z") for p in tmp_path.iterdir())


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["duckdb", "polars", pytest.param("questdb", marks=pytest.mark.server)])
def test_the_market_suite_runs_on_a_taq_import_with_every_answer_verified(taq_import: Dataset, tmp_path: Path,
                                                                        engine: str) -> None:
    if not (avail := availability(engine)).available:
        pytest.skip(f"{engine} not available here: {avail.reason}")
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "tickbench.cli", "run", "--engines", engine, "--suite", "market",
                           "--data", str(taq_import.root), "--repetitions", "1", "--users", "1", "--ui-users", "0",
                           *QUICK_MARKET, "--out", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    records = json.loads((out / "results.json").read_text())["records"]
    queries = [r for r in records if r["benchmark"] in REFERENCES]
    assert len(queries) == len(REFERENCES)
    assert all(r["status"] == "ok" and r["verified"] is True for r in queries), [
        (r["benchmark"], r["status"], r.get("reason")) for r in queries if not r.get("verified")]
