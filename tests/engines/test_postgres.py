"""PostgreSQL engine: installation is idempotent, the server listens on 127.0.0.1 only, a
restart reopens the same cluster, and nothing is left running after stop()."""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tickbench.data.dataset import Dataset
from tickbench.engines.base import Engine, EngineUnavailable
from tickbench.engines.registry import adapter, adapter_class
from tickbench.engines.server import LOOPBACK, port_in_use
from tickbench.params import QueryParams

psycopg = pytest.importorskip("psycopg", reason="the PostgreSQL engine needs psycopg 3 (psycopg[binary])")

from tickbench.engines.postgres import adapter as pg  # noqa: E402 - after the psycopg check


def _installed() -> str:
    try:
        return adapter_class("postgres").probe()
    except EngineUnavailable as exc:
        pytest.skip(f"PostgreSQL is not installed ({exc})")


@pytest.fixture
def workdir() -> Iterator[Path]:
    # Not under pytest's tmp_path: its parents are private to root, and the server runs as
    # the unprivileged service user, which must reach its data directory.
    d = Path(tempfile.mkdtemp(prefix="tickbench-pg-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def engine(workdir: Path, tiny: Dataset, tiny_params: QueryParams) -> Iterator[Engine]:
    _installed()
    e = adapter("postgres", workdir, tiny, tiny_params)
    e.start()
    try:
        yield e
    finally:
        e.stop()


def _listening(pids: list[int]) -> list[Any]:
    return [c for c in psutil.net_connections(kind="inet")
            if c.pid in pids and c.status == psutil.CONN_LISTEN]


@pytest.mark.server
def test_install_is_idempotent(monkeypatch: pytest.MonkeyPatch) -> None:
    version = _installed()
    real_run = subprocess.run

    def no_apt(argv: list[str], *args: Any, **kwargs: Any) -> Any:
        assert argv[0] not in ("apt-get", "apt-cache"), f"install ran {argv} with the server installed"
        return real_run(argv, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", no_apt)  # install runs in engines/server.py
    cls = adapter_class("postgres")
    assert cls.install() == version
    assert cls.install() == version


@pytest.mark.server
def test_listens_only_on_loopback(engine: Engine) -> None:
    pids = engine.memory_pids()
    assert len(pids) > 1, "the postmaster and its background processes"
    listening = _listening(pids)
    assert listening, "the server listens on its TCP port"
    assert {c.laddr.ip for c in listening} == {LOOPBACK}
    assert {c.laddr.port for c in listening} == {engine.port}  # type: ignore[attr-defined]


@pytest.mark.server
def test_stop_leaves_nothing_running(engine: Engine) -> None:
    pids = engine.memory_pids()
    port = engine.port  # type: ignore[attr-defined]
    engine.stop()
    alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert alive == []
    assert not port_in_use(port)
    engine.stop()  # a second stop is harmless


@pytest.mark.server
def test_restart_reopens_the_same_cluster(engine: Engine) -> None:
    conn = engine._conn()  # type: ignore[attr-defined]
    system_id = conn.execute("SELECT system_identifier FROM pg_control_system()").fetchone()[0]
    conn.execute("CREATE TABLE kept (x int)")
    conn.execute("INSERT INTO kept VALUES (42)")
    engine.stop()
    engine.start()
    conn = engine._conn()  # type: ignore[attr-defined]
    assert conn.execute("SELECT system_identifier FROM pg_control_system()").fetchone()[0] == system_id
    assert conn.execute("SELECT x FROM kept").fetchall() == [(42,)]


def test_bindings_are_aware_utc_and_only_those_used() -> None:
    naive = dt.datetime(2022, 6, 18)
    binds = {"day_start": naive, "sym": "BTC-USD", "ot_times": [naive], "week_end": naive}
    out = pg.pg_bindings(binds, "WHERE sym = %(sym)s AND ts >= %(day_start)s AND t = ANY(%(ot_times)s)")
    assert out == {"sym": "BTC-USD", "day_start": naive.replace(tzinfo=dt.UTC),
                   "ot_times": [naive.replace(tzinfo=dt.UTC)]}
