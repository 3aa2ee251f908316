"""Failure isolation and resume: a cell that hangs, crashes its engine or answers wrong is
recorded for that cell, the run goes on, and an interrupted run resumes where it stopped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import TINY_SEED
from tickbench.data.dataset import Dataset
from tickbench.results import read_results
from tickbench.run.cell import Protocol
from tickbench.run.faults import FAULTS_ENV
from tickbench.run.session import RunConfig, RunError, run
from tickbench.suites.published import BY_ID, QUERY_IDS
from tickbench.suites.registry import resume_config, run_config

pytestmark = pytest.mark.slow


def _cfg(tiny: Dataset, out: Path, **protocol: object) -> RunConfig:
    return run_config(engines=["duckdb"], data=tiny.root, out=out, seed=TINY_SEED,
                     protocol=Protocol(warmup=1, **{"repetitions": 1, "timeout_s": 20.0, **protocol}))  # type: ignore[arg-type]


def test_hang_crash_and_wrong_answer_stay_in_their_cells(
    tiny: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FAULTS_ENV, "duckdb:hang=O-V1;duckdb:crash=O-S;duckdb:wrong=T-V1")
    results = run(_cfg(tiny, tmp_path / "r", timeout_s=5.0))
    by_id = {r.benchmark: r for r in results.records}
    assert by_id["O-V1"].status == "timeout"
    assert by_id["O-S"].status == "error" and "crashed" in by_id["O-S"].reason
    assert by_id["T-V1"].status == "wrong" and by_id["T-V1"].stats is None and not by_id["T-V1"].samples_ns
    others = [q for q in QUERY_IDS if q not in ("O-V1", "O-S", "T-V1")]
    assert all(by_id[q].status == "ok" and by_id[q].verified for q in others)
    assert by_id["W"].status == "ok" and by_id["SE"].status == "ok"


def test_interrupted_run_resumes_without_redoing_cells(
    tiny: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "r"
    full = run(_cfg(tiny, tmp_path / "full"))
    run(_cfg(tiny, out))
    # Cut the run short as an interruption would: keep the first five cells only.
    path = out / "results.json"
    raw = json.loads(path.read_text())
    kept = raw["records"][:5]
    raw["records"] = kept
    path.write_text(json.dumps(raw))
    resumed = run(resume_config(out))
    assert [(r.engine, r.benchmark) for r in resumed.records[:5]] == [(k["engine"], k["benchmark"]) for k in kept]
    assert [r.samples_ns for r in resumed.records[:5]] == [k["samples_ns"] for k in kept]  # not redone
    assert {(r.engine, r.benchmark) for r in resumed.records} == {(r.engine, r.benchmark) for r in full.records}
    assert len(resumed.records) == len(BY_ID)
    assert read_results(path).run_id == raw["run_id"]


def test_redo_runs_an_engine_again_replacing_its_failed_cells(
    tiny: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cell failed by a condition the user then fixes (here an injected crash; at SF 1 a full
    disk) is run again with ``--resume DIR --redo ENGINE``: that engine's records are replaced."""
    out = tmp_path / "r"
    monkeypatch.setenv(FAULTS_ENV, "duckdb:crash=O-S")
    first = run(_cfg(tiny, out))
    assert {r.benchmark: r.status for r in first.records}["O-S"] == "error"
    monkeypatch.delenv(FAULTS_ENV)
    with pytest.raises(RunError, match="--redo polars: not an engine of the run"):
        resume_config(out, ["polars"])
    redone = run(resume_config(out, ["duckdb"]))
    assert len(redone.records) == len(BY_ID)  # replaced, not added
    assert all(r.status == "ok" for r in redone.records), [(r.benchmark, r.reason) for r in redone.records]
    assert redone.run_id == first.run_id
    assert redone.environment.engines["duckdb"]["phase_seconds"]["load"] > 0


def test_existing_results_are_not_overwritten(tiny: Dataset, tmp_path: Path) -> None:
    out = tmp_path / "r"
    out.mkdir()
    (out / "results.json").write_text("{}")
    with pytest.raises(RunError, match="--resume"):
        run(_cfg(tiny, out))
    assert (out / "results.json").read_text() == "{}"


def test_memory_budget_stops_an_engine_not_the_run(
    tiny: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An engine whose processes grow past the memory budget is stopped with an error that
    names the engine and the budget (never a kernel OOM kill of the run); the run goes on, and
    every engine's sampled peak and the runner's own peak are in the results."""
    monkeypatch.setenv("TICKBENCH_MEMORY_BUDGET_GB", "0.02")  # 20 MiB: less than any worker needs
    cfg = _cfg(tiny, tmp_path / "tight")
    cfg.engines = ["duckdb", "polars"]
    results = run(cfg)
    assert len(results.records) == 2 * len(BY_ID)
    failed = [r for r in results.records if r.status not in ("not_applicable", "unsupported")]
    assert failed and all(r.status == "error" for r in failed)
    assert all("memory budget of 0.0 GiB" in r.reason and "TICKBENCH_MEMORY_BUDGET_GB" in r.reason
               for r in failed), failed[0].reason
    assert {r.engine for r in failed} == {"duckdb", "polars"}
    assert any("the duckdb engine's processes held" in r.reason for r in failed)
    monkeypatch.delenv("TICKBENCH_MEMORY_BUDGET_GB")
    ok = run(_cfg(tiny, tmp_path / "roomy"))
    duck = ok.environment.engines["duckdb"]
    assert 0 < duck["peak_rss_bytes"] < duck["memory_budget_bytes"]
    assert ok.environment.runner_peak_rss_bytes and ok.environment.runner_peak_rss_bytes > 0
