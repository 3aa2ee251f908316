"""PostgreSQL engine: installation is idempotent, the server listens on 127.0.0.1 only, a
restart reopens the same cluster, and nothing is left running after stop()."""

from __future__ import annotations

import datetime as dt
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tickbench.data.dataset import Dataset
from tickbench.datasets.paper.params import QueryParams
from tickbench.engines.base import Engine, EngineUnavailable
from tickbench.engines.registry import adapter, adapter_class
from tickbench.engines.server import LOOPBACK, port_in_use

psycopg = pytest.importorskip("psycopg", reason="the PostgreSQL engine needs psycopg 3 (psycopg[binary])")

from tickbench.engines.postgres import adapter as pg  # noqa: E402 - after the psycopg check
from tickbench.engines.postgres.server import partition_name  # noqa: E402


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
def test_data_directory_is_private_and_the_password_required(engine: Engine) -> None:
    """pgdata is mode 0700, the servers' user's; the random superuser password is required (a
    wrong one is refused on 127.0.0.1)."""
    import os
    import pwd
    import stat

    from tickbench.engines.server import ensure_service_user

    root: Path = engine.root  # type: ignore[attr-defined]
    st = root.stat()
    assert stat.S_IMODE(st.st_mode) == 0o700
    service = ensure_service_user()
    assert st.st_uid == (os.getuid() if service is None else pwd.getpwnam(service).pw_uid)
    password_file: Path = engine.password_file  # type: ignore[attr-defined]
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(host=LOOPBACK, port=engine.port, user="postgres", dbname="postgres",  # type: ignore[attr-defined]
                        password=password_file.read_text() + "x", connect_timeout=30).close()


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


def _partitions(conn: Any, table: str) -> list[str]:
    return [r[0] for r in conn.execute("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                                       "WHERE i.inhparent = %s::regclass ORDER BY 1", [table]).fetchall()]


@pytest.mark.server
@pytest.mark.slow
def test_load_partitions_by_day_and_plans_keep_their_days(engine: Engine, tiny_params: QueryParams) -> None:
    rows = engine.load()
    conn = engine._conn()  # type: ignore[attr-defined]
    days = tiny_params.load_days()
    for t in ("trades", "book"):
        assert _partitions(conn, t) == sorted(partition_name(t, d) for d in days)
    assert rows == sum(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("trades", "book"))
    # A week's and a day's queries keep only their days' partitions, at plan time; the top of
    # book is read from the covering index alone.
    week = {partition_name("book", d) for d in tiny_params.days("week")}
    for qid, kept in (("O-V1", week), ("C-VO2", week),
                      ("C-VO1", {partition_name("book", tiny_params.day)})):
        plan = engine.explain(qid) or ""
        assert set(re.findall(r"book_\d{8}", plan)) == kept, (qid, plan)
        assert "Index Only Scan using book_" in plan and "Heap Fetches: 0" in plan, (qid, plan)
        if qid != "O-V1":  # the closes read S's rows in the index's ts order: no sort of the rows
            assert not re.search(r"Sort Key: [^\n]*\bbook(_\d+)?\.ts", plan), (qid, plan)
    # O-T's lookups each plan one or two days (the statements its function ran), never the month.
    plan = engine.explain("O-T") or ""
    nested = plan.split("(a statement the lookup function ran)")[1:]
    assert nested and all(1 <= len(set(re.findall(r"book_\d{8}", n))) <= 2 for n in nested), plan
    # SE is the month's partitions: every loaded day but the multi-exchange one.
    se = engine.storage_bytes()
    month = [partition_name(t, d) for t in ("trades", "book") for d in tiny_params.days("month")]
    assert se["total_relation_size"] == sum(conn.execute("SELECT pg_total_relation_size(%s::regclass)",
                                                         [p]).fetchone()[0] for p in month)
    assert se["data_bytes"] + se["index_bytes"] == se["total_relation_size"] > 0
    assert se["index_bytes"] > 0 and se["log_bytes"] > 0  # the btree indexes apart; pg_wal holds segments


def test_partition_names_are_dates_only() -> None:
    assert partition_name("book", "2022-06-18") == "book_20220618"
    with pytest.raises(ValueError):
        partition_name("book", "2022-06-18; DROP TABLE book")
