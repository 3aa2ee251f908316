"""The README's support matrix is generated from the engine folders and kept current."""

from __future__ import annotations

from pathlib import Path

from tickbench.docs import render_readme
from tickbench.engines.registry import engine_infos

README = Path(__file__).resolve().parents[1] / "README.md"


def test_support_matrix_is_current() -> None:
    text = README.read_text()
    assert render_readme(text) == text, "README.md's support matrix is stale: run `make docs`"


def test_every_engine_is_in_the_readme() -> None:
    text = README.read_text()
    for name in engine_infos():
        assert f"| {name} (" in text
