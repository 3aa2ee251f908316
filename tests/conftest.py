"""Shared fixtures: one tiny dataset (scale 0.01, seed 7) generated once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tickbench.data.dataset import Dataset, generate
from tickbench.suites.published import QueryParams, query_params

TINY_SCALE = 0.01
TINY_SEED = 7
# The content hash of the tiny dataset. It changes only when the generator changes; then
# bump GENERATOR_VERSION, note it in CHANGELOG.md and update this pin.
TINY_HASH = "6ecbd0653683901c5596b66feca38482"


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny") / "data"
    generate(out, TINY_SCALE, TINY_SEED, jobs=2)
    return out


@pytest.fixture(scope="session")
def tiny(tiny_dir: Path) -> Dataset:
    return Dataset.open(tiny_dir)


@pytest.fixture(scope="session")
def tiny_params(tiny: Dataset) -> QueryParams:
    return query_params(tiny.params, TINY_SEED)
