"""W is durable on every server engine: right after W returns (its rows committed under the
engine's durable setting and queryable), the server's processes are killed with SIGKILL (by
pid), the server is started again over the same data, and every row W loaded is there: the
count and a checksum of each table equal the bulk-load day's."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import psutil
import pytest

from tickbench.data.dataset import Dataset
from tickbench.datasets.paper.params import QueryParams
from tickbench.engines.base import Engine, EngineUnavailable
from tickbench.engines.registry import adapter, adapter_class
from tickbench.run.visibility import wait_visible

SERVERS = ["postgres", "timescaledb", "questdb", "influxdb"]
# Seconds a restarted server may take to show the rows again (QuestDB re-applies its WAL).
RECOVERY_S = 120.0


def expected(ds: Dataset) -> dict[str, tuple[int, int | None, float, float]]:
    """Each table's (rows, sum of trade_id or None, sum of one price, sum of another) over
    the bulk-load day's Parquet files, which W loads."""
    out: dict[str, tuple[int, int | None, float, float]] = {}
    for table, (a, b) in {"trades": ("price", "amount"), "book": ("b1price", "a1price")}.items():
        frame = pl.concat([pl.read_parquet(f) for f in ds.files(table, [ds.bulk_day])])
        ids = int(frame["trade_id"].sum()) if table == "trades" else None
        out[table] = (frame.height, ids, float(frame[a].sum()), float(frame[b].sum()))
    return out


def _pg(e: Any, table: str) -> tuple[int, int | None, float, float]:
    with e._connect("w_parquet") as c:
        if table == "trades":
            row = c.execute("SELECT count(*), sum(trade_id), sum(price), sum(amount) FROM trades").fetchone()
            return int(row[0]), int(row[1]), float(row[2]), float(row[3])
        row = c.execute("SELECT count(*), sum(b1price), sum(a1price) FROM book").fetchone()
        return int(row[0]), None, float(row[1]), float(row[2])


def _questdb(e: Any, table: str) -> tuple[int, int | None, float, float]:
    if table == "trades":
        row = e._exec("SELECT count(), sum(trade_id), sum(price), sum(amount) FROM w_parquet_trades")["dataset"][0]
        return int(row[0]), int(row[1]), float(row[2]), float(row[3])
    row = e._exec("SELECT count(), sum(b1price), sum(a1price) FROM w_parquet_book")["dataset"][0]
    return int(row[0]), None, float(row[1]), float(row[2])


def _influxdb(e: Any, table: str) -> tuple[int, int | None, float, float]:
    if table == "trades":
        q = "SELECT count(price), sum(trade_id), sum(price), sum(amount) FROM trades"
    else:
        q = "SELECT count(b1price), sum(b1price), sum(a1price) FROM book"
    series = e._query(q, db="w_parquet")[0].get("series", [])
    if not series:
        return 0, None, 0.0, 0.0
    row = series[0]["values"][0][1:]  # after the time column
    if table == "trades":
        return int(row[0]), int(row[1]), float(row[2]), float(row[3])
    return int(row[0]), None, float(row[1]), float(row[2])


READ: dict[str, Callable[[Any, str], tuple[int, int | None, float, float]]] = {
    "postgres": _pg, "timescaledb": _pg, "questdb": _questdb, "influxdb": _influxdb}


def _same(got: tuple[int, int | None, float, float], want: tuple[int, int | None, float, float]) -> bool:
    return (got[0] == want[0] and got[1] == want[1]
            and all(math.isclose(g, w, rel_tol=1e-9) for g, w in zip(got[2:], want[2:], strict=True)))


def _kill(e: Engine) -> list[int]:
    """SIGKILL every process of the engine's server (the children first), by pid."""
    pids = [p for p in e.memory_pids() if p != os.getpid()]
    assert pids, "the engine reports its server's processes"
    for pid in reversed(pids):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return pids


@pytest.mark.server
@pytest.mark.slow
@pytest.mark.parametrize("name", SERVERS)
def test_w_rows_survive_a_kill_right_after_w(name: str, server_tmp: Path, tiny: Dataset,
                                             tiny_params: QueryParams) -> None:
    try:
        adapter_class(name).probe()
    except EngineUnavailable as exc:
        pytest.skip(f"{name} is not available here: {exc}")
    e = adapter(name, server_tmp, tiny, tiny_params)
    want = expected(tiny)
    e.start()
    try:
        figures = e.bulk_load("parquet", server_tmp / "w")
        wait_visible(e)  # W's clock stops here, as the runner's does
        assert figures.committed_rows() == sum(w[0] for w in want.values())
        assert "durability" in figures.detail, "every W record states its durability setting"
        pids = _kill(e)
        psutil.wait_procs([p for p in map(_process, pids) if p is not None], timeout=30)
        assert not [p for p in pids if _alive(p)], "every server process is gone"
        e.stop()  # closes the client side; the server is already gone
        e.start()  # the same data directory, a new server process
        got: dict[str, tuple[int, int | None, float, float]] = {}
        deadline = time.monotonic() + RECOVERY_S
        while True:
            got = {t: READ[name](e, t) for t in want}
            if all(_same(got[t], want[t]) for t in want) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        for table in want:
            assert _same(got[table], want[table]), f"{name} {table} after the kill: {got[table]} != {want[table]}"
    finally:
        e.stop()


def _process(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
