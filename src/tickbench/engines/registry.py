"""Discovers engines from their folders: adding an engine edits nothing here.

Every folder of ``tickbench/engines`` holding an ``engine.toml`` is an engine, and so is every
such folder of the packages named in ``$TICKBENCH_ENGINE_PACKAGES`` (comma-separated importable
package names: engines kept outside tickbench's tree). The folder's name is the engine's name.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tickbench.data.dataset import Dataset
from tickbench.datasets.base import RunParams
from tickbench.engines.base import ENGINES_DIR, PACKAGES_ENV, Engine, EngineInfo, EngineUnavailable


def _folders() -> dict[str, tuple[str, Path]]:
    """Engine name -> (its adapter's module, its folder), tickbench's own first."""
    roots = [("tickbench.engines", ENGINES_DIR)]
    for given in (name.strip() for name in os.environ.get(PACKAGES_ENV, "").split(",") if name.strip()):
        module = importlib.import_module(given)
        roots += [(given, Path(path)) for path in getattr(module, "__path__", [])]
    out: dict[str, tuple[str, Path]] = {}
    for package, root in roots:
        for d in sorted(root.iterdir()):
            if d.is_dir() and (d / "engine.toml").is_file() and d.name not in out:
                out[d.name] = (f"{package}.{d.name}.adapter", d)
    return out


def engine_infos() -> dict[str, EngineInfo]:
    """Every engine folder (one holding an ``engine.toml``), by name, each ``queries_from``
    resolved against the others (:class:`~tickbench.engines.base.EngineConfigError` when one
    names no engine, itself or a cycle)."""
    folders = {name: folder for name, (_, folder) in _folders().items()}
    return {name: EngineInfo.read(folder, folders) for name, folder in folders.items()}


@cache
def _adapter(module: str) -> type[Engine]:
    cls: type[Engine] = importlib.import_module(module).Adapter
    return cls


def adapter_class(name: str) -> type[Engine]:
    """The ``Adapter`` class of engine ``name`` (imports its client library)."""
    found = _folders()
    if name not in found:
        raise KeyError(f"unknown engine {name!r}; known: {', '.join(found)}")
    return _adapter(found[name][0])


def adapter(name: str, workdir: Path, dataset: Dataset, params: RunParams) -> Engine:
    """An adapter of engine ``name`` over ``workdir`` and ``dataset``, given its description."""
    return adapter_class(name)(engine_infos()[name], workdir, dataset, params)


@dataclass(frozen=True)
class Availability:
    name: str
    available: bool
    version: str
    reason: str


def availability(name: str) -> Availability:
    """Whether engine ``name`` can run here, its version, or why not and how to enable it."""
    info = engine_infos()[name]
    try:
        version = adapter_class(name).probe()
        return Availability(name, True, version, "")
    except (EngineUnavailable, ImportError) as exc:
        return Availability(name, False, "", f"{exc}; to enable: {info.install}")
