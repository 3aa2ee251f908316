"""Queries by fallback: an engine whose ``engine.toml`` names ``queries_from = "<engine>"`` runs its
own query file where it has one and the named engine's otherwise; a name that is no engine, the
engine itself, a cycle or another query language is an error naming the ``engine.toml``; the
support matrix and the recorded query text say whose file ran. TimescaleDB keeps only the files
that differ from PostgreSQL's."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tickbench.docs import support_matrix
from tickbench.engines.base import EngineConfigError, EngineInfo
from tickbench.engines.registry import engine_infos
from tickbench.suites.cells import query_text
from tickbench.suites.market import QUERY_IDS as MARKET_IDS
from tickbench.suites.published import QUERY_IDS

TOML = 'title = "{name}"\nkind = "embedded"\nlanguage = "SQL"\nextension = "{ext}"\ninstall = "nothing"\n{extra}'


def _engine(root: Path, name: str, queries: dict[str, str], extra: str = "", ext: str = "sql") -> Path:
    folder = root / name
    (folder / "queries").mkdir(parents=True)
    (folder / "engine.toml").write_text(TOML.format(name=name, ext=ext, extra=extra))
    for qid, text in queries.items():
        (folder / "queries" / f"{qid}.{ext}").write_text(text)
    return folder


def test_own_file_wins_the_named_engines_is_used_otherwise(tmp_path: Path) -> None:
    base = _engine(tmp_path, "base", {"T-V1": "base T-V1", "O-S": "base O-S"})
    twin = _engine(tmp_path, "twin", {"T-V1": "twin T-V1"}, 'queries_from = "base"\n')
    info = EngineInfo.read(twin, {"base": base, "twin": twin})
    assert info.queries_from == "base" and info.fallback_queries == (base / "queries",)
    assert info.query_text("T-V1") == "twin T-V1" and info.query_owner("T-V1") == "twin"
    assert info.query_text("O-S") == "base O-S" and info.query_owner("O-S") == "base"
    assert info.query_owner("C-R") is None and info.query_file("C-R") == twin / "queries" / "C-R.sql"
    # The recorded query text names the file that ran, in its own engine's folder.
    recorded = query_text(info, "O-S")
    assert recorded is not None and recorded.file == "engines/base/queries/O-S.sql" and recorded.text == "base O-S"
    # Without queries_from, nothing falls back.
    alone = EngineInfo.read(base, {"base": base, "twin": twin})
    assert alone.fallback_queries == () and alone.query_owner("T-V1") == "base"


def test_the_fallback_follows_the_named_engines_own_fallback(tmp_path: Path) -> None:
    a = _engine(tmp_path, "a", {"O-S": "a O-S", "T-V1": "a T-V1"})
    b = _engine(tmp_path, "b", {"T-V1": "b T-V1"}, 'queries_from = "a"\n')
    c = _engine(tmp_path, "c", {}, 'queries_from = "b"\n')
    info = EngineInfo.read(c, {"a": a, "b": b, "c": c})
    assert info.query_owner("T-V1") == "b" and info.query_owner("O-S") == "a"


@pytest.mark.parametrize(("tomls", "words"), [
    ({"twin": 'queries_from = "nosuch"\n'}, ["'nosuch' is not an engine", "known: base, twin"]),
    ({"twin": 'queries_from = "twin"\n'}, ["'twin' is the engine itself"]),
    ({"twin": 'queries_from = "base"\n', "base": 'queries_from = "twin"\n'}, ["a cycle (twin -> base -> twin)"]),
    ({"twin": "queries_from = 3\n"}, ["queries_from = 3 is not an engine"]),
], ids=["unknown", "itself", "cycle", "not-a-name"])
def test_a_bad_queries_from_is_an_error_naming_the_engine_toml(tmp_path: Path, tomls: dict[str, str],
                                                               words: list[str]) -> None:
    folders = {n: _engine(tmp_path, n, {"T-V1": n}, tomls.get(n, "")) for n in ("base", "twin")}
    with pytest.raises(EngineConfigError) as exc:
        EngineInfo.read(folders["twin"], folders)
    message = str(exc.value)
    assert message.startswith(str(folders["twin"] / "engine.toml") + ":") or "cycle" in message
    assert str(tmp_path) in message and "engine.toml" in message
    for w in words:
        assert w in message, message


def test_queries_from_an_engine_of_another_query_language_is_an_error(tmp_path: Path) -> None:
    q = _engine(tmp_path, "q", {"T-V1": "q"}, ext="q")
    twin = _engine(tmp_path, "twin", {}, 'queries_from = "q"\n')
    with pytest.raises(EngineConfigError, match=r"twin/engine.toml: queries_from = 'q', whose query files are \.q"):
        EngineInfo.read(twin, {"q": q, "twin": twin})


def test_the_registry_resolves_a_plugin_engines_queries_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plug-in engine (``$TICKBENCH_ENGINE_PACKAGES``) may name one of tickbench's own engines;
    a bad name stops ``engine_infos()`` with the plug-in's engine.toml named."""
    pkg = tmp_path / "plugins" / "twinengines"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    _engine(pkg, "pgtwin", {"T-V1": "SELECT 1"}, 'queries_from = "timescaledb"\n')
    monkeypatch.syspath_prepend(str(tmp_path / "plugins"))
    importlib.invalidate_caches()
    monkeypatch.setenv("TICKBENCH_ENGINE_PACKAGES", "twinengines")
    info = engine_infos()["pgtwin"]
    assert info.query_owner("T-V1") == "pgtwin"
    assert info.query_owner("O-T") == "timescaledb" and info.query_owner("O-S") == "postgres"
    (pkg / "pgtwin" / "engine.toml").write_text(TOML.format(name="pgtwin", ext="sql", extra='queries_from = "pg"\n'))
    with pytest.raises(EngineConfigError, match=r"pgtwin/engine.toml: queries_from = 'pg' is not an engine"):
        engine_infos()
    # The command line says it in one line naming the file, exit status 2, no traceback.
    env = {**os.environ, "TICKBENCH_ENGINE_PACKAGES": "twinengines", "COLUMNS": "400",
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "plugins"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "tickbench.cli", "engines"], env=env, capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("error:") and "pgtwin/engine.toml: queries_from = 'pg' is not an engine" in lines[0]


def test_timescaledb_keeps_only_the_files_that_differ_from_postgres() -> None:
    infos = engine_infos()
    tsdb, pg = infos["timescaledb"], infos["postgres"]
    assert tsdb.queries_from == "postgres"
    own = sorted((tsdb.folder / "queries").glob("*.sql"))
    assert own, "TimescaleDB has query files of its own"
    same = [p.name for p in own if (pg.folder / "queries" / p.name).is_file()
            and p.read_bytes() == (pg.folder / "queries" / p.name).read_bytes()]
    assert not same, f"identical to PostgreSQL's, delete them (queries_from): {same}"
    owners = {qid: tsdb.query_owner(qid) for qid in (*QUERY_IDS, *MARKET_IDS)}
    assert None not in owners.values(), owners  # every paper and market query resolves
    assert {"postgres", "timescaledb"} == set(owners.values())
    for qid, owner in owners.items():
        assert tsdb.query_file(qid).parent == infos[owner].folder / "queries"  # type: ignore[index]


def test_the_support_matrix_says_whose_query_file_runs() -> None:
    lines = support_matrix().splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    tsdb, pg = header.index("timescaledb"), header.index("postgres")
    rows = {cells[0]: cells for line in lines[2:] if line.startswith("| ")
            if (cells := [c.strip() for c in line.strip("|").split("|")])}
    info = engine_infos()["timescaledb"]
    for qid in QUERY_IDS:
        want = "✔" if info.query_owner(qid) == "timescaledb" else "✔ from postgres"
        assert rows[qid][tsdb] == want, (qid, rows[qid][tsdb])
        assert rows[qid][pg] == "✔"
    assert rows["O-S"][tsdb] == "✔ from postgres" and rows["O-T"][tsdb] == "✔"
    # Below the matrix, every file borrowed, the market suite's too.
    borrowed = next(line for line in lines if line.startswith("| timescaledb | postgres's "))
    for qid in (*QUERY_IDS, *MARKET_IDS):
        assert (f" {qid}," in borrowed or f" {qid} |" in borrowed) == (info.query_owner(qid) == "postgres"), qid
