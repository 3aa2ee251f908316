"""Discovers suites from their packages: adding a suite edits nothing here.

Every subpackage of :mod:`tickbench.suites` with a ``suite.py`` that defines ``SUITE`` is a
suite, and so is every subpackage of the packages named in ``$TICKBENCH_SUITE_PACKAGES``
(comma-separated importable package names: suites kept outside tickbench's tree).

The layer above the runner and the reports: it picks the suites a run records and hands them
to :mod:`tickbench.run.session`, and reads results files for the reports with every record's
figures checked against its suite's model (:func:`read_results`).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import ValidationError

from tickbench import results as results_module
from tickbench.results import Results, ResultsError, V1Names
from tickbench.run import session
from tickbench.run.session import RunConfig
from tickbench.suites.base import OptionError, Options, Suite

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


def suite_names() -> tuple[str, ...]:
    """The ``--suite`` values: every suite, then ``all``."""
    return (*suites(), "all")


def chosen(name: str) -> tuple[Suite, ...]:
    """The suites ``--suite name`` records, in report order (``all``: every one); an unknown
    name is a :class:`KeyError` naming the known ones."""
    if name == "all":
        return tuple(suites().values())
    return (suite(name),)


def option_owner(option: str) -> str | None:
    """The suite that declares ``option``, if any."""
    return next((s.name for s in suites().values() if option in s.option_names()), None)


def suite_options(**given: Any) -> dict[str, Options]:
    """Every suite's option values: its defaults, with ``given`` (by option name) in place;
    an option no suite declares is refused."""
    out = {name: s.defaults() for name, s in suites().items()}
    for key, value in given.items():
        owner = option_owner(key)
        if owner is None:
            known = ", ".join(o for s in suites().values() for o in s.option_names())
            raise OptionError(f"unknown suite option {key!r}; known: {known}")
        out[owner][key] = value
    return out


def _v1_suite_of(benchmark: str) -> str:
    """A version-1 benchmark id's suite: ``suite/...``; ids without ``/`` were the first suite's."""
    return benchmark.split("/", 1)[0] if "/" in benchmark else next(iter(suites()))


#: How version-1 results files are read as version 2 (:func:`tickbench.results.migrate_v1`).
V1 = V1Names(suite_of=_v1_suite_of, option_owner=option_owner)


def read_results(path: Path) -> Results:
    """A results file for a report or a comparison: read (a version-1 file migrated), and every
    record's figures checked against its suite's model (a suite this tickbench does not know
    keeps its figures as they are); a file that fails is a :class:`ResultsError` naming it."""
    results = results_module.read_results(path, V1)
    for rec in results.records:
        known = suites().get(rec.suite)
        model = known.figures_model if known is not None else None
        if model is None or not rec.figures:
            continue
        try:
            model.model_validate(rec.figures)
        except ValidationError as exc:
            raise ResultsError(f"{path}: the figures of {rec.engine} {rec.benchmark} do not fit the "
                               f"{rec.suite} suite's model: {exc.errors()[0]['msg']}; re-run that cell") from None
    return results


def run_config(engines: list[str], data: Path, out: Path, seed: int, suite: str = "published",
               options: dict[str, Options] | None = None, **rest: Any) -> RunConfig:
    """A :class:`~tickbench.run.session.RunConfig` for ``--suite suite`` (the suites picked
    here), with every suite's default options unless ``options`` are given."""
    picked = chosen(suite)
    given = options if options is not None else suite_options()
    return RunConfig(engines=engines, data=data, out=out, seed=seed, suites=picked, suite=suite,
                     options={s.name: given.get(s.name, s.defaults()) for s in picked}, v1=V1, **rest)


def resume_config(out: Path, redo: list[str] | None = None) -> RunConfig:
    """The run recorded in ``out``, to continue it, with this tickbench's suites."""
    return session.resume_config(out, suites(), redo, V1)
