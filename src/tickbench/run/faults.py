"""Test-only fault injection, read from ``$TICKBENCH_FAULTS``; never set outside tests.

When the variable names an engine, its engine process runs a subclass of the engine's adapter
made by :func:`with_faults`, which injects the faults around the adapter's own calls; otherwise
nothing of this module is on any timed path.

``duckdb:slow=0.05;duckdb:crash=O-S;duckdb:hang=O-V1;duckdb:wrong=T-V1``: ``slow`` adds seconds
to every query inside the timed interval, ``crash`` ends the worker on that query as an engine
crash would, ``hang`` never returns, ``wrong`` drops the last row of the answer,
``kill_server=ID`` SIGKILLs the engine's server processes as query ID starts,
``kill_server_load=SECONDS`` that long into the load, ``slow_load=SECONDS`` adds seconds to
the load, ``stall=SECONDS@N`` delays the worker's
Nth ingest write once (inside the writer's timed interval), ``lose=N`` acknowledges every Nth
ingest write of a client without making it. A suite's worker operation may read kinds of its
own, or read these its own way, through :func:`faults_of` (e.g. ``ack_delay`` and
``writer_delay`` of a replay of events); each says so where it reads them.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import threading
import time
from collections.abc import Sequence
from typing import Any, ClassVar, cast

import psutil
import pyarrow as pa

from tickbench.engines.base import Engine, Ingest, IngestClient
from tickbench.engines.server import kill_tree, server_leaders

FAULTS_ENV = "TICKBENCH_FAULTS"


def faults(engine: str) -> dict[str, str]:
    """The faults set for ``engine``, by kind."""
    out: dict[str, str] = {}
    for item in os.environ.get(FAULTS_ENV, "").split(";"):
        name, _, spec = item.partition(":")
        if name.strip() == engine and "=" in spec:
            key, _, value = spec.partition("=")
            out[key.strip()] = value.strip()
    return out


def kill_servers(adapter: Engine, delay: float = 0.0) -> None:
    """SIGKILL the adapter's server processes (not the worker) after ``delay`` seconds, from a
    thread, as a server crashing under the worker would: the process group each server leads
    (every process it forked by then), and the processes it had when this was called."""
    pids = [p for p in adapter.memory_pids() if p != os.getpid()]
    groups = server_leaders(pids)

    def kill() -> None:
        time.sleep(delay)
        for pid, created in groups.items():
            kill_tree(pid, created, getattr(adapter, "shm_files", None))
        for pid in pids:
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).send_signal(signal.SIGKILL)

    if delay:
        threading.Thread(target=kill, daemon=True).start()
    else:
        kill()


def inject(fault: dict[str, str], qid: str) -> None:
    """The query faults (crash, hang, slow) for query ``qid``, inside the timed interval."""
    if fault.get("crash") == qid:
        os._exit(137)
    if fault.get("hang") == qid:
        while True:
            time.sleep(3600)
    if "slow" in fault:
        time.sleep(float(fault["slow"]))


class FaultInjection(Engine):
    """The faults of :attr:`injected` around an adapter's load, queries and ingest clients (mixed
    in before the adapter's class by :func:`with_faults`)."""

    injected: ClassVar[dict[str, str]] = {}

    def load(self) -> int:
        if "kill_server_load" in self.injected:
            kill_servers(self, float(self.injected["kill_server_load"]))
        rows = super().load()  # type: ignore[safe-super]  # a mixin: the adapter's own load
        if "slow_load" in self.injected:
            time.sleep(float(self.injected["slow_load"]))
        return rows

    def run_query(self, qid: str) -> pa.Table:
        if self.injected.get("kill_server") == qid:
            kill_servers(self)
        table = super().run_query(qid)  # type: ignore[safe-super]  # the adapter's own query
        inject(self.injected, qid)
        if self.injected.get("wrong") == qid and table.num_rows:
            table = table.slice(0, table.num_rows - 1)
        return table

    def ingest_client(self) -> IngestClient:
        client = cast(Ingest, super()).ingest_client()  # the adapter's own (a mixin's super())
        if "lose" in self.injected:
            return Losing(client, int(self.injected["lose"]))
        if "stall" in self.injected:
            seconds, _, nth = self.injected["stall"].partition("@")
            return Stalling(client, float(seconds), int(nth or 1))
        return client


def with_faults(cls: type[Engine], fault: dict[str, str]) -> type[Engine]:
    """``cls`` with the faults ``fault`` injected (its name, ``info`` and class flags kept)."""
    return type(cls.__name__, (FaultInjection, cls), {"injected": dict(fault), "__module__": cls.__module__})


def faults_of(adapter: Engine) -> dict[str, str]:
    """The faults injected into ``adapter`` (empty unless a test asked for some)."""
    return dict(adapter.injected) if isinstance(adapter, FaultInjection) else {}


class Stalling(IngestClient):
    """Delays the Nth write of the worker (counted over all its clients) once, inside the
    writer's timed interval, as an engine that stalls (a checkpoint, a GC) would."""

    counter = itertools.count(1)  # next() is atomic under the GIL: one count per write

    def __init__(self, inner: IngestClient, seconds: float, nth: int) -> None:
        self.inner, self.seconds, self.nth = inner, seconds, nth

    def write(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        if next(self.counter) == self.nth:
            time.sleep(self.seconds)
        self.inner.write(table, rows)

    def pending_visibility(self) -> bool:
        return self.inner.pending_visibility()

    def close(self) -> None:
        self.inner.close()


class Losing(IngestClient):
    """Acknowledges every Nth write without making it, as an engine that loses acknowledged
    rows would (the durability suite must catch it)."""

    def __init__(self, inner: IngestClient, nth: int) -> None:
        self.inner, self.nth, self.count = inner, nth, 0

    def write(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        self.count += 1
        if self.count % self.nth:
            self.inner.write(table, rows)

    def pending_visibility(self) -> bool:
        return self.inner.pending_visibility()

    def close(self) -> None:
        self.inner.close()
