"""The suites beyond the paper on the other engines the issue names (chDB, PostgreSQL,
QuestDB) at a reduced matrix: every cell ok and verified, rows written = rows read back.
DuckDB's runs, and the suites' own properties, are in test_suites_beyond.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tickbench.data.dataset import Dataset
from tickbench.engines.base import EngineUnavailable, Server, SharedReaders
from tickbench.engines.registry import adapter_class
from tickbench.results import Results
from tickbench.run.cell import Protocol
from tickbench.run.session import run
from tickbench.suites.published import QUERY_IDS
from tickbench.suites.registry import run_config, suite_options

pytestmark = [pytest.mark.slow, pytest.mark.server]

SMALL = suite_options(tick_matrix=((2, 200),), tick_reps=1, tick_batch=100, stream_rates=(1000, None),
                      stream_writers=(2,), stream_seconds=2.0, concurrency_clients=(1, 2),
                      concurrency_seconds=2.0, scaling_factor=2.0, scaling_spans=("day", "week"))


@pytest.fixture(params=["chdb", "postgres", "timescaledb", "questdb"])
def engine(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    try:
        adapter_class(name).probe()
    except EngineUnavailable as exc:
        pytest.skip(f"{name} is not installed here ({exc}); `tickbench install {name}`")
    return name


def _run(tiny: Dataset, server_tmp: Path, engine: str, suite: str) -> Results:
    return run(run_config(engines=[engine], data=tiny.root, out=server_tmp / suite, seed=7, suite=suite,
                         protocol=Protocol(warmup=1, repetitions=1, timeout_s=120, load_timeout_s=300),
                         verify_dataset=False, options=SMALL))


def test_every_suite_runs_verified(engine: str, tiny: Dataset, server_tmp: Path) -> None:
    tick = _run(tiny, server_tmp, engine, "tick-latency").records
    assert len(tick) == 2
    for rec in tick:
        assert rec.status == "ok" and rec.verified, (rec.benchmark, rec.reason)
        assert rec.figures["written"] == rec.figures["read"] == 400

    stream = _run(tiny, server_tmp, engine, "stream").records
    assert [r.benchmark for r in stream] == ["stream/rate=1000/writers=2", "stream/rate=max/writers=2"]
    for rec in stream:
        f = rec.figures
        assert rec.status == "ok", (rec.benchmark, rec.reason)
        assert f["written"] == f["read"] == f["counted"] > 0 and f["read_by_table"] == f["written_by_table"]

    conc = _run(tiny, server_tmp, engine, "concurrency").records
    for rec in conc:
        assert rec.status == "ok" and rec.verified, (rec.benchmark, rec.reason)
        # Server engines' clients are separate processes on the one running server.
        cls = adapter_class(engine)
        assert rec.figures["model"] == ("processes" if issubclass(cls, SharedReaders) else "threads")
        assert not issubclass(cls, Server) or issubclass(cls, SharedReaders)
        assert rec.figures["queries"] > 0

    scaling = _run(tiny, server_tmp, engine, "scaling").records
    assert len(scaling) == len(QUERY_IDS)
    for rec in scaling:
        assert rec.status == "ok" and rec.verified, (rec.benchmark, rec.reason)
        assert len(rec.figures["points"]) == 4
