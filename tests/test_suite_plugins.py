"""Suites are plug-ins: a suite written as one folder outside tickbench's tree is discovered and
shows up in ``tickbench run --help``, in a run's results and in both reports, with no other file
edited; and results of schema version 1 still open (migrated)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tickbench.report import html, markdown
from tickbench.results import SCHEMA_VERSION, ResultsError
from tickbench.suites.registry import PACKAGES_ENV, read_results, suites

SUITES = suites().values()

FIXTURES = Path(__file__).parent / "fixtures"

TOY_SUITE = '''
"""A toy suite: counts the rows of the tiny dataset's bulk-load day through the engine's worker."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel

from tickbench.run.cell import CellContext
from tickbench.suites.base import Option, Suite, WorkerOp


def echo_op(adapter: Any, msg: dict[str, Any]) -> dict[str, Any]:
    return {"engine": adapter.info.name, "times": msg["times"] * 2}


class ToyFigures(BaseModel):
    doubled: int


class ToySuite(Suite):
    name = "toy"
    title = "The toy suite"
    order = 90
    options = (Option("toy_times", 3, "how many times the toy asks"),)
    figures_model = ToyFigures
    worker_ops: ClassVar[dict[str, WorkerOp]] = {"toy_echo": echo_op}

    def cell_ids(self, opts: dict[str, Any], engine: Any) -> list[str]:
        return [f"toy/times={opts['toy_times']}"]

    def run(self, ctx: CellContext, todo: list[str]) -> None:
        worker = ctx.worker("toy")
        if not worker.start_or_fail(todo):
            return
        try:
            for bench in todo:
                reply = worker.call(60, op="toy_echo", times=ctx.opts["toy_times"])
                ctx.record(bench, "ok", verified=True, figures={"doubled": reply["times"]})
        finally:
            worker.close()

    def markdown(self, records: list[Any]) -> list[str]:
        return [f"toy says {r.figures['doubled']} for {r.engine}" for r in records]

    def html(self, records: list[Any], add_chart: Any) -> str:
        return "".join(f"<p class='toy'>toy says {r.figures['doubled']}</p>" for r in records)

    def headline(self, record: Any) -> str:
        return f"doubled {record.figures['doubled']}"


SUITE = ToySuite()
'''


@pytest.fixture
def toy_env(tmp_path: Path) -> dict[str, str]:
    """A package ``toyplug`` holding one suite folder, importable through PYTHONPATH."""
    pkg = tmp_path / "plugins" / "toyplug"
    (pkg / "toy").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "toy" / "__init__.py").write_text("")
    (pkg / "toy" / "suite.py").write_text(textwrap.dedent(TOY_SUITE))
    env = {**os.environ, PACKAGES_ENV: "toyplug", "COLUMNS": "200",
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "plugins"), os.environ.get("PYTHONPATH", "")])}
    return env


def _tickbench(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tickbench.cli", *args], env=env, capture_output=True,
                          text=True, timeout=600)


def test_toy_suite_in_help(toy_env: dict[str, str]) -> None:
    out = _tickbench(toy_env, "run", "--help")
    assert out.returncode == 0, out.stderr
    assert "--toy-times" in out.stdout and "The toy suite" in out.stdout
    assert "toy" in out.stdout.split("--suite", 1)[1].split("\n", 1)[0]


@pytest.mark.slow
def test_toy_suite_runs_and_reports(toy_env: dict[str, str], tiny_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = _tickbench(toy_env, "run", "--engines", "duckdb", "--suite", "toy", "--data", str(tiny_dir),
                      "--toy-times", "21", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    raw = json.loads((out / "results.json").read_text())
    [rec] = raw["records"]
    assert (rec["benchmark"], rec["suite"], rec["status"]) == ("toy/times=21", "toy", "ok")
    assert rec["figures"] == {"doubled": 42}
    assert raw["config"]["options"]["toy"] == {"toy_times": 21}
    assert "toy says 42 for duckdb" in (out / "report.md").read_text()
    assert "<p class='toy'>toy says 42</p>" in (out / "report.html").read_text()
    assert "doubled 42" in done.stdout


def test_v1_results_are_migrated() -> None:
    """A results.json written by tickbench with schema version 1 (kept as a fixture) opens:
    every record gets its suite, the options move per suite, and both reports render it."""
    raw = json.loads((FIXTURES / "results-v1.json").read_text())
    assert raw["schema_version"] == 1 and "beyond" in raw["config"]
    results = read_results(FIXTURES / "results-v1.json")
    assert results.schema_version == SCHEMA_VERSION == 2
    suites = {r.benchmark: r.suite for r in results.records}
    assert suites["T-V1"] == "published" and suites["W"] == "published"
    assert suites["tick-latency/X=1,Y=200/single"] == "tick-latency"
    assert {r.suite for r in results.records} == {"published", "tick-latency", "stream", "concurrency", "scaling",
                                                    "durability"}
    assert results.config.options["tick-latency"]["tick_matrix"] == [[1, 200]]
    assert results.config.options["stream"]["stream_rates"] == [2000, None]
    assert len(results.records) == len(raw["records"])
    page = html.render(results, SUITES)
    assert "Tick latency" in page and "Durability under kill -9" in page
    assert "## Streaming ingest" in markdown.render(results, SUITES)


def test_results_of_another_version_are_refused(tmp_path: Path) -> None:
    raw = json.loads((FIXTURES / "results-v1.json").read_text())
    raw["schema_version"] = 99
    path = tmp_path / "results.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ResultsError, match="schema version 99"):
        read_results(path)


def test_figures_are_typed(tmp_path: Path) -> None:
    """A record whose figures break its suite's model is refused when a results file is read for
    a report, naming the cell; the results layer itself knows no suite."""
    from tickbench import results as results_module

    raw = json.loads((FIXTURES / "results-v1.json").read_text())
    stream = next(r for r in raw["records"] if r["benchmark"].startswith("stream/"))
    stream["figures"] = {**stream["figures"], "writers": "several"}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ResultsError, match=f"figures of {stream['engine']} {stream['benchmark']}"):
        read_results(path)
    raw["schema_version"] = 2
    for r in raw["records"]:
        r["suite"] = r["benchmark"].split("/")[0] if "/" in r["benchmark"] else "published"
    raw["config"] = None
    path.write_text(json.dumps(raw))
    assert results_module.read_results(path).record(stream["engine"], stream["benchmark"]) is not None


def test_a_suite_that_declares_nothing_is_refused_on_an_endpoint(toy_env: dict[str, str], tiny_dir: Path,
                                                                  tmp_path: Path) -> None:
    """The toy suite says nothing of external endpoints: a run of it against a user's own server is
    refused before anything is loaded, with the reason, and nothing is contacted (the address is
    a closed port)."""
    done = _tickbench(toy_env, "run", "--engines", "postgres", "--suite", "toy", "--data", str(tiny_dir),
                      "--endpoint", "postgres=127.0.0.1:9", "--out", str(tmp_path / "run"))
    assert done.returncode == 2, done.stdout + done.stderr
    message = " ".join(done.stderr.split())
    assert "refused for an external endpoint" in message and "toy: the suite does not declare" in message
    # the hint names the suites that declare they may run there, read from the registry
    assert "run --suite published against it" in message
    assert not (tmp_path / "run").exists()
