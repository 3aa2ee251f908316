"""Engines are plug-ins: an engine written as one folder (engine.toml, adapter, query files) in a
package outside tickbench's tree is discovered and shows up in ``tickbench engines``, in the
generated support matrix and in a run, with no other file edited; and every engine's declared
kind and gaps agree with the capabilities its adapter has."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tickbench.engines.base import BulkLoad, Engine, Ingest, Storage, kind_of
from tickbench.engines.registry import adapter_class, engine_infos
from tickbench.suites.market.suite import MarketSuite

TOY_TOML = '''
title = "Toy (DuckDB over the Parquet files)"
kind = "embedded"
language = "SQL (DuckDB)"
extension = "sql"
install = "nothing to install: DuckDB comes with tickbench's engines"

[unsupported]
"T-V2" = "the toy engine answers two queries"
"O-T" = "the toy engine answers two queries"
"O-B1" = "the toy engine answers two queries"
"O-B2" = "the toy engine answers two queries"
"O-S" = "the toy engine answers two queries"
"O-V1" = "the toy engine answers two queries"
"O-V2" = "the toy engine answers two queries"
"O-NBBO" = "the toy engine answers two queries"
"C-R" = "the toy engine answers two queries"
"C-VT" = "the toy engine answers two queries"
"C-VO1" = "the toy engine answers two queries"
"C-VO2" = "the toy engine answers two queries"
"tick-latency" = "no ingest"
"stream" = "no ingest"
"durability" = "no ingest"
'''

TOY_ADAPTER = '''
"""A toy engine: DuckDB views over the dataset's trades files, nothing stored."""

from __future__ import annotations

import re

import duckdb
import pyarrow as pa

from tickbench.engines.base import Engine


class Adapter(Engine):
    con: duckdb.DuckDBPyConnection | None = None

    @classmethod
    def probe(cls) -> str:
        return "toy " + duckdb.__version__

    def start(self) -> None:
        self.con = duckdb.connect()

    def stop(self) -> None:
        if self.con is not None:
            self.con.close()
            self.con = None

    def load(self) -> int:
        assert self.con is not None
        files = [str(f) for f in self.dataset.files("trades", self.params.days("month"))]
        self.con.read_parquet(files).create_view("trades")
        return int(self.con.sql("SELECT count(*) FROM trades").fetchall()[0][0])

    def run_query(self, qid: str) -> pa.Table:
        assert self.con is not None
        sql = self.query_text(qid)
        binds = self.params.bindings()
        return self.con.sql(sql, params={n: binds[n] for n in re.findall(r"[$]([a-z_]+)", sql)}).to_arrow_table()
'''

QUERIES = {
    "T-V1.sql": "SELECT sym, side, time_bucket(INTERVAL '1 minute', ts) AS bucket, sum(amount) AS volume\n"
                "FROM trades WHERE ts >= $day_start AND ts < $day_end GROUP BY ALL ORDER BY sym, side, bucket;\n",
    "T-VWAP.sql": "SELECT time_bucket(INTERVAL '1 minute', ts) AS bucket, sum(price * amount) / sum(amount) AS vwap\n"
                  "FROM trades WHERE sym = $sym AND ts >= $day_start AND ts < $day_end\n"
                  "GROUP BY bucket ORDER BY bucket;\n",
}


@pytest.fixture
def toy_env(tmp_path: Path) -> dict[str, str]:
    """A package ``toyengines`` holding one engine folder, ``toy``, importable through PYTHONPATH."""
    pkg = tmp_path / "plugins" / "toyengines"
    folder = pkg / "toy"
    (folder / "queries").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (folder / "__init__.py").write_text("")
    (folder / "engine.toml").write_text(TOY_TOML)
    (folder / "adapter.py").write_text(textwrap.dedent(TOY_ADAPTER))
    for name, text in QUERIES.items():
        (folder / "queries" / name).write_text(text)
    return {**os.environ, "TICKBENCH_ENGINE_PACKAGES": "toyengines", "COLUMNS": "250",
            "PYTHONPATH": os.pathsep.join([str(tmp_path / "plugins"), os.environ.get("PYTHONPATH", "")])}


def _python(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=600)


def test_toy_engine_is_listed_and_in_the_support_matrix(toy_env: dict[str, str]) -> None:
    listed = _python(toy_env, "-m", "tickbench.cli", "engines")
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.strip("│ ").startswith("toy "))
    assert "yes" in row and "toy " in row
    matrix = _python(toy_env, "-c", "from tickbench.docs import support_matrix; print(support_matrix())")
    assert matrix.returncode == 0, matrix.stderr
    def split(line: str) -> list[str]:
        return [c.strip() for c in line.strip().strip("|").split(" | ")]

    lines = matrix.stdout.splitlines()
    col = split(lines[0]).index("toy")
    cells = {split(line)[0]: split(line)[col] for line in lines[2:] if line.startswith("| ") and len(split(line)) > col}
    assert cells["T-V1"].strip() == "✔" and cells["T-VWAP"].strip() == "✔"
    assert "answers two queries" in cells["O-T"]
    assert "no bulk-load capability" in cells["W"] and "no storage capability" in cells["SE"]
    assert "embedded" in matrix.stdout.split("| toy (Toy (DuckDB over the Parquet files)) |")[1].split("\n")[0]


@pytest.mark.slow
def test_toy_engine_runs_and_its_answers_verify(toy_env: dict[str, str], tiny_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = _python(toy_env, "-m", "tickbench.cli", "run", "--engines", "toy", "--data", str(tiny_dir),
                   "--repetitions", "1", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    records = {r["benchmark"]: r for r in json.loads((out / "results.json").read_text())["records"]}
    assert records["T-V1"]["status"] == "ok" and records["T-V1"]["verified"] is True
    assert records["T-VWAP"]["status"] == "ok" and records["T-VWAP"]["verified"] is True
    assert records["O-T"]["status"] == "unsupported"
    assert records["W"]["status"] == "not_applicable" and records["SE"]["status"] == "not_applicable"
    assert records["T-V1"]["query"]["file"].endswith("toy/queries/T-V1.sql")


def test_an_engine_that_does_not_serve_the_market_dataset_is_recorded_with_the_reason(
        toy_env: dict[str, str], market_tiny_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = _python(toy_env, "-m", "tickbench.cli", "run", "--engines", "toy", "--suite", "market", "--data",
                   str(market_tiny_dir), "--repetitions", "1", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    records = json.loads((out / "results.json").read_text())["records"]
    suite = MarketSuite()
    expected = suite.cell_ids(suite.defaults(), Engine)
    assert len(expected) > 17  # the 15 queries, M-W, M-SE and the default users and during-ingest cells
    assert sorted(r["benchmark"] for r in records) == sorted(expected)
    # the toy's engine.toml names no kinds: it serves the paper's dataset alone
    assert all(r["status"] == "unsupported" and "does not serve the market dataset" in r["reason"] for r in records)


@pytest.mark.parametrize("name", list(engine_infos()))
def test_declared_kind_and_gaps_agree_with_the_capabilities(name: str) -> None:
    """engine.toml's kind is what the adapter's capabilities make it, and it gives a reason for
    W, SE or the ingest suites only where the adapter lacks the capability."""
    info = engine_infos()[name]
    try:
        cls = adapter_class(name)
    except ImportError as exc:
        pytest.skip(f"{name}'s client is not installed here ({exc}); `tickbench install {name}`")
    assert info.kind == kind_of(cls), f"{name}: engine.toml says {info.kind}, its capabilities {kind_of(cls)}"
    for bench, cap in (("W", BulkLoad), ("SE", Storage)):
        if bench in info.unsupported:
            assert not issubclass(cls, cap), f"{name} has {cap.__name__} yet declares {bench} unsupported"
    if issubclass(cls, Ingest):
        assert cls.ingest_durability, f"{name} ingests but names no durability setting"
