"""The market suite's users (SPEC §2.3's last paragraph): M-VWAB-12D with several users, M-SNAP
and M-STATS-UI with several, each user its own client and parameters, every answer of every
user verified, the per-user figures and the harness's ceiling recorded, on a toy engine (the
runner's machinery); tests/test_market_suite.py runs the users cells on every engine that serves
the market dataset."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import psutil
import pytest

from tests.conftest import MARKET_TINY
from tests.market_toy import install_toy
from tickbench.cli import write_reports
from tickbench.data.dataset import Dataset
from tickbench.datasets.market.params import market_params, read_params_json, user_params
from tickbench.datasets.market.reference import COLUMNS, answer
from tickbench.docs import market_table
from tickbench.results import Record, read_results
from tickbench.run.cell import Clients, Protocol
from tickbench.run.engine_process import MemoryBudgetExceeded
from tickbench.run.session import run
from tickbench.suites.market.ingest_ops import ALONE_MIN_QUERIES, CHECKPOINT_MIN_NS, MarketReplay, quantised
from tickbench.suites.market.users import parse_id, users_id
from tickbench.suites.registry import run_config, suite_options

SEED = int(MARKET_TINY["seed"])


def _run_users(engine: str, ds: Dataset, out: Path, users: tuple[int, ...], ui_users: int,
               repetitions: int = 2, users_seconds: float = 0.0) -> dict[str, Record]:
    opts = suite_options(users=users, ui_users=ui_users, users_seconds=users_seconds)
    run(run_config(engines=[engine], data=ds.root, out=out, seed=SEED, suite="market", options=opts,
                   protocol=Protocol(warmup=1, repetitions=repetitions, timeout_s=120, save_answers=out / "answers")))
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
        # at least 20 timed queries per user (2 asked), each user's p10 … max
        assert f["repetitions"] == 20 and f["queries"] == 20 * users and f["qps"] > 0 and f["spread"] >= 1
        assert all(u["n"] == 20 and u["p10_ms"] <= u["p50_ms"] <= u["p90_ms"] <= u["p99_ms"] <= u["max_ms"]
                   for u in f["per_user"])
        assert f["p10_ms"] <= f["p50_ms"] <= f["p90_ms"] <= f["p99_ms"]
        assert f["ceiling_qps"] > 0 and isinstance(f["client_bound"], bool) and f["rss_peak_bytes"] > 0
        assert "a process per user" in f["model"] and "limit" not in f
        # each user a client process of its own, none of them the runner
        pids = [u["pid"] for u in f["per_user"]]
        assert len(set(pids)) == users == f["processes"] and os.getpid() not in pids
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
    assert "| p10 ms | p50 ms | p90 ms | p99 ms |" in users_part.split("Each user:")[1]
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
def test_users_of_an_engine_with_one_open_per_process_are_its_threads_and_none_waits(
        market_tiny: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine that admits one open per process (as chDB): its users are threads of the engine's
    process, each with a connection of its own, the engine's limit recorded; no lock of
    tickbench's serialises them: every user ran its 20 queries, and every user's first started
    before any user's last ended (taking turns one user after another would not)."""
    engine = install_toy(tmp_path, monkeypatch, threads=True)
    recs = _run_users(engine, market_tiny, tmp_path / "run", users=(3,), ui_users=0, repetitions=1)
    rec = recs[users_id("M-VWAB-12D", 3)]
    assert rec.status == "ok" and rec.verified is True, f"{rec.status} {rec.reason}"
    f = rec.figures
    assert f["limit"] == "one open per process (the toy, as chDB)" and f["processes"] == 1
    assert "threads of the engine's process" in f["model"] and "own connection" in f["model"]
    per = f["per_user"]
    assert [u["n"] for u in per] == [20, 20, 20] and len({u["pid"] for u in per}) == 1
    assert max(u["from_s"] for u in per) < min(u["to_s"] for u in per)
    report = tmp_path / "run"
    write_reports(read_results(report / "results.json"), report)
    assert "The engines' own limits: toymarket: one open per process" in (report / "report.md").read_text()


@pytest.mark.slow
def test_users_whose_processes_outgrow_the_memory_budget_run_packed_and_say_so(
        market_tiny: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool of a process per user that outgrows the memory budget (here: any pool of more
    than 2 processes) is stopped, and the cell runs again with two users to a process, each a
    thread with its own client; every user still runs its 20 queries and is verified, and the
    cell and the report say how the users ran and why."""
    engine = install_toy(tmp_path, monkeypatch)
    pools: list[int] = []
    real_run = Clients.run

    def budgeted(self: Clients, timeout: float, msgs: Sequence[dict[str, Any]], **kw: Any) -> list[dict[str, Any]]:
        pools.append(len(self.procs))
        if len(self.procs) > 2:
            self.kill()
            raise MemoryBudgetExceeded(f"{len(self.procs)} client processes and the engine held 99.0 GiB, above "
                                       "the memory budget of 1.0 GiB")
        return real_run(self, timeout, msgs, **kw)

    monkeypatch.setattr(Clients, "run", budgeted)
    recs = _run_users(engine, market_tiny, tmp_path / "run", users=(3,), ui_users=0, repetitions=1)
    rec = recs[users_id("M-VWAB-12D", 3)]
    assert rec.status == "ok" and rec.verified is True, f"{rec.status} {rec.reason}"
    f = rec.figures
    assert pools == [3, 2, 2]  # refused as 3 processes; then the users and the ceiling in 2
    assert f["processes"] == 2 and len({u["pid"] for u in f["per_user"]}) == 2
    assert [u["n"] for u in f["per_user"]] == [20, 20, 20]
    assert f["packed"].startswith("2 users to a process (threads, each with its own client) in 2 processes")
    assert "3 client processes and the engine held 99.0 GiB" in f["packed"]
    out = tmp_path / "run"
    write_reports(read_results(out / "results.json"), out)
    assert "2 users to a process" in (out / "report.md").read_text().split("### Users")[1]


@pytest.mark.slow
@pytest.mark.parametrize("threads", [False, True], ids=["processes", "threads"])
def test_users_start_their_timed_queries_together_once_every_user_is_warm(
        market_tiny: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: bool) -> None:
    """User 1's warm-up takes 1 s (a server's first query on a new connection can): the other
    users, whose 21 queries take milliseconds, wait for it, and every user's timed queries start
    together, in processes of their own (the runner's gate) and as threads of one process."""
    engine = install_toy(tmp_path, monkeypatch, threads=threads, slow_first_s=1.0)
    recs = _run_users(engine, market_tiny, tmp_path / "run", users=(3,), ui_users=0, repetitions=1)
    rec = recs[users_id("M-VWAB-12D", 3)]
    assert rec.status == "ok" and rec.verified is True, f"{rec.status} {rec.reason}"
    per = rec.figures["per_user"]
    assert [u["n"] for u in per] == [20, 20, 20]
    assert max(u["began_s"] for u in per) < 0.5  # they began (warming up) together ...
    starts = [u["from_s"] for u in per]
    assert min(starts) >= 1.0, per  # ... and none timed a query before user 1 was warm
    assert max(starts) - min(starts) < 0.2 and max(starts) < min(u["to_s"] for u in per), per


@pytest.mark.slow
def test_each_users_query_alone_sets_its_own_work_aside(market_tiny: Dataset, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """User i's queries take (i + 1) × 30 ms (their baskets differ in size): the users' medians
    differ 3×, and so do their medians alone, timed one user at a time with no other running; each
    user's slowdown (its median among the users over its median alone) is about 1 for all, as
    sleeping users hinder no one. Measured once per user, shared by the engine's cells."""
    engine = install_toy(tmp_path, monkeypatch, user_work_s=0.03)
    recs = _run_users(engine, market_tiny, tmp_path / "run", users=(1, 3), ui_users=0, repetitions=1)
    f = recs[users_id("M-VWAB-12D", 3)].figures
    assert recs[users_id("M-VWAB-12D", 3)].status == "ok", recs[users_id("M-VWAB-12D", 3)].reason
    per = f["per_user"]
    assert [u["alone_p50_ms"] >= 30 * (i + 1) for i, u in enumerate(per)] == [True] * 3, per
    assert f["spread"] >= 2 and f["alone_spread"] >= 2, f  # the users' own work, 3× nominally
    assert all(u["slowdown"] == u["p50_ms"] / u["alone_p50_ms"] for u in per)
    assert f["slowdown_spread"] < 1.5 < f["spread"], f  # served alike, their own work set aside
    one = recs[users_id("M-VWAB-12D", 1)].figures["per_user"][0]
    assert one["alone_p50_ms"] == per[0]["alone_p50_ms"]  # user 0 alone, measured once
    out = tmp_path / "run"
    write_reports(read_results(out / "results.json"), out)
    users_md = (out / "report.md").read_text().split("### Users")[1]
    assert "largest slowdown / smallest" in users_md and "alone p50 ms" in users_md


@pytest.mark.slow
def test_every_user_runs_until_the_window_ends(market_tiny: Dataset, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """With --users-seconds 1, each user keeps running its query until 1 s after the users'
    common start, 20 times at least: user 0's 10 ms queries many more times than user 2's 30 ms
    ones, and none of them stops early, so every query is timed with every other user running."""
    engine = install_toy(tmp_path, monkeypatch, user_work_s=0.01)
    recs = _run_users(engine, market_tiny, tmp_path / "run", users=(3,), ui_users=0, repetitions=1,
                      users_seconds=1.0)
    rec = recs[users_id("M-VWAB-12D", 3)]
    assert rec.status == "ok" and rec.verified is True, f"{rec.status} {rec.reason}"
    f = rec.figures
    per = f["per_user"]
    assert f["window_s"] == 1.0 and f["repetitions"] == 20
    assert all(u["to_s"] >= 1.0 for u in per), per  # none stopped before the window's end
    assert per[0]["n"] > per[2]["n"] >= 20, per  # the faster user ran more queries
    assert f["queries"] == sum(u["n"] for u in per) and not rec.notes


@pytest.mark.slow
def test_the_harness_ceiling_includes_the_clients_decoding(market_tiny: Dataset, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that takes 0.2 s to decode each answer: the harness's ceiling (the same users
    decoding a real answer with no engine behind it) takes it too, and the cell, whose queries
    are bound by that decoding, is marked client-bound."""
    engine = install_toy(tmp_path, monkeypatch, decode_s=0.2)
    recs = _run_users(engine, market_tiny, tmp_path / "run", users=(1,), ui_users=0, repetitions=1)
    f = recs[users_id("M-VWAB-12D", 1)].figures
    assert recs[users_id("M-VWAB-12D", 1)].status == "ok"
    assert f["ceiling_p50_ms"] >= 200 and f["p50_ms"] >= 200 and f["client_bound"] is True


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.mark.slow
def test_a_runner_killed_during_the_users_leaves_no_user_process(market_tiny: Dataset, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILL to the runner while its users' processes query: each dies with it (checked by the
    pids the users' processes wrote, and nothing else)."""
    pids_file = tmp_path / "pids"
    install_toy(tmp_path, monkeypatch, decode_s=0.5, pids_file=pids_file)
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "tickbench.cli", "run", "--suite", "market", "--engines",
                             "toymarket", "--data", str(market_tiny.root), "--out", str(out), "--users", "3",
                             "--ui-users", "0", "--ingest-rates", "max", "--ingest-writers", "1"],
                            env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        seen: list[int] = []
        while len(seen) < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            seen = [int(x) for x in pids_file.read_text().split()] if pids_file.exists() else []
        assert len(seen) >= 3, "the users' processes did not open"
        time.sleep(1.0)  # the users are querying (each query takes 0.5 s)
        assert all(_alive(p) for p in seen[:3])
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in seen) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [p for p in seen if _alive(p)], "user processes left running after the runner was killed"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(60)


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
def test_a_user_whose_query_fails_names_itself(market_tiny: Dataset, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine refuses user 1's query (its block written into the query): the cell is an
    error that names user 1 and the process it ran in."""
    sym = market_params(market_tiny, SEED, user=1).VWAB12D.syms[0]
    failing = {"M-VWAB-12D.sql": "SELECT sym, CAST(make_timestamp(tsn // 1000) AS DATE) AS day, "
               "sum(bid * bsize) / sum(bsize) AS vwab FROM quotes WHERE list_contains($vwab_syms, sym) "
               "AND tsn >= epoch_ns($vwab_start) AND tsn < epoch_ns($vwab_end) "
               f"AND CASE WHEN list_contains($vwab_syms, '{sym}') THEN error('refused') ELSE true END "
               "GROUP BY ALL ORDER BY sym, day;\n"}
    engine = install_toy(tmp_path, monkeypatch, query_override=failing)
    recs = _run_users(engine, market_tiny, tmp_path / "run", users=(2,), ui_users=0, repetitions=1)
    rec = recs[users_id("M-VWAB-12D", 2)]
    assert rec.status == "error" and rec.reason.startswith("user 1 (pid ") and "refused" in rec.reason, rec.reason
    assert "user 0" not in rec.reason


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
                   protocol=Protocol(warmup=1, repetitions=2, timeout_s=120)))
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
                   protocol=Protocol(warmup=1, repetitions=2, timeout_s=120)))
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
                   protocol=Protocol(warmup=1, repetitions=1, timeout_s=120)))
    rec = next(r for r in read_results(out / "results.json").records if r.benchmark.startswith("M-SNAP/ingest/"))
    assert rec.status == "unsupported" and "no ingest capability" in rec.reason


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


@pytest.mark.parametrize("qid", ["M-VWAB-12D", "M-SNAP", "M-STATS-UI"])
def test_questdbs_ceiling_decodes_the_users_answers_as_exec_sends_them(market_tiny: Dataset, qid: str) -> None:
    """QuestDB's client parses ``/exec``'s JSON: its harness ceiling decodes each users query's
    real answer from that JSON, and reads back the same answer."""
    orjson = pytest.importorskip("orjson")
    from tickbench import verify
    from tickbench.engines.questdb.server import json_answer, json_table

    want = answer(qid, market_tiny, market_params(market_tiny, SEED))
    body = json_answer(want.to_arrow())
    got = verify.normalize(pl.from_arrow(json_table(orjson.loads(body))), want)  # type: ignore[arg-type]
    assert want.height > 0 and verify.compare(got, want).ok
