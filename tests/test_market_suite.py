"""The market suite (SPEC §2.3) through the real runner, on every engine that serves the market
dataset (engine.toml's kinds), at the tiny market scale: every M- query verified against the
reference (or declared unsupported with a reason), M-W and M-SE where the engine has them, the
parameters saved beside the answers, M-SNAP during ingest with its controls over the same span
of D for every engine; and the
suite's refusals (a paper dataset, an engine that does not serve the market dataset)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.conftest import MARKET_TINY
from tests.market_ingest_checks import check_ingest_record
from tickbench.data.dataset import Dataset
from tickbench.datasets.market.params import read_params_json
from tickbench.datasets.market.reference import COLUMNS, answer
from tickbench.engines.base import BulkLoad, Ingest, Server, Storage
from tickbench.engines.registry import adapter_class, availability, engine_infos
from tickbench.results import read_results
from tickbench.run.cell import Protocol
from tickbench.run.session import RunError, run
from tickbench.suites.market import LOADS, QUERY_IDS
from tickbench.suites.market.suite import SUITE as MARKET
from tickbench.suites.market.users import own_processes, users_id
from tickbench.suites.registry import run_config, suite_options

SEED = int(MARKET_TINY["seed"])
# M-SNAP during ingest: D's first 10 minutes (1,714 events at this scale) at 2,000 events/s, so
# the replay lasts about a second and the users query during it; one writer, so that ArcticDB's
# watcher (seconds behind with two) proves a checkpoint before the writers finish.
INGEST_MINUTES = 10.0
INGEST_RATE = 2_000


def _market_classes() -> list[tuple[str, type]]:
    """The engines that serve the market dataset (engine.toml's kinds) whose client is installed,
    with their adapters."""
    out = []
    for name, info in engine_infos().items():
        try:
            cls = adapter_class(name)
        except ImportError:
            continue  # its client is not installed: test_engines says so
        if MARKET.refusal(cls, info) is None:
            out.append((name, cls))
    return out


def _market_engines() -> list[object]:
    out = []
    for name, cls in _market_classes():
        marks = [pytest.mark.slow] + ([pytest.mark.server] if issubclass(cls, Server) else [])
        out.append(pytest.param(name, marks=marks, id=name))
    return out


@pytest.mark.parametrize("engine", _market_engines())
def test_market_suite_verifies(engine: str, market_tiny: Dataset, tmp_path: Path) -> None:
    if not (avail := availability(engine)).available:
        pytest.skip(f"{engine} not available here: {avail.reason}")
    info, cls = engine_infos()[engine], adapter_class(engine)
    out = tmp_path / "run"
    # One engine load for the 15 queries, M-W, M-SE, the users cells (1 and 3 users) and M-SNAP
    # during ingest (tests/test_market_users.py checks the users' machinery on a toy engine).
    opts = suite_options(users=(1, 3), ui_users=3, users_seconds=0.3, ingest_rates=(INGEST_RATE,),
                         ingest_writers=(1,), ingest_minutes=INGEST_MINUTES)
    run(run_config(engines=[engine], data=market_tiny.root, out=out, seed=SEED, suite="market", options=opts,
                   protocol=Protocol(warmup=1, repetitions=2, timeout_s=120, save_answers=out / "answers")))
    results = read_results(out / "results.json")
    by_id = {r.benchmark: r for r in results.records}
    users = [users_id("M-VWAB-12D", 1), users_id("M-VWAB-12D", 3), users_id("M-SNAP", 3), users_id("M-STATS-UI", 3)]
    during = f"M-SNAP/ingest/rate={INGEST_RATE}/writers=1"
    assert set(by_id) == {*QUERY_IDS, *users, during, *LOADS}
    params = read_params_json(out / "answers" / engine / "params.json")
    for qid in QUERY_IDS:
        rec = by_id[qid]
        if qid in info.unsupported:
            assert rec.status == "unsupported" and rec.reason
            continue
        assert rec.status == "ok", f"{qid}: {rec.status} {rec.reason}"
        assert rec.verified is True and rec.stats is not None and rec.query is not None
        saved = pl.read_parquet(out / "answers" / engine / f"{qid}.parquet")
        assert saved.columns == list(COLUMNS[qid]) and saved.height == answer(qid, market_tiny, params).height
    for bench, cap in (("M-W", BulkLoad), ("M-SE", Storage)):
        expected = "ok" if issubclass(cls, cap) else "not_applicable"
        assert by_id[bench].status == expected, f"{bench}: {by_id[bench].status} {by_id[bench].reason}"
    if issubclass(cls, Storage):  # M-SE's split, the same for every engine
        se = by_id["M-SE"].figures
        assert se["data_bytes"] > 0 and se["engine_bytes"] == se["data_bytes"] + se["index_bytes"]
        assert se["log_bytes"] >= 0
    if issubclass(cls, Ingest):
        check_ingest_record(by_id[during], cls, market_tiny, params, INGEST_MINUTES, users=3)
    else:
        assert by_id[during].status == "unsupported" and by_id[during].reason
    for bench in users:
        rec = by_id[bench]
        if rec.status == "unsupported":
            assert rec.reason and (bench in info.unsupported or bench.split("/")[0] in info.unsupported)
            continue
        assert rec.status == "ok", f"{bench}: {rec.status} {rec.reason}"
        f = rec.figures
        assert rec.verified is True and len(f["per_user"]) == f["users"]
        # each user timed 20 queries of its own at least (2 asked) with its p10 … p90; the users
        # started together: each began (its untimed warm-up) before any user's last timed query
        # ended, and each ran until the window's end (--users-seconds 0.3 after their common start)
        per = f["per_user"]
        assert all(u["n"] >= 20 and u["p10_ms"] <= u["p50_ms"] <= u["p90_ms"] for u in per)
        assert f["window_s"] == 0.3 and all(u["to_s"] >= 0.3 for u in per), per
        assert all(u["began_s"] <= u["from_s"] < u["to_s"] for u in per), per
        assert max(u["began_s"] for u in per) < min(u["to_s"] for u in per), per
        pids = {u["pid"] for u in per}
        if own_processes(cls):  # a process per user, each with its own client
            assert len(pids) == f["users"] == f["processes"], f["per_user"]
        else:  # threads of the engine's process, with the engine's limit that makes them so
            assert len(pids) == 1 and f["processes"] == 1 and f["limit"] == cls.users_limit != ""


def test_the_market_suite_refuses_the_paper_dataset(tiny: Dataset, tmp_path: Path) -> None:
    with pytest.raises(RunError, match="--suite market runs on the market dataset"):
        run(run_config(engines=["duckdb"], data=tiny.root, out=tmp_path / "r", seed=7, suite="market"))
    assert not (tmp_path / "r" / "results.json").exists()

