"""The code's structure: no import cycle between tickbench's modules (every import counted: those
inside functions and under ``if TYPE_CHECKING`` too), imports that run one way only down the
layers (cli -> suites -> run -> engines -> data; the reports read the results), suites that
are leaves of each other (no suite imports another, no engine imports any), the runner, the
reports and the results file knowing no suite, no private name imported across modules, no
adapter that sleeps, polls or reads a clock (the runner owns the clock), and every benchmark
script starting. Each structural check is a function of a parsed import graph, and a test
builds a package with every violation in a temporary folder to show that the check sees it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "tickbench"


def _module(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _all_imports(path: Path, src: Path = SRC) -> list[tuple[str, list[str]]]:
    """(module, names) of every import statement in a module, wherever it stands (at the top,
    inside a function, under ``if TYPE_CHECKING``), relative imports resolved."""
    tree = ast.parse(path.read_text())
    here = _module(path, src).split(".") if path.is_relative_to(src) else []
    package = here if path.name == "__init__.py" else here[:-1]
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package[: len(package) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            out.append((base, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
    return out


def _top_level_imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of the imports a module runs when it is imported (not those inside
    functions, nor under ``if TYPE_CHECKING``)."""
    tree = ast.parse(path.read_text())
    out: list[tuple[str, list[str]]] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
    return out


def _modules(src: Path = SRC) -> dict[str, Path]:
    return {_module(p, src): p for p in (src / "tickbench").rglob("*.py")}


def _resolve(target: str, name: str, mods: dict[str, Path]) -> str | None:
    """The tickbench module ``from target import name`` depends on."""
    if f"{target}.{name}" in mods:
        return f"{target}.{name}"
    return target if target in mods else None


def _graph(src: Path = SRC) -> dict[str, set[str]]:
    """Module -> the tickbench modules it imports, anywhere in it (of the tree under ``src``)."""
    mods = _modules(src)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        for target, names in _all_imports(path, src):
            if not target.startswith("tickbench"):
                continue
            for name in names or [""]:
                dep = _resolve(target, name, mods) if name else (target if target in mods else None)
                if dep and dep != mod:
                    graph[mod].add(dep)
    # A package's __init__ runs before its submodules: importing a.b.c imports a and a.b too.
    for mod in list(graph):
        for dep in list(graph[mod]):
            parts = dep.split(".")
            graph[mod].update(".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in mods
                              and not mod.startswith(".".join(parts[:i])))
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """An import cycle of ``graph``, or ``None``."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                return [*stack[stack.index(d):], d]
            if d not in state and (found := visit(d)):
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_no_import_cycles() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_check_sees_function_level_imports(tmp_path: Path) -> None:
    """The cycle the results file once closed through an import inside a function."""
    graph = {"tickbench.results": {"tickbench.suites.registry"}, "tickbench.suites.registry": {"tickbench.results"}}
    assert _cycle(graph) == ["tickbench.results", "tickbench.suites.registry", "tickbench.results"]
    module = tmp_path / "mod.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tickbench.run.cell import X\n"
                      "def f():\n    from tickbench.suites.registry import suites\n")
    assert {t for t, _ in _all_imports(module)} >= {"tickbench.run.cell", "tickbench.suites.registry"}


#: The layers, each with the modules in it (a name and what is under it) and the layers it may
#: import besides its own: cli -> suites -> run -> engines -> data, the reports reading only the
#: results (and the latency histograms they hold). ``data`` is the datasets and their specs
#: (parameters, reference answers, the paper's benchmarks), which the engines read too; ``base``
#: what every layer may use. A module in no layer fails the test: place a new one here.
LAYERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "cli": (("tickbench.cli", "tickbench.docs"), ("suites", "report", "run", "engines", "data", "base")),
    "suites": (("tickbench.suites",), ("run", "report", "engines", "data", "base")),
    "run": (("tickbench.run",), ("engines", "data", "base")),
    "report": (("tickbench.report",), ("base",)),
    "engines": (("tickbench.engines",), ("data", "base")),
    "data": (("tickbench.data", "tickbench.datasets", "tickbench.rng"), ("base",)),
    "base": (("tickbench.results", "tickbench.latency", "tickbench.verify", "tickbench.signals"), ()),
}


def _layer(mod: str) -> str | None:
    """The layer of ``mod`` (the package ``tickbench`` itself, its version, is ``base``)."""
    if mod == "tickbench":
        return "base"
    found = [(len(p), name) for name, (prefixes, _) in LAYERS.items() for p in prefixes
             if mod == p or mod.startswith(p + ".")]
    return max(found)[1] if found else None


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a layer to one it may not import (a higher one, or the reports reaching
    past the results), and every module in no layer."""
    bad = [f"{mod} is in no layer (tests/test_structure.py LAYERS)" for mod in graph if _layer(mod) is None]
    for mod, deps in sorted(graph.items()):
        here = _layer(mod)
        for dep in sorted(deps):
            there = _layer(dep)
            if here and there and there != here and there not in LAYERS[here][1]:
                bad.append(f"{mod} ({here}) imports {dep} ({there})")
    return bad


def _suite(mod: str, graph: dict[str, set[str]]) -> str | None:
    """The suite package ``mod`` belongs to (``tickbench.suites.<name>``), or ``None``: a suite is
    a package under ``tickbench.suites``; a module there (base, harness, cells, ...) is shared."""
    parts = mod.split(".")
    if parts[:2] != ["tickbench", "suites"] or len(parts) < 3:
        return None
    package = ".".join(parts[:3])
    return package if any(m.startswith(package + ".") for m in graph) or len(parts) > 3 else None


def suite_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a suite by another suite, by a shared module under ``suites/`` (which
    must stay below every suite) or by an engine."""
    bad = []
    for mod, deps in sorted(graph.items()):
        mine = _suite(mod, graph)
        for dep in sorted(deps):
            theirs = _suite(dep, graph)
            if theirs is None or theirs == mine:
                continue
            if mine is not None:
                bad.append(f"suite {mine} imports suite {theirs} ({mod} -> {dep})")
            elif mod.startswith("tickbench.suites"):
                bad.append(f"shared suite module {mod} imports suite {theirs} ({dep})")
            elif _layer(mod) == "engines":
                bad.append(f"engine module {mod} imports suite {theirs} ({dep})")
    bad += [f"engine module {mod} imports {dep}" for mod, deps in sorted(graph.items()) if _layer(mod) == "engines"
            for dep in sorted(deps) if dep.split(".")[:2] == ["tickbench", "suites"] and _suite(dep, graph) is None]
    return bad


def test_imports_run_down_the_layers() -> None:
    bad = layer_violations(_graph())
    assert not bad, "imports against the layers:\n" + "\n".join(bad)


def test_suites_are_leaves_of_each_other() -> None:
    """No suite imports another suite, nor a shared module under suites/ any suite, nor an engine
    any suite: what two suites share lives below them (suites/base.py, suites/harness.py, the
    datasets' specs)."""
    bad = suite_violations(_graph())
    assert not bad, "\n".join(bad)


VIOLATING = {  # a package with one of each violation the checks above must see
    "tickbench/__init__.py": "",
    "tickbench/results.py": "",
    "tickbench/suites/__init__.py": "",
    "tickbench/suites/base.py": "from tickbench.results import X\n",
    "tickbench/suites/harness.py": "def f():\n    from tickbench.suites.b import ops\n",
    "tickbench/suites/a/__init__.py": "",
    "tickbench/suites/a/suite.py": "from tickbench.suites.base import Suite\nfrom tickbench.suites.b.ops import op\n",
    "tickbench/suites/b/__init__.py": "",
    "tickbench/suites/b/ops.py": "from ...engines.x import adapter\n",  # relative: resolved as the others
    "tickbench/run/__init__.py": "",
    "tickbench/run/cell.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from tickbench.suites.base import S\n"),
    "tickbench/engines/__init__.py": "",
    "tickbench/engines/x/__init__.py": "",
    "tickbench/engines/x/adapter.py": ("from tickbench.data import d\n\n"
                                       "def g():\n    from tickbench.suites.a import BY_ID\n"),
    "tickbench/data/__init__.py": "",
    "tickbench/data/d.py": "import tickbench.engines.x.adapter\n",
    "tickbench/report/__init__.py": "",
    "tickbench/report/page.py": "from tickbench.run.cell import Record\n",
    "tickbench/stray.py": "",
}


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_the_structure_checks_fail_on_a_violating_package(tmp_path: Path) -> None:
    graph = _graph(_tree(tmp_path / "bad", VIOLATING))
    a_b = "suite tickbench.suites.a imports suite tickbench.suites.b (tickbench.suites.a.suite -> "
    assert set(suite_violations(graph)) == {
        a_b + "tickbench.suites.b.ops)", a_b + "tickbench.suites.b)",
        "shared suite module tickbench.suites.harness imports suite tickbench.suites.b (tickbench.suites.b.ops)",
        "shared suite module tickbench.suites.harness imports suite tickbench.suites.b (tickbench.suites.b)",
        "engine module tickbench.engines.x.adapter imports suite tickbench.suites.a (tickbench.suites.a)",
        "engine module tickbench.engines.x.adapter imports tickbench.suites",
    }
    assert set(layer_violations(graph)) == {
        "tickbench.stray is in no layer (tests/test_structure.py LAYERS)",
        "tickbench.run.cell (run) imports tickbench.suites (suites)",
        "tickbench.run.cell (run) imports tickbench.suites.base (suites)",
        "tickbench.engines.x.adapter (engines) imports tickbench.suites (suites)",
        "tickbench.engines.x.adapter (engines) imports tickbench.suites.a (suites)",
        "tickbench.data.d (data) imports tickbench.engines (engines)",
        "tickbench.data.d (data) imports tickbench.engines.x (engines)",
        "tickbench.data.d (data) imports tickbench.engines.x.adapter (engines)",
        "tickbench.report.page (report) imports tickbench.run (run)",
        "tickbench.report.page (report) imports tickbench.run.cell (run)",
    }
    assert _cycle(graph) is not None
    # The same package without them passes every check.
    fixed = {**VIOLATING, "tickbench/suites/harness.py": "", "tickbench/suites/a/suite.py":
             "from tickbench.suites.base import Suite\nfrom tickbench.suites.harness import f\n",
             "tickbench/suites/b/ops.py": "from tickbench.engines.x import adapter\n",
             "tickbench/run/cell.py": "from tickbench.engines.x import adapter\n",
             "tickbench/engines/x/adapter.py": "from tickbench.data import d\n", "tickbench/data/d.py": "",
             "tickbench/report/page.py": "from tickbench.results import Results\n"}
    del fixed["tickbench/stray.py"]
    graph = _graph(_tree(tmp_path / "good", fixed))
    assert suite_violations(graph) == [] and layer_violations(graph) == [] and _cycle(graph) is None


#: The layers that know no suite: the runner, the reports and the results file.
SUITE_FREE = ("tickbench.run", "tickbench.report", "tickbench.results")


def _suite_free(mod: str) -> bool:
    return any(mod == layer or mod.startswith(layer + ".") for layer in SUITE_FREE)


def test_runner_reports_and_results_import_no_suite() -> None:
    bad = sorted(f"{mod} imports {dep}" for mod, deps in _graph().items() if _suite_free(mod)
                 for dep in deps if dep == "tickbench.suites" or dep.startswith("tickbench.suites."))
    assert not bad, "\n".join(bad)


def _strings(path: Path) -> list[str]:
    """The string constants of a module, docstrings left out."""
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_runner_reports_and_results_name_no_suite() -> None:
    """No suite's name (nor a ``<suite>/`` benchmark id) is written in them: they read suites
    through the attributes the suites declare."""
    from tickbench.suites.registry import suites

    names = set(suites())
    bad = []
    for mod, path in _modules().items():
        if _suite_free(mod):
            bad += [f"{mod}: {text!r}" for text in _strings(path)
                    if text in names or any(text.startswith(f"{n}/") for n in names)]
    assert not bad, "suites named where none may be:\n" + "\n".join(bad)


def test_no_private_names_imported_across_modules() -> None:
    bad = []
    for mod, path in _modules().items():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tickbench"):
                bad += [f"{mod}: from {node.module} import {a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)


# The clock, and the runner's waiting loops: ServerProcess.wait_ready (a server's start) and
# tickbench.run's waits (visibility, settling) are the runner's, never an adapter's.
FORBIDDEN_IN_ADAPTERS = ("time.sleep", "time.monotonic", "time.perf_counter", "time.time(", "perf_counter_ns",
                         "wait_ready(", "wait_visible(", "wait_settled(")


def _clock_uses(path: Path) -> list[str]:
    """What in the module at ``path`` sleeps, polls or reads a clock."""
    found = [f for f in FORBIDDEN_IN_ADAPTERS if f in path.read_text()]
    return found + [f"imports {target}" for target, _ in _top_level_imports(path) if target.startswith("tickbench.run")]


def test_adapters_do_not_sleep_poll_or_time() -> None:
    bad = []
    for path in (PACKAGE / "engines").rglob("*.py"):
        if path.name in ("base.py", "server.py") and path.parent.name == "engines":
            continue  # the contract, and the runner's server lifecycle machinery
        bad += [f"{path.relative_to(SRC)}: {f}" for f in _clock_uses(path)]
    assert not bad, "adapters must leave the clock to the runner:\n" + "\n".join(bad)


def test_the_clock_check_catches_polling_through_the_lifecycle(tmp_path: Path) -> None:
    """InfluxDB's settle wait before it moved to the runner: a poll through the server's
    readiness wait, with no clock of its own in sight."""
    old = tmp_path / "adapter.py"
    old.write_text("from tickbench.run.visibility import wait_visible\n\n"
                   "def _settle(self, db):\n"
                   "    self.server.wait_ready(lambda: settled(self.root, db), timeout=3600.0)\n")
    assert _clock_uses(old) == ["wait_ready(", "imports tickbench.run.visibility"]


def test_engine_processes_are_the_runners_alone() -> None:
    """Suites reach engine processes only through ``run/cell.py``'s Worker: nothing outside the
    runner imports the module that spawns them."""
    bad = sorted(mod for mod, deps in _graph().items()
                 if "tickbench.run.engine_process" in deps and not mod.startswith("tickbench.run"))
    assert not bad, "import tickbench.run.engine_process outside the runner: " + ", ".join(bad)


BENCHMARKS = SRC.parent / "benchmarks"


@pytest.mark.parametrize("script", sorted(p.name for p in BENCHMARKS.glob("*.py")))
def test_every_benchmark_script_starts(script: str) -> None:
    """Each benchmark in benchmarks/ imports what it uses from tickbench as tickbench now has it
    (a moved name breaks a script nothing else runs): ``--help`` exits 0."""
    path = BENCHMARKS / script
    done = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{script}: {done.stderr[-2000:]}"
