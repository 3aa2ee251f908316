"""``tickbench compare``: the flagging rule, refusals, exit codes, and a deliberately slowed engine.

The slowed engine comes from the runner's test-only fault hook,
``TICKBENCH_FAULTS="duckdb:slow=<seconds>"`` (:func:`tickbench.run.faults.faults`), which adds
the delay inside the timed interval of every duckdb query. "Same build, same seed → nothing
flagged" is tested on runs derived from one real run (same samples reordered, or drifted within
the ratio floor): two real runs on a shared machine can differ by several × when other work
runs between them, and compare then rightly flags them. ``TICKBENCH_QUIET_MACHINE=1`` enables
the real two-run version for a machine with nothing else running.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import TINY_SEED
from tests.synthetic import real_run, scaled, slowed
from tickbench.cli import app
from tickbench.report.compare import CompareRefused, compare, differs
from tickbench.results import Results
from tickbench.suites.published import QUERY_IDS
from tickbench.suites.registry import suites

SUITES = suites().values()


@pytest.fixture(scope="module")
def real(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Results:
    return real_run(tiny_dir, tmp_path_factory.mktemp("compare-run") / "out", TINY_SEED, repetitions=3)


def _reordered(r: Results, factor: float = 1.0) -> Results:
    """The same run with each cell's samples in reverse order, times ``factor``."""
    recs = []
    for rec in r.records:
        rec = scaled(rec, factor)
        recs.append(rec.model_copy(update={"samples_ns": list(reversed(rec.samples_ns))}))
    return r.model_copy(update={"records": recs, "run_id": "again"})


def test_rule() -> None:
    a = [10.0, 10.5, 11.0]
    assert differs(a, [10.2, 10.8, 11.4]) == (False, "ranges overlap")
    assert differs(a, [60.0, 61.0, 60.5])[0]
    tight = [10.0, 10.1, 10.2]
    assert differs(tight, [11.6, 11.7, 11.8])[1] == "within 1.2×"  # apart, beyond the spread, only 1.16×
    assert differs(tight, [11.6, 11.7, 11.8], min_ratio=1.05)[0]
    assert not differs(a, [11.6, 11.7, 11.8])[0]  # apart, but |Δ| 1.2 within 3 × pooled spread 0.53
    assert not differs([10.0, 20.0], [21.0, 22.0])[0]  # |Δ| 6.5 within 3 × pooled spread
    assert differs([10.0], [100.0]) == (False, "fewer than 2 samples: not tested")


def test_same_run_is_not_flagged(real: Results) -> None:
    for factor in (1.0, 1.1, 0.92):  # drift within the 1.2× floor
        c = compare(real, _reordered(real, factor), SUITES)
        assert not c.flagged, [(x.cell, x.why) for x in c.flagged]
        assert {x.cell for x in c.cells} >= set(QUERY_IDS)


def test_synthetic_slowdown_is_flagged_on_every_query(real: Results) -> None:
    """0.5 s more per query, added to the real samples (as the runner's fault hook would)."""
    c = compare(real, slowed(real, "duckdb", 500.0), SUITES)
    assert {x.cell for x in c.flagged} == set(QUERY_IDS)
    assert all(x.ratio is not None and x.ratio > 1.2 and "slower" in x.why for x in c.flagged)


def test_status_change_is_flagged(real: Results) -> None:
    recs = [r.model_copy(update={"status": "timeout", "stats": None, "samples_ns": []})
            if r.benchmark == "O-S" else r for r in real.records]
    c = compare(real, real.model_copy(update={"records": recs}), SUITES)
    assert [(x.cell, x.why) for x in c.flagged] == [("O-S", "status ok → timeout")]


def test_other_dataset_is_refused(real: Results) -> None:
    other = real.model_copy(update={"dataset": real.dataset.model_copy(update={"content_hash": "0" * 32})})
    with pytest.raises(CompareRefused, match=f"different datasets.*{real.dataset.content_hash}.*{'0' * 32}"):
        compare(real, other, SUITES)


def test_changed_query_text_is_refused_naming_the_cells(real: Results) -> None:
    recs = []
    for r in real.records:
        if r.benchmark in ("T-V1", "C-R") and r.query is not None:
            r = r.model_copy(update={"query": r.query.model_copy(update={"sha256": "ab" * 32, "text": "SELECT 1"})})
        recs.append(r)
    other = real.model_copy(update={"records": recs})
    with pytest.raises(CompareRefused, match=r"duckdb T-V1 \(.*T-V1.sql.*duckdb C-R"):
        compare(real, other, SUITES)
    c = compare(real, other, SUITES, skip_changed=True)
    assert len(c.refused) == 2 and not {"T-V1", "C-R"} & {x.cell for x in c.cells}


def test_cli_exit_codes(real: Results, tmp_path: Path) -> None:
    paths = {}
    variants = {"a": real, "same": _reordered(real), "slow": slowed(real, "duckdb", 500.0),
                "foreign": real.model_copy(update={"dataset": real.dataset.model_copy(
                    update={"content_hash": "1" * 32})})}
    for name, run in variants.items():
        paths[name] = tmp_path / name / "results.json"
        run.write(paths[name])
    runner = CliRunner()
    res = runner.invoke(app, ["compare", str(paths["a"]), str(paths["same"])])
    assert res.exit_code == 0 and "no cell differs" in res.output, res.output
    res = runner.invoke(app, ["compare", str(paths["a"]), str(paths["slow"])])
    assert res.exit_code == 1 and "differ beyond" in res.output, res.output
    res = runner.invoke(app, ["compare", str(paths["a"]), str(paths["foreign"])])
    assert res.exit_code == 2 and "different datasets" in res.output
    res = runner.invoke(app, ["compare", str(paths["a"]), str(tmp_path / "missing.json")])
    assert res.exit_code == 2


@pytest.mark.slow
def test_engine_slowed_by_the_runner_is_flagged(real: Results, tiny_dir: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A real run with duckdb slowed by 0.5 s per query (the runner's fault hook): flagged. The
    delay is large because this machine is shared: a baseline repetition can take 0.3 s under load."""
    monkeypatch.setenv("TICKBENCH_FAULTS", "duckdb:slow=0.5")
    slow = real_run(tiny_dir, tmp_path / "slow", TINY_SEED, repetitions=3)
    c = compare(real, slow, SUITES)
    flagged = {x.cell for x in c.flagged if x.engine == "duckdb"}
    # every query is 0.5 s slower; allow two cells whose baseline had a load spike near 0.5 s
    assert len(flagged & set(QUERY_IDS)) >= len(QUERY_IDS) - 2, [(x.cell, x.why) for x in c.cells]


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("TICKBENCH_QUIET_MACHINE"),
                    reason="two real runs differ for real on a shared machine; set TICKBENCH_QUIET_MACHINE=1 "
                           "on one with nothing else running")
def test_two_real_runs_of_the_same_seed_are_not_flagged(real: Results, tiny_dir: Path, tmp_path: Path) -> None:
    again = real_run(tiny_dir, tmp_path / "again", TINY_SEED, repetitions=3)
    c = compare(real, again, SUITES)
    assert not [x for x in c.flagged if x.cell in QUERY_IDS], [(x.cell, x.why) for x in c.flagged]


def test_runs_of_other_seeds_are_refused(real: Results) -> None:
    """Two runs of one dataset with different seeds drew different probe times: their O-T and
    O-NBBO measured other lookups, so nothing is compared, and the message says why."""
    other = real.model_copy(update={"seed": real.seed + 1,
                                    "params": {**real.params, "ot_times": list(reversed(real.params["ot_times"]))}})
    with pytest.raises(CompareRefused, match=rf"different seeds \({real.seed} / {real.seed + 1}\)"):
        compare(real, other, SUITES)
