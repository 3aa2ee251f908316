"""kdb+ through PyKX. It needs a licence from KX, so what runs everywhere is its folder, its query
files and parameter text, and its "not available" reason; the queries themselves are checked
against the reference only where PyKX finds a licence (skipped here with the probe's reason)."""

from __future__ import annotations

import ast
import datetime as dt
import re
import sys
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from tickbench import verify
from tickbench.data.dataset import Dataset
from tickbench.datasets.paper import reference
from tickbench.datasets.paper.kind import default_params
from tickbench.datasets.paper.params import QueryParams, query_params
from tickbench.engines.base import EngineUnavailable
from tickbench.engines.kdb import adapter as kdb
from tickbench.engines.registry import adapter, availability, engine_infos
from tickbench.suites.published import QUERY_IDS

PARAMS = query_params(default_params(), 7)
INFO = engine_infos()["kdb"]
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def test_engine_toml_describes_a_licensed_q_engine() -> None:
    assert (INFO.kind, INFO.language, INFO.extension) == ("embedded", "q", "q")
    assert not set(INFO.unsupported) & set(QUERY_IDS)
    assert "licence" in INFO.install and "pip install pykx" in INFO.install and "QLIC" in INFO.install
    assert "[" not in INFO.install, "`tickbench engines` prints it as Rich markup, which eats [...]"
    assert (INFO.folder / "README.md").is_file() and (INFO.folder / "lib.q").is_file()


@pytest.mark.parametrize("qid", QUERY_IDS)
def test_a_q_file_per_query_reading_only_bound_parameters(qid: str) -> None:
    text = INFO.query_text(qid)
    assert text.strip(), f"{qid}.q is empty"
    used = kdb.query_params_used(text)
    bound = set(kdb.q_params(PARAMS.bindings()))
    assert used, f"{qid}.q reads no parameter"
    assert used <= bound, f"{qid}.q reads unbound parameters {used - bound}"
    assert not re.search(r"\bp\[", text), "read parameters as p`name, so the test above sees them"


@pytest.mark.parametrize("path", [*sorted((INFO.folder / "queries").glob("*.q")), INFO.folder / "lib.q"],
                         ids=lambda p: p.name)
def test_q_files_keep_to_what_flatten_understands(path: Path) -> None:
    text = path.read_text()
    for n, line in enumerate(text.splitlines(), 1):
        assert not line.startswith("\\"), f"line {n}: a system command or block comment"
        code = "" if line.lstrip().startswith("/") else line
        for s in STRING.findall(code):
            assert "/" not in s, f"line {n}: '/' inside a string would be taken for a comment"
    flat = kdb.flatten(text)
    assert flat and not flat.endswith(";"), "the last statement is the answer"
    assert "\n" not in flat
    bare = STRING.sub('""', flat)
    for o, c in ("()", "[]", "{}"):
        assert bare.count(o) == bare.count(c), f"unbalanced {o}{c}"


def test_flatten_follows_q_script_rules() -> None:
    text = "/ a comment\n\na:1; / trailing\nf:{[x]\n  y:x+1;\n  y*2}\n  / indented comment\nf a\n"
    assert kdb.flatten(text) == "a:1;f:{[x] y:x+1; y*2};f a"


def test_parameter_text() -> None:
    lit = kdb.q_literal
    assert lit(dt.datetime(2022, 6, 18, 1, 2, 3, 4)) == "2022.06.18D01:02:03.000004000"
    assert lit(dt.date(2022, 6, 18)) == "2022.06.18"
    assert lit('BTC-USD') == '`$"BTC-USD"' and lit('a"b\\') == '`$"a\\"b\\\\"'
    assert lit([dt.datetime(2022, 6, 18)]) == "enlist 2022.06.18D00:00:00.000000000"
    assert lit([]) == '"p"$()'
    params = kdb.q_params(PARAMS.bindings())
    assert params["day"] == (dt.date(2022, 6, 18), dt.date(2022, 6, 18))
    assert params["week"] == (dt.date(2022, 6, 18), dt.date(2022, 6, 24))
    assert params["month"] == (dt.date(2022, 6, 18), dt.date(2022, 7, 17))
    assert params["multi"] == (dt.date(2022, 7, 20), dt.date(2022, 7, 20))
    text = kdb.prelude(PARAMS.bindings())
    keys, values = text.removeprefix("p:").split("!(", 1)
    assert keys.split("`")[1:] == list(params)
    assert values.count(";") == len(params) - 1
    assert ";2022.06.18 2022.06.24;" in values and values.startswith('`$"BTC-USD";2022.06.18D00:00:00.000000000;')


def test_importing_the_adapter_never_imports_pykx() -> None:
    """The registry imports every adapter; pykx is imported only inside functions."""
    tree = ast.parse(Path(kdb.__file__).read_text())
    top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    names = [a.name for n in top for a in n.names] + [n.module or "" for n in top if isinstance(n, ast.ImportFrom)]
    assert not [n for n in names if n.split(".")[0] == "pykx"]


NO_PYKX = r"^not available: kdb\+ needs a licence from KX \(pykx is not installed\)$"


def test_probe_and_start_say_pykx_is_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pykx", None)  # `import pykx` now fails as if not installed
    with pytest.raises(EngineUnavailable, match=NO_PYKX):
        kdb.Adapter.probe()
    with pytest.raises(EngineUnavailable, match=NO_PYKX):
        kdb.Adapter(engine_infos()["kdb"], tmp_path, None, PARAMS).start()  # type: ignore[arg-type]
    avail = availability("kdb")
    assert not avail.available
    assert avail.reason.startswith("not available: kdb+ needs a licence from KX (pykx is not installed); to enable: ")
    assert "pip install pykx" in avail.reason and "QLIC" in avail.reason


def _why_not() -> str | None:
    avail = availability("kdb")
    return None if avail.available else avail.reason


def test_engines_command_lists_kdb_as_not_available(monkeypatch: pytest.MonkeyPatch) -> None:
    if _why_not() is None:
        pytest.skip("kdb+ is available here")
    from tickbench import cli

    monkeypatch.setattr(cli.console, "width", 2000)  # one line per engine
    res = CliRunner().invoke(cli.app, ["engines"])
    assert res.exit_code == 0
    line = next(ln for ln in res.output.splitlines() if re.search(r"│ kdb\s+│", ln))
    assert re.search(r"│ embedded\s+│ no\s+│ not available: kdb\+ needs a licence from KX \(", line)
    assert "to enable: get a licence from KX" in line and "pip install pykx" in line


needs_kdb = pytest.mark.skipif(_why_not() is not None, reason=f"kdb+ not available here: {_why_not()}")


@needs_kdb
@pytest.mark.slow
def test_every_query_matches_the_reference(tiny: Dataset, tiny_params: QueryParams, tmp_path: Path) -> None:
    engine = adapter("kdb", tmp_path / "kdb", tiny, tiny_params)
    engine.start()
    try:
        days = tiny_params.load_days()
        assert engine.load() == tiny.sizes(days)["rows"]
        for qid in QUERY_IDS:
            expected = reference.answer(qid, tiny, tiny_params)
            answer = verify.normalize(pl.from_arrow(engine.run_query(qid)), expected)  # type: ignore[arg-type]
            verdict = verify.compare(answer, expected)
            assert verdict.ok, f"{qid}: {verdict.reason}"
        # The cold protocol: stop, start, and the HDB is mapped again.
        o_b2 = reference.answer("O-B2", tiny, tiny_params).height
        engine.stop()
        engine.start()
        assert engine.run_query("O-B2").num_rows == o_b2
        rows = sum(v["rows"] for v in tiny.manifest.csv.values())
        for fmt in ("csv", "parquet"):
            for _ in range(2):  # a repeated W replaces its store
                assert engine.bulk_load(fmt, tmp_path / "w").rows == rows
                assert engine.baseline_load(fmt, tmp_path / "w").rows == rows
        assert engine.run_query("O-B2").num_rows == o_b2  # W left the query HDB mapped
        se = engine.storage_bytes()
        assert next(iter(se)) == "hdb_month_partitions_and_sym"  # the runner's primary figure
        assert 0 < se["hdb_month_partitions_and_sym"] < se["hdb_total"]
        assert engine.settings()["q"]
    finally:
        engine.stop()
