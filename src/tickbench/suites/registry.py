"""Discovers suites from their packages: adding a suite edits nothing here.

Every subpackage of :mod:`tickbench.suites` with a ``suite.py`` that defines ``SUITE`` is a
suite, and so is every subpackage of the packages named in ``$TICKBENCH_SUITE_PACKAGES``
(comma-separated importable package names: suites kept outside tickbench's tree).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from functools import cache
from types import ModuleType

from tickbench.suites.base import Suite

PACKAGES_ENV = "TICKBENCH_SUITE_PACKAGES"


def _packages() -> list[ModuleType]:
    names = ["tickbench.suites", *(p.strip() for p in os.environ.get(PACKAGES_ENV, "").split(",") if p.strip())]
    return [importlib.import_module(n) for n in names]


@cache
def suites() -> dict[str, Suite]:
    """Every suite, by name, in report order."""
    found: list[Suite] = []
    for package in _packages():
        for mod in pkgutil.iter_modules(package.__path__):
            if not mod.ispkg:
                continue
            try:
                module = importlib.import_module(f"{package.__name__}.{mod.name}.suite")
            except ModuleNotFoundError as exc:
                if exc.name == f"{package.__name__}.{mod.name}.suite":
                    continue  # a package without a suite
                raise
            suite = getattr(module, "SUITE", None)
            if isinstance(suite, Suite):
                found.append(suite)
    return {s.name: s for s in sorted(found, key=lambda s: (s.order, s.name))}


def suite(name: str) -> Suite:
    """The suite ``name``; :class:`KeyError` naming the known ones when there is none."""
    known = suites()
    if name not in known:
        raise KeyError(f"unknown suite {name!r}; known: {', '.join(known)}")
    return known[name]
