"""The Python packages the engines' clients need, read from every engine folder's ``engine.toml``
(``pip``): ``make venv`` installs them, so an engine's client is named in its folder alone.

``python -m tickbench.engines.requirements`` prints them, one per line (only ``tomllib`` is read
here, so it runs before any engine's client is installed).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ENGINES = Path(__file__).parent


def requirements(root: Path = ENGINES) -> list[str]:
    """Every engine folder's ``pip`` requirements under ``root``, each once, in folder order."""
    found: dict[str, None] = {}
    for toml in sorted(root.glob("*/engine.toml")):
        for req in tomllib.loads(toml.read_text()).get("pip", []):
            found.setdefault(str(req), None)
    return list(found)


if __name__ == "__main__":
    print("\n".join(requirements()))
