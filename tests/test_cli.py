"""The command line: the stable interface of SPEC §4 and its errors on bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tests.conftest import TINY_HASH
from tickbench.cli import app

runner = CliRunner()


def _invoke(*args: str) -> tuple[int, str]:
    res = runner.invoke(app, list(args))
    return res.exit_code, res.output


def test_generate_prints_the_hash_and_reuses_a_matching_directory(tiny_dir: Path) -> None:
    code, out = _invoke("generate", "--scale", "0.01", "--seed", "7", "--out", str(tiny_dir))
    assert code == 0
    assert out.strip().splitlines()[-1] == TINY_HASH


@pytest.mark.parametrize("scale", ["-1", "0", "1e9", "nan"])
def test_bad_scale_is_refused_and_writes_nothing(tmp_path: Path, scale: str) -> None:
    out = tmp_path / "d"
    code, text = _invoke("generate", "--scale", scale, "--out", str(out))
    assert code == 2 and "--scale" in text
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_directory_holding_another_dataset_is_refused(tiny_dir: Path) -> None:
    code, text = _invoke("generate", "--scale", "0.02", "--seed", "7", "--out", str(tiny_dir))
    assert code == 2 and "different dataset" in text


def test_non_empty_foreign_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    code, text = _invoke("generate", "--scale", "0.01", "--out", str(tmp_path))
    assert code == 2 and "not empty" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_unknown_engine_is_refused(tiny_dir: Path, tmp_path: Path) -> None:
    code, text = _invoke("run", "--engines", "duckdb,nosuchdb", "--data", str(tiny_dir),
                         "--out", str(tmp_path / "r"))
    assert code == 2 and "nosuchdb" in text and "known:" in text
    assert not (tmp_path / "r").exists()


def test_unknown_suite_is_refused(tiny_dir: Path, tmp_path: Path) -> None:
    code, text = _invoke("run", "--suite", "fastest", "--data", str(tiny_dir), "--out", str(tmp_path / "r"))
    assert code == 2 and "--suite fastest" in text


def test_dataset_missing_a_partition_is_refused(tiny_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(tiny_dir, broken)
    victim = json.loads((broken / "manifest.json").read_text())["partitions"][5]["path"]
    (broken / victim).unlink()
    code, text = _invoke("run", "--engines", "duckdb", "--data", str(broken), "--out", str(tmp_path / "r"))
    assert code == 2 and "missing" in text and victim in text
    assert not (tmp_path / "r").exists()


def test_dataset_with_modified_rows_is_refused(tiny_dir: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    broken = tmp_path / "broken"
    shutil.copytree(tiny_dir, broken)
    entry = json.loads((broken / "manifest.json").read_text())["partitions"][3]
    path = broken / entry["path"]
    t = pq.read_table(path)
    t = t.slice(1)  # one row fewer, and a size the manifest does not know
    pq.write_table(t, path)
    code, text = _invoke("run", "--engines", "duckdb", "--data", str(broken), "--out", str(tmp_path / "r"))
    assert code == 2 and entry["path"] in text


def test_not_a_dataset_is_refused(tmp_path: Path) -> None:
    code, text = _invoke("run", "--engines", "duckdb", "--data", str(tmp_path), "--out", str(tmp_path / "r"))
    assert code == 2 and "manifest" in text


def test_engines_lists_every_engine() -> None:
    code, text = _invoke("engines")
    assert code == 0 and "duckdb" in text and "yes" in text


def test_run_writes_results_reports_and_answers(tiny_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "r"
    code, text = _invoke("run", "--engines", "duckdb", "--data", str(tiny_dir), "--seed", "7",
                         "--out", str(out), "--repetitions", "1", "--save-answers")
    assert code == 0, text
    for name in ("results.json", "report.html", "report.md"):
        assert (out / name).is_file()
    assert len(list((out / "answers" / "duckdb").glob("*.parquet"))) == 14
    assert "T-VWAP" in (out / "report.md").read_text()
    # Not a terminal: progress comes as a line per finished cell (a live bar would show nothing in a log).
    records = json.loads((out / "results.json").read_text())["records"]
    lines = [line for line in text.splitlines() if line.startswith("run: duckdb: ")]
    assert [line.split()[2] for line in lines] == ["starting", "loading", *(r["benchmark"] for r in records)]
    assert lines[-1].split()[3] == f"{len(records)}/{len(records)}"
    code, text = _invoke("report", str(out / "results.json"), "--out", str(tmp_path / "again"))
    assert code == 0 and (tmp_path / "again" / "report.html").is_file()


@pytest.mark.parametrize("command", ["generate", "run"])
def test_bad_seed_is_refused_and_writes_nothing(tiny_dir: Path, tmp_path: Path, command: str) -> None:
    out = tmp_path / "out"
    extra = ["--data", str(tiny_dir)] if command == "run" else []
    code, text = _invoke(command, "--seed", "-5", "--out", str(out), *extra)
    assert code == 2 and "--seed -5" in text and "[0, 2**63)" in text
    assert not out.exists()


def test_a_load_past_the_load_timeout_is_every_cells_timeout_naming_the_option(tiny_dir: Path, tmp_path: Path) -> None:
    """An engine whose load outlasts --load-timeout (InfluxDB at SF 1 took over an hour) is
    stopped and every cell is a timeout whose reason names the option; a bad value is refused."""
    from tickbench.results import read_results
    from tickbench.run.faults import FAULTS_ENV

    code, text = _invoke("run", "--engines", "duckdb", "--data", str(tiny_dir), "--load-timeout", "0",
                         "--out", str(tmp_path / "bad"))
    assert code == 2 and "--load-timeout" in text and not (tmp_path / "bad").exists()
    res = runner.invoke(app, ["run", "--engines", "duckdb", "--data", str(tiny_dir), "--repetitions", "1",
                              "--load-timeout", "2", "--out", str(tmp_path / "r")],
                        env={FAULTS_ENV: "duckdb:slow_load=30"})
    assert res.exit_code == 0, res.output
    results = read_results(tmp_path / "r" / "results.json")
    records = results.records
    assert records and all(r.status == "timeout" for r in records)
    phases = results.environment.engines["duckdb"]["phase_seconds"]
    assert phases["load"] >= 2 and phases["T-V1"] < 2  # the failed load's time is the load's
    assert all("longer than 2 s (raise it with --load-timeout)" in r.reason for r in records), records[0].reason


def test_redo_needs_resume(tiny_dir: Path, tmp_path: Path) -> None:
    code, text = _invoke("run", "--engines", "duckdb", "--data", str(tiny_dir), "--out", str(tmp_path / "r"),
                         "--redo", "duckdb")
    assert code == 2 and "--redo duckdb: applies to a run you continue; add --resume DIR" in text
    assert not (tmp_path / "r").exists()


def test_install_servers_takes_the_server_engines_from_their_folders() -> None:
    """`tickbench install --servers` (make install-servers, CI) installs every server engine whose
    folder says ``kind = "server"``, except those built from a source release (named with
    --source), and a bare `install` names what to give it."""
    from tickbench.cli import registry_servers
    from tickbench.engines.registry import engine_infos

    servers = registry_servers()
    assert servers and all(engine_infos()[n].kind == "server" for n in servers)
    assert {"postgres", "questdb", "influxdb"} <= set(servers) and "timescaledb" not in servers
    assert not {n for n, i in engine_infos().items() if i.kind != "server"} & set(servers)
    result = CliRunner().invoke(app, ["install"])
    assert result.exit_code == 2 and "--servers" in result.output


def test_the_warm_up_runs_up_to_its_count_and_stops_at_its_seconds() -> None:
    """A query cell's warm-up (:class:`~tickbench.run.cell.WarmUp`): always one run; then up to
    ``warmup`` runs while ``warmup_s`` seconds have not passed since the first began."""
    import time

    from tickbench.run.cell import Protocol, WarmUp

    def runs(warm: WarmUp, each_s: float = 0.0) -> int:
        while warm.more():
            time.sleep(each_s)
            warm.ran()
        return warm.runs

    assert runs(WarmUp(Protocol(warmup=4, warmup_s=3600))) == 4
    assert runs(WarmUp(Protocol(warmup=1, warmup_s=3600))) == 1
    assert runs(WarmUp(Protocol(warmup=10, warmup_s=0))) == 1  # the one run that is verified
    # 0.15 s a run against 0.2 s: two runs at most, however slow the machine
    assert 1 <= runs(WarmUp(Protocol(warmup=10, warmup_s=0.2)), 0.15) <= 2


@pytest.mark.parametrize(("flag", "value"), [("--warmup", "0"), ("--warmup", "-3"), ("--warmup-seconds", "nan"),
                                             ("--warmup-seconds", "-1"), ("--warmup-seconds", "inf")])
def test_a_bad_warm_up_is_refused_naming_its_option(tiny_dir: Path, tmp_path: Path, flag: str, value: str) -> None:
    code, text = _invoke("run", "--engines", "duckdb", "--data", str(tiny_dir), flag, value,
                         "--out", str(tmp_path / "r"))
    assert code == 2 and f"{flag} {value}" in text.replace("\n", " ")
    assert not (tmp_path / "r").exists()


def test_a_run_records_its_warm_up_and_a_protocol_1_file_resumes_with_one(tiny_dir: Path, tmp_path: Path) -> None:
    """Each query cell records its warm-up runs; the results record the settings and say them
    in words; a results file of protocol 1 (no warm-up seconds) resumes with its one warm-up."""
    import math

    from tickbench.results import read_results
    from tickbench.run.session import settings_of
    from tickbench.suites.registry import resume_config

    out = tmp_path / "r"
    code, text = _invoke("run", "--engines", "duckdb", "--data", str(tiny_dir), "--repetitions", "1",
                         "--warmup", "3", "--warmup-seconds", "3600", "--out", str(out))
    assert code == 0, text
    results = read_results(out / "results.json")
    assert results.protocol_version == "2"
    assert results.config is not None and (results.config.warmup, results.config.warmup_s) == (3, 3600)
    queries = [r for r in results.records if r.status == "ok" and r.stats is not None]
    assert queries and all(r.figures["warmup_runs"] == 3 for r in queries)
    assert "1 timed repetitions after up to 3 warm-up runs (3600 s at most)" in (out / "report.md").read_text()

    raw = json.loads((out / "results.json").read_text())
    raw["protocol_version"] = "1"
    raw["config"]["warmup"] = 1
    del raw["config"]["warmup_s"]
    (out / "results.json").write_text(json.dumps(raw))
    cfg = resume_config(out)
    assert (cfg.protocol.warmup, cfg.protocol.warmup_s) == (1, math.inf)
    assert settings_of(cfg).warmup_s is None  # written back as protocol 1 recorded it
    assert read_results(out / "results.json").protocol_text() == "1 timed repetitions after a warm-up"


def test_the_warm_up_can_come_from_the_environment(tiny_dir: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``TICKBENCH_WARMUP``/``TICKBENCH_WARMUP_SECONDS`` set the options' defaults (the tests' short
    runs), a bad value is refused naming the option and the variable, and with neither the
    protocol's 10 runs and 1 s hold. (The options beat them: the test above gives ``--warmup 3``
    under the tests' ``TICKBENCH_WARMUP=1``.)"""
    from tickbench.results import read_results

    monkeypatch.setenv("TICKBENCH_WARMUP", "2")
    monkeypatch.setenv("TICKBENCH_WARMUP_SECONDS", "3600")
    out = tmp_path / "r"
    code, text = _invoke("run", "--engines", "duckdb", "--data", str(tiny_dir), "--repetitions", "1",
                         "--out", str(out))
    assert code == 0, text
    results = read_results(out / "results.json")
    assert results.config is not None and (results.config.warmup, results.config.warmup_s) == (2, 3600)
    queries = [r for r in results.records if r.status == "ok" and r.stats is not None]
    assert queries and all(r.figures["warmup_runs"] == 2 for r in queries)

    monkeypatch.setenv("TICKBENCH_WARMUP", "two")
    code, text = _invoke("run", "--engines", "duckdb", "--data", str(tiny_dir), "--out", str(tmp_path / "bad"))
    assert code == 2 and "Invalid value for '--warmup' (env var: 'TICKBENCH_WARMUP')" in " ".join(text.split()), text
    assert not (tmp_path / "bad").exists()

    monkeypatch.delenv("TICKBENCH_WARMUP")
    monkeypatch.delenv("TICKBENCH_WARMUP_SECONDS")
    run_command = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    options = {p.name: p for p in run_command.params}
    assert (options["warmup"].default, options["warmup"].envvar) == (10, "TICKBENCH_WARMUP")
    assert (options["warmup_seconds"].default, options["warmup_seconds"].envvar) == (1.0, "TICKBENCH_WARMUP_SECONDS")
