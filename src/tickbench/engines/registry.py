"""Discovers engines from their folders: adding an engine edits nothing here."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from tickbench.engines.base import ENGINES_DIR, Engine, EngineInfo, EngineUnavailable


def engine_infos() -> dict[str, EngineInfo]:
    """Every engine folder (one holding an ``engine.toml``), by name."""
    return {
        d.name: EngineInfo.read(d)
        for d in sorted(ENGINES_DIR.iterdir())
        if d.is_dir() and (d / "engine.toml").is_file()
    }


def adapter_class(name: str) -> type[Engine]:
    """The ``Adapter`` class of engine ``name`` (imports its client library)."""
    infos = engine_infos()
    if name not in infos:
        raise KeyError(f"unknown engine {name!r}; known: {', '.join(infos)}")
    module = importlib.import_module(f"tickbench.engines.{name}.adapter")
    cls: type[Engine] = module.Adapter
    cls.info = infos[name]
    return cls


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
