"""A server engine that fails under the run: killed mid-query (that cell is recorded, the
server restarted, the other cells measured), killed mid-load (its cells are recorded as
errors, the other engine's are intact), a port already in use and a server that does not come
up in time (each refused with a message naming it and what to do, nothing left running)."""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path

import psutil
import pytest

from tests.conftest import processes_under
from tickbench.data.dataset import Dataset
from tickbench.datasets.paper.params import QueryParams
from tickbench.engines.base import EngineUnavailable
from tickbench.engines.registry import adapter, adapter_class
from tickbench.engines.server import LOOPBACK, START_TIMEOUT_ENV
from tickbench.results import Results
from tickbench.run.cell import Protocol
from tickbench.run.faults import FAULTS_ENV
from tickbench.run.session import run
from tickbench.suites.published import QUERY_IDS
from tickbench.suites.registry import run_config

pytestmark = [pytest.mark.server, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _postgres_installed() -> None:
    try:
        adapter_class("postgres").probe()
    except EngineUnavailable as exc:
        pytest.skip(f"PostgreSQL is not installed here ({exc}); `tickbench install postgres`")


def _run(tiny: Dataset, server_tmp: Path, engines: list[str]) -> Results:
    return run(run_config(engines=engines, data=tiny.root, out=server_tmp / "r", seed=7,
                         protocol=Protocol(warmup=1, repetitions=1, timeout_s=120, load_timeout_s=300),
                         verify_dataset=False))


def test_server_killed_mid_query(tiny: Dataset, server_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULTS_ENV, "postgres:kill_server=O-S")
    results = _run(tiny, server_tmp, ["postgres"])
    by_id = {r.benchmark: r for r in results.records}
    assert by_id["O-S"].status == "error" and "server process ended" in by_id["O-S"].reason
    # The server was restarted: every later query, W and SE were measured and verified.
    for qid in [*QUERY_IDS, "W", "SE"]:
        if qid != "O-S":
            assert by_id[qid].status == "ok" and by_id[qid].verified, (qid, by_id[qid].reason)
    assert not processes_under(server_tmp), "a postgres process was left running"


class Watch:
    """Every process of the servers under ``root`` (the postmaster, named by its data directory,
    and its children: the backends, the load's among them) while a run goes on, sampled from a
    thread by (pid, start time), and the /dev/shm files they map: what the test itself started,
    collected before any kill re-parents a backend to init, where nothing names ``root`` any more."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.seen: dict[tuple[int, float], str] = {}
        self.shm: set[Path] = set()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self.done.is_set():
            for proc in processes_under(self.root):
                with contextlib.suppress(psutil.Error, OSError):
                    self.seen.setdefault((proc.pid, proc.create_time()), " ".join(proc.cmdline()))
                    maps = Path(f"/proc/{proc.pid}/maps").read_text().split()
                    self.shm |= {Path(w) for w in maps if w.startswith("/dev/shm/")}
            self.done.wait(0.02)

    def __enter__(self) -> Watch:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()

    def left(self) -> list[str]:
        """The processes seen that still run (the same pid and start time, not a zombie)."""
        out = []
        for (pid, created), cmd in self.seen.items():
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                if proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE:
                    out.append(f"{pid} {cmd}")
        return out


def test_server_killed_mid_load(tiny: Dataset, server_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULTS_ENV, "postgres:kill_server_load=0.3")
    with Watch(server_tmp) as watch:
        results = _run(tiny, server_tmp, ["postgres", "duckdb"])
    pg = [r for r in results.records if r.engine == "postgres"]
    duck = [r for r in results.records if r.engine == "duckdb"]
    assert len(pg) == len(duck) == len(QUERY_IDS) + 2
    assert all(r.status == "error" and "did not start or load" in r.reason for r in pg), \
        [(r.benchmark, r.status, r.reason[:200]) for r in pg if "did not start or load" not in r.reason]
    assert all(r.status == "ok" for r in duck), [(r.benchmark, r.reason) for r in duck if r.status != "ok"]
    # the postmaster and its backends were seen, and not one of them is left (the kill reached the
    # whole process group), nor a dynamic shared memory segment of theirs in /dev/shm
    assert any("postgres:" in cmd for cmd in watch.seen.values()), watch.seen
    assert not watch.left(), f"left running: {watch.left()}"
    assert not processes_under(server_tmp), "a postgres process was left running"
    assert not [p for p in watch.shm if p.exists()], f"left in /dev/shm: {watch.shm}"


def test_port_in_use_is_named(tiny: Dataset, tiny_params: QueryParams, server_tmp: Path,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind((LOOPBACK, 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setenv("TICKBENCH_POSTGRES_PORT", str(port))
        engine = adapter("postgres", server_tmp / "pg", tiny, tiny_params)
        with pytest.raises(EngineUnavailable, match=f"port {port}.*already in use.*TICKBENCH_POSTGRES_PORT"):
            engine.start()
        engine.stop()
        # Through a run: every cell says why, and the run goes on to write its results.
        results = _run(tiny, server_tmp, ["postgres"])
    assert all(r.status == "error" and f"port {port}" in r.reason for r in results.records)
    assert (server_tmp / "r" / "results.json").is_file() and not (server_tmp / "r" / "work").exists()


def test_server_start_timeout_is_named_and_stopped(tiny: Dataset, tiny_params: QueryParams, server_tmp: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(START_TIMEOUT_ENV, "0.05")
    engine = adapter("postgres", server_tmp / "pg", tiny, tiny_params)
    with pytest.raises(EngineUnavailable, match=f"did not answer within 0.05 s.*{START_TIMEOUT_ENV}"):
        engine.start()
    engine.stop()
    assert not processes_under(server_tmp), "the server that did not come up was left running"
    monkeypatch.setenv(START_TIMEOUT_ENV, "soon")
    with pytest.raises(EngineUnavailable, match=f"{START_TIMEOUT_ENV}='soon'"):
        engine.start()
    engine.stop()
