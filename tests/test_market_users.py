"""The market suite's users (SPEC §2.3's last paragraph): M-VWAB-12D with several users, M-SNAP
and M-STATS-UI with several, each user its own client and parameters, every answer of every
user verified, the per-user figures and the harness's ceiling recorded, on a toy engine (the
runner's machinery); tests/test_market_suite.py runs the users cells on every engine with the
market capability."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.conftest import MARKET_TINY
from tests.market_toy import install_toy
from tickbench.cli import write_reports
from tickbench.data.dataset import Dataset
from tickbench.docs import market_table
from tickbench.market_params import market_params, read_params_json, user_params
from tickbench.market_reference import COLUMNS, answer
from tickbench.results import Record, read_results
from tickbench.run.cell import Protocol
from tickbench.run.session import run
from tickbench.suites.market.ingest_ops import ALONE_MIN_QUERIES, CHECKPOINT_MIN_NS, MarketReplay, quantised
from tickbench.suites.market.users import parse_id, users_id
from tickbench.suites.registry import run_config, suite_options

SEED = int(MARKET_TINY["seed"])


def _run_users(engine: str, ds: Dataset, out: Path, users: tuple[int, ...], ui_users: int,
               repetitions: int = 2) -> dict[str, Record]:
    opts = suite_options(users=users, ui_users=ui_users)
    run(run_config(engines=[engine], data=ds.root, out=out, seed=SEED, suite="market", options=opts,
                   protocol=Protocol(repetitions=repetitions, timeout_s=120, save_answers=out / "answers")))
    return {r.benchmark: r for r in read_results(out / "results.json").records}


@pytest.mark.slow
def test_users_on_the_toy_engine_verify_each_user(market_tiny: Dataset, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    engine = install_toy(tmp_path, monkeypatch)
    out = tmp_path / "run"
    recs = _run_users(engine, market_tiny, out, users=(1, 3, 20), ui_users=2)
    for bench in (users_id("M-VWAB-12D", 1), users_id("M-VWAB-12D", 3), users_id("M-SNAP", 2),
                  users_id("M-STATS-UI", 2)):
        rec = recs[bench]
        assert rec.status == "ok", f"{bench}: {rec.status} {rec.reason}"
        assert rec.verified is True and rec.category == "users"
        f = rec.figures
        _, users = parse_id(bench) or ("", 0)
        assert f["users"] == users and len(f["per_user"]) == users
        assert all(u["n"] == 2 and u["p50_ms"] <= u["p99_ms"] <= u["max_ms"] for u in f["per_user"])
        assert f["queries"] == 2 * users and f["qps"] > 0 and f["spread"] >= 1
        assert f["ceiling_qps"] > 0 and isinstance(f["client_bound"], bool) and f["rss_peak_bytes"] > 0
        assert "own read-only open of the store" in f["model"]
    # 20 users need 20 disjoint blocks of 10 instruments: the universe of 100 has room for 10
    refused = recs[users_id("M-VWAB-12D", 20)]
    assert refused.status == "not_applicable" and "at most 10 users" in refused.reason
    # each further user's parameters and answer are saved, and are that user's own
    for i in (1, 2):
        p = read_params_json(out / "answers" / engine / "users" / str(i) / "params.json", user=i)
        assert p == market_params(market_tiny, SEED, user=i)
        saved = pl.read_parquet(out / "answers" / engine / "users" / str(i) / "M-VWAB-12D.parquet")
        assert saved.columns == list(COLUMNS["M-VWAB-12D"])
        assert saved.height == answer("M-VWAB-12D", market_tiny, p).height
    blocks = [set(read_params_json(out / "answers" / engine / "users" / str(i) / "params.json")
                  .VWAB12D.syms) for i in (1, 2)]
    assert not blocks[0] & blocks[1]
    write_reports(read_results(out / "results.json"), out)
    report = (out / "report.md").read_text()
    users_part = report.split("### Users")[1]
    assert "M-VWAB-12D | toymarket | 3 |" in users_part and "Each user:" in users_part
    assert "chart-market-users" in (out / "report.html").read_text()
    # README's generated market block carries the users table beside the queries'
    results = read_results(out / "results.json")
    absent = [r.model_copy(update={"engine": "absentdb", "status": "unavailable", "verified": None,
                                   "reason": "not available: needs a licence"}) for r in results.records]
    block = market_table([results.model_copy(update={"records": [*absent, *results.records]})], "the command",
                         "the conditions")
    assert "absentdb: not run here (needs a licence)" in block and "| absentdb" not in block
    users_block = block.split("Users (each user's own client")[1]
    assert "| query | engine | users |" in users_block and "| M-VWAB-12D | toymarket | 3 |" in users_block
    assert "harness's own ceiling" in users_block and "During ingest" not in block


@pytest.mark.slow
def test_a_wrong_user_answer_fails_the_cell_naming_the_user(market_tiny: Dataset, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A query that answers user 0 right and every other user with user 0's answer (its block
    and window written into the query): only a check of every user's answer catches it."""
    first = market_params(market_tiny, SEED).VWAB12D
    syms = ", ".join(f"'{s}'" for s in first.syms)
    wrong = {"M-VWAB-12D.sql": "SELECT sym, CAST(make_timestamp(tsn // 1000) AS DATE) AS day, "
             f"sum(bid * bsize) / sum(bsize) AS vwab FROM quotes WHERE sym IN ({syms}) "
             f"AND tsn >= epoch_ns(TIMESTAMP '{first.days[0]}') "
             f"AND tsn < epoch_ns(TIMESTAMP '{first.days[-1]}' + INTERVAL 1 DAY) GROUP BY ALL ORDER BY sym, day;\n"}
    engine = install_toy(tmp_path, monkeypatch, query_override=wrong)
    recs = _run_users(engine, market_tiny, tmp_path / "run", users=(1, 2), ui_users=0, repetitions=1)
    assert recs[users_id("M-VWAB-12D", 1)].status == "ok"
    rec = recs[users_id("M-VWAB-12D", 2)]
    assert rec.status == "wrong" and rec.reason.startswith("user 1 ")


@pytest.mark.slow
def test_a_user_count_the_engine_declares_beyond_it_is_recorded_with_the_reason(
        market_tiny: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = install_toy(tmp_path, monkeypatch,
                         extra_unsupported={"M-VWAB-12D/users=3": "one writer, two readers at most"})
    recs = _run_users(engine, market_tiny, tmp_path / "run", users=(3,), ui_users=0, repetitions=1)
    rec = recs[users_id("M-VWAB-12D", 3)]
    assert rec.status == "unsupported" and rec.reason == "one writer, two readers at most"
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["config"]["options"]["market"]["users"] == [3]


@pytest.mark.slow
def test_queries_during_ingest_on_the_toy_engine_are_verified(market_tiny: Dataset, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """D's first ten minutes replayed into the toy's ingest store by one and two writers while
    two users run M-SNAP over what is visible: every answer during the ingest and alone verified,
    the figures beside the controls and the writers' and the users' ceilings; the toy does not
    declare its writes visible on commit, so its visibility is measured."""
    engine = install_toy(tmp_path, monkeypatch, ingest=True)
    out = tmp_path / "run"
    opts = suite_options(users=(1,), ui_users=2, ingest_rates=(20_000, None), ingest_writers=(1, 2),
                         ingest_minutes=10.0)
    run(run_config(engines=[engine], data=market_tiny.root, out=out, seed=SEED, suite="market", options=opts,
                   protocol=Protocol(repetitions=2, timeout_s=120)))
    recs = {r.benchmark: r for r in read_results(out / "results.json").records}
    for bench in ("M-SNAP/ingest/rate=20000/writers=1", "M-SNAP/ingest/rate=max/writers=2"):
        rec = recs[bench]
        assert rec.status == "ok", f"{bench}: {rec.status} {rec.reason}"
        f = rec.figures
        assert rec.verified is True and rec.category == "during ingest"
        assert 0 < f["written"] == f["planned"] == f["ingest_alone_written"] and f["ingest_ceiling"] > 0
        assert f["throughput"] > 0 and f["ingest_alone_events_per_s"] > 0 and f["ingest_during_over_alone"] > 0
        assert f["alone"]["queries"] >= 2 * ALONE_MIN_QUERIES and f["query_alone_p50_ms"] > 0
        assert f["users_ceiling_qps"] > 0 and f["distinct_probe_sets"] >= 2
        assert f["visible_on_commit"] is False and f["visibility"]["count"] > 0
    write_reports(read_results(out / "results.json"), out)
    assert "During ingest" in (out / "report.md").read_text()
    block = market_table([read_results(out / "results.json")], "the command", "the conditions")
    ingest_block = block.split("M-SNAP during ingest (the same span of day D replayed")[1]
    assert "| engine | rate | writers | span of D |" in ingest_block
    assert f"| {engine} | max | 2 | 10 min · 1,714 ev |" in ingest_block


@pytest.mark.slow
def test_an_engine_that_writes_a_small_part_of_the_replay_still_queries_during_it(
        market_tiny: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A streaming path that takes ~1,000 events/s writes less than an eighth of D's session
    before the replay's cap: the users still run M-SNAP during the ingest (the replay's
    checkpoints halve toward its start), every answer verified, and the cell says the span was
    not all sent."""
    engine = install_toy(tmp_path, monkeypatch, ingest=True, send_delay_s=0.1)
    out = tmp_path / "run"
    opts = suite_options(users=(1,), ui_users=2, ingest_rates=(None,), ingest_writers=(1,), ingest_minutes=390.0,
                         ingest_seconds=2.5, ingest_batch=100)
    run(run_config(engines=[engine], data=market_tiny.root, out=out, seed=SEED, suite="market", options=opts,
                   protocol=Protocol(repetitions=2, timeout_s=120)))
    rec = {r.benchmark: r for r in read_results(out / "results.json").records}["M-SNAP/ingest/rate=max/writers=1"]
    assert rec.status == "ok" and rec.verified is True, f"{rec.status} {rec.reason}"
    f = rec.figures
    assert 0 < f["written"] < f["planned"] / 8, (f["written"], f["planned"])
    assert f["during"]["queries"] > 0 and f["distinct_probe_sets"] >= 2
    assert "events not sent during the queries within 2.5 s" in rec.notes


def test_the_replays_checkpoints_halve_toward_its_start(market_tiny: Dataset) -> None:
    """Checkpoints ascend from at least a second after the open to the replay's end, each the
    end of a prefix of the replay; a watermark binds the latest at or before it."""
    base = market_params(market_tiny, SEED)
    replay = MarketReplay(market_tiny, base, 1_000_000)
    marks = [int(c) for c in replay.checkpoints]
    assert marks == sorted(set(marks)) and marks[-1] == replay.end_ns and len(marks) >= 4
    assert marks[0] >= replay.open_ns + CHECKPOINT_MIN_NS
    for c in marks[:-1]:  # every event up to c is among the first i, and none after
        i = int(np.searchsorted(replay.event_ts, c, side="right"))
        assert i < len(replay) and replay.event_ts[i] == c + 1
    assert quantised(marks[0] - 1, replay) == replay.open_ns
    assert quantised(marks[1], replay) == marks[1] and quantised(marks[2] - 1, replay) == marks[1]
    assert quantised(2**62, replay) == replay.end_ns


def test_an_engine_without_a_market_streaming_path_says_so(market_tiny: Dataset, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    engine = install_toy(tmp_path, monkeypatch)
    out = tmp_path / "run"
    opts = suite_options(users=(1,), ui_users=1, ingest_rates=(None,), ingest_writers=(1,), ingest_seconds=1.0)
    run(run_config(engines=[engine], data=market_tiny.root, out=out, seed=SEED, suite="market", options=opts,
                   protocol=Protocol(repetitions=1, timeout_s=120)))
    rec = next(r for r in read_results(out / "results.json").records if r.benchmark.startswith("M-SNAP/ingest/"))
    assert rec.status == "unsupported" and "no market ingest capability" in rec.reason


def test_a_users_parameters_drawn_from_the_runs_are_its_own(market_tiny: Dataset) -> None:
    """user_params (the runner's, without reading the day's trades again) draws what
    market_params draws for that user; the users' blocks are disjoint."""
    base = market_params(market_tiny, SEED)
    users = [user_params(market_tiny, base, SEED, i) for i in range(4)]
    assert users[0] == base
    assert users[3] == market_params(market_tiny, SEED, user=3)
    blocks = [set(u.VWAB12D.syms) for u in users]
    assert all(not blocks[i] & blocks[j] for i in range(4) for j in range(i + 1, 4))
    assert len({u.T for u in users}) == 4 and len({u.UI for u in users}) == 4
