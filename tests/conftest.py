"""Shared fixtures: one tiny dataset (scale 0.01, seed 7) generated once per test session.

Tests judge behaviour, not timing: every run they start warms each query cell up with one run
(``Protocol(warmup=1, …)`` in the tests that call the runner, ``TICKBENCH_WARMUP=1`` below for
the command lines they start), not the protocol's ten; the warm-up's own tests say theirs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tickbench.data.dataset import Dataset
from tickbench.datasets.base import generate, open_dataset
from tickbench.datasets.market.params import MarketParams, market_params
from tickbench.datasets.paper.params import QueryParams, query_params
from tickbench.results import Results

TINY_SCALE = 0.01
TINY_SEED = 7
# The content hash of the tiny dataset. It changes only when the generator changes; then
# bump GENERATOR_VERSION, note it in CHANGELOG.md and update this pin.
TINY_HASH = "6ecbd0653683901c5596b66feca38482"

os.environ["TICKBENCH_WARMUP"] = "1"  # `tickbench run --warmup`'s default, in every run a test starts


@pytest.fixture(scope="session", autouse=True)
def _servers_can_reach_tmp(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Server engines run as an unprivileged user; pytest makes its temporary directories
    0700, which would keep that user out of the data directories the tests give them."""
    base = tmp_path_factory.getbasetemp()
    for d in [base, *base.parents]:
        if d == Path(d.anchor) or d == Path(tempfile.gettempdir()):
            break
        d.chmod(d.stat().st_mode | 0o011)


@pytest.fixture(autouse=True)
def _servers_can_reach_tmp_path(request: pytest.FixtureRequest) -> None:
    """The same for each test's own ``tmp_path`` (also created 0700)."""
    if "tmp_path" in request.fixturenames:
        path: Path = request.getfixturevalue("tmp_path")
        path.chmod(path.stat().st_mode | 0o011)


@pytest.fixture
def server_tmp() -> Iterator[Path]:
    """A fresh directory for a server engine's data: short (a server's Unix socket path has a
    length limit) and readable by the unprivileged service user the server runs as."""
    d = Path(tempfile.mkdtemp(prefix="tickbench-test-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny") / "data"
    generate(out, TINY_SCALE, TINY_SEED, jobs=2)
    return out


@pytest.fixture(scope="session")
def tiny_run(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Results:
    """A real duckdb run of the published suite on the tiny dataset (2 repetitions), made once per
    session for the report, headline and site tests (each takes its own copy)."""
    from tests.synthetic import real_run

    return real_run(tiny_dir, tmp_path_factory.mktemp("tiny-run") / "out", TINY_SEED, repetitions=2)


@pytest.fixture(scope="session")
def tiny(tiny_dir: Path) -> Dataset:
    return open_dataset(tiny_dir)


# The tiny market dataset (SPEC §1.3): 100 instruments at scale 0.01, seed 7; its content hash
# changes only when the market generator changes (then bump MARKET_GENERATOR_VERSION, note it in
# CHANGELOG.md and update this pin).
MARKET_TINY = {"scale": 0.01, "seed": 7, "universe": 100}
MARKET_TINY_HASH = "dc30df71adecab8356b4fbfb5fc52cd9"


@pytest.fixture(scope="session")
def market_tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("market-tiny") / "data"
    generate(out, MARKET_TINY["scale"], int(MARKET_TINY["seed"]), jobs=2, dataset="market",
             universe=int(MARKET_TINY["universe"]))
    return out


@pytest.fixture(scope="session")
def market_tiny(market_tiny_dir: Path) -> Dataset:
    return open_dataset(market_tiny_dir)


@pytest.fixture(scope="session")
def market_tiny_params(market_tiny: Dataset) -> MarketParams:
    return market_params(market_tiny, int(MARKET_TINY["seed"]))


@pytest.fixture(scope="session")
def tiny_params(tiny: Dataset) -> QueryParams:
    return query_params(tiny.params, TINY_SEED)


def processes_under(path: Path) -> list[psutil.Process]:
    """The live processes a test started for ``path``: those whose command line names it (a
    server's data directory or config), and their descendants. A test judges only these, never
    every process of an engine's name: the machine may be running other work."""
    key = str(path)
    found: dict[int, psutil.Process] = {}
    for p in psutil.process_iter(["cmdline"]):
        try:
            if key in " ".join(p.info["cmdline"] or []):
                found[p.pid] = p
                found.update((c.pid, c) for c in p.children(recursive=True))
        except psutil.Error:
            continue
    alive = []
    for p in found.values():
        with contextlib.suppress(psutil.Error):
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
    return alive
