"""The code's structure: no import cycle between tickbench's modules, no private name imported
across modules, and no adapter that sleeps, polls or reads a clock (the runner owns the clock)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "tickbench"


def _module(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


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


def _modules() -> dict[str, Path]:
    return {_module(p): p for p in PACKAGE.rglob("*.py")}


def _resolve(target: str, name: str, mods: dict[str, Path]) -> str | None:
    """The tickbench module ``from target import name`` depends on."""
    if f"{target}.{name}" in mods:
        return f"{target}.{name}"
    return target if target in mods else None


def test_no_import_cycles() -> None:
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        for target, names in _top_level_imports(path):
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
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                cycle = [*stack[stack.index(d):], d]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


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
