"""Each engine runs in a worker process of its own.

The worker holds the engine's adapter and times each operation itself, around the adapter
call, with the monotonic ``perf_counter_ns`` clock: the measured interval is exactly the
engine's work plus the transfer of the full result into the worker (what a client waits for),
and nothing of tickbench's process-to-process traffic. The parent (:class:`EngineProcess`)
enforces timeouts: a repetition that does not come back in time, or a worker that dies, is
recorded for its cell, and the worker (and any server it started) is killed and restarted.
A separate process also gives each engine its own memory figures and lets engines such as chDB,
which allow one database path per process, coexist in one run.

The worker's operations are the core ones here (start, stop, info, load, query, bulk, storage,
params, start_shared) and those each suite adds (``worker_ops`` in ``suites/<name>/suite.py``),
found through the suite registry: a new suite adds its operations without editing this file.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import psutil

from tickbench.data.dataset import Dataset
from tickbench.engines.base import Engine
from tickbench.engines.registry import adapter_class
from tickbench.params import QueryParams, params_from_dict
from tickbench.run.faults import faults, inject, kill_servers
from tickbench.run.memory import BUDGET_ENV, GIB, PeakMemory, budget_bytes, tree_rss
from tickbench.run.memory import KIND as MEMORY_KIND
from tickbench.run.visibility import wait_settled, wait_visible
from tickbench.suites.registry import suites


class CellTimeout(Exception):
    """An operation ran past its timeout; the worker was killed."""


class WorkerDied(Exception):
    """The worker process ended (the engine crashed it, or it was killed)."""


class EngineError(Exception):
    """The adapter raised; the message is the engine's error."""


class MemoryBudgetExceeded(WorkerDied):
    """The engine's processes grew past the memory budget; the worker (and its servers) was
    killed before the kernel's OOM killer could end the run."""


SAMPLE_S = 0.25  # how often the parent samples the engine's resident memory while it waits


def _serve(conn: Connection, engine: str, workdir: str, data: str, params: dict[str, Any]) -> None:
    """The worker's loop: one request in, one reply out."""
    os.environ.setdefault("POLARS_MAX_THREADS", str(os.cpu_count() or 1))
    qp = params_from_dict(params)
    adapter: Engine = adapter_class(engine)(Path(workdir), Dataset.open(Path(data)), qp)
    while True:
        msg = conn.recv()
        op = msg["op"]
        try:
            reply = _handle(adapter, op, msg)
        except Exception as exc:
            reply = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
        conn.send(reply)
        if op == "exit":
            return


def _handle(adapter: Engine, op: str, msg: dict[str, Any]) -> dict[str, Any]:
    if op == "start":
        adapter.start()
        return {"pids": [p for p in adapter.memory_pids() if p != os.getpid()]}
    if op == "stop" or op == "exit":
        adapter.stop()
        return {}
    if op == "info":
        endpoint = adapter.endpoint_info()  # an external endpoint's address and server version
        return {"version": adapter.version(), "settings": adapter.settings(),
                **({"endpoint": endpoint} if endpoint else {})}
    if op == "load":
        if "kill_server_load" in faults(adapter.info.name):
            kill_servers(adapter, float(faults(adapter.info.name)["kill_server_load"]))
        t0 = time.perf_counter_ns()
        rows = adapter.load()
        if "slow_load" in faults(adapter.info.name):
            time.sleep(float(faults(adapter.info.name)["slow_load"]))
        wait_visible(adapter)  # the load ends when its rows are queryable
        wait_settled(adapter)  # ... and the engine's own work on them (compaction) is done
        return {"ns": time.perf_counter_ns() - t0, "rows": rows}
    if op == "query":
        fault = faults(adapter.info.name)
        if fault.get("kill_server") == msg["qid"]:
            kill_servers(adapter)
        mem = PeakMemory(adapter.memory_pids())
        mem.start()
        t0 = time.perf_counter_ns()
        table = adapter.run_query(msg["qid"])
        if fault:
            inject(fault, msg["qid"])
        ns = time.perf_counter_ns() - t0
        if fault.get("wrong") == msg["qid"] and table.num_rows:
            table = table.slice(0, table.num_rows - 1)
        return {
            "ns": ns, "server_ns": adapter.query_server_ns(), "rows": table.num_rows, "memory": mem.delta_bytes(),
            "memory_kind": MEMORY_KIND, "engine_memory": adapter.query_memory_bytes(),
            "notes": adapter.query_notes(msg["qid"]),
            "answer": table if msg.get("answer") else None,
        }
    if op == "explain":
        return {"plan": adapter.explain(msg["qid"])}
    if op == "bulk":
        scratch = Path(msg["scratch"])
        load = adapter.baseline_load if msg.get("baseline") else adapter.bulk_load
        t0 = time.perf_counter_ns()
        figures = load(msg["fmt"], scratch)
        wait_visible(adapter)  # W's clock stops when the rows are queryable
        rows = figures.committed_rows()
        return {"ns": time.perf_counter_ns() - t0, "rows": rows,
                "input_bytes": figures.input_bytes, "detail": figures.detail}
    if op == "storage":
        adapter.storage_load()  # the store SE measures, when it is not the loaded one
        wait_visible(adapter)
        wait_settled(adapter)  # SE is measured on the settled store
        return {"bytes": adapter.storage_bytes()}
    if op == "params":
        # The scaling suite rebinds the queries' ranges; the loaded data stay as they are.
        adapter.set_params(params_from_dict(msg["params"]))
        wait_visible(adapter)
        return {}
    if op == "start_shared":
        # No pids reported: a client attached to another worker's server must not kill it.
        adapter.start_shared()
        return {}
    return _suite_op(adapter, op, msg)


def _suite_op(adapter: Engine, op: str, msg: dict[str, Any]) -> dict[str, Any]:
    """An operation a suite adds to the worker (its ``worker_ops``)."""
    for suite in suites().values():
        handler = suite.worker_ops.get(op)
        if handler is not None:
            return handler(adapter, msg, faults(adapter.info.name))
    raise ValueError(f"unknown op {op!r}")


class EngineProcess:
    """The parent's handle on one engine's worker process."""

    def __init__(self, engine: str, workdir: Path, data: Path, params: QueryParams) -> None:
        self.engine = engine
        self.args = (engine, str(workdir), str(data), params.as_dict())
        self.proc: mp.process.BaseProcess | None = None
        self.conn: Connection | None = None
        self.server_pids: list[int] = []
        self.peak_rss = 0  # the largest sampled resident memory of the worker and its servers
        self.budget = budget_bytes()

    def spawn(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, *self.args), daemon=True,
                                name=f"tickbench-{self.engine}")
        self.proc.start()
        child.close()
        self.conn = parent

    def call(self, timeout: float, **msg: Any) -> dict[str, Any]:
        """Send one request and wait up to ``timeout`` seconds for its reply."""
        self.send(**msg)
        return self.receive(timeout)

    def send(self, **msg: Any) -> None:
        """Send one request without waiting (:meth:`receive` collects the reply)."""
        if self.proc is None or self.conn is None:
            self.spawn()
        assert self.conn is not None and self.proc is not None
        try:
            self.conn.send(msg)
        except (BrokenPipeError, ConnectionResetError) as exc:
            code = self.proc.exitcode if self.proc else None
            self.kill()
            raise WorkerDied(f"the engine's process ended (exit code {code})") from exc

    def receive(self, timeout: float) -> dict[str, Any]:
        """The reply to the request sent last, waiting up to ``timeout`` seconds."""
        assert self.conn is not None and self.proc is not None
        try:
            self._wait(timeout)
            reply: dict[str, Any] = self.conn.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError) as exc:
            code = self.proc.exitcode if self.proc else None
            self.kill()
            raise WorkerDied(f"the engine's process ended (exit code {code})") from exc
        if "error" in reply:
            raise EngineError(reply["error"])
        if "pids" in reply:  # a (re)start reports the engine's server processes
            self.server_pids = list(reply["pids"])
        return reply

    def _wait(self, timeout: float) -> None:
        """Wait for the reply, sampling the engine's memory: past ``timeout`` the cell is a
        timeout, past the memory budget the engine is stopped; either kills the worker."""
        assert self.conn is not None and self.proc is not None
        deadline = time.monotonic() + timeout
        while not self.conn.poll(max(0.0, min(SAMPLE_S, deadline - time.monotonic()))):
            rss = tree_rss([self.proc.pid or 0, *self.server_pids])
            self.peak_rss = max(self.peak_rss, rss)
            if rss > self.budget:
                self.kill()
                raise MemoryBudgetExceeded(
                    f"the {self.engine} engine's processes held {rss / GIB:.1f} GiB, above the memory budget of "
                    f"{self.budget / GIB:.1f} GiB; stopped before the machine ran out (raise it with "
                    f"{BUDGET_ENV}=GIB if the machine has room)")
            if time.monotonic() >= deadline:
                self.kill()
                raise CellTimeout(f"no answer within {timeout:g} s")

    def kill(self) -> None:
        """Kill the worker and every server process it reported starting."""
        if self.proc is not None and self.proc.is_alive():
            self.proc.kill()
            self.proc.join(10)
        self.kill_servers()
        self.proc = None
        self.conn = None

    def servers_alive(self) -> bool:
        """Whether every server process the worker reported starting still runs."""
        for pid in self.server_pids:
            try:
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    return False
            except psutil.NoSuchProcess:
                return False
        return True

    def kill_servers(self) -> int:
        """SIGKILL every server process the worker reported starting, and their children
        (the durability suite's crash; what :meth:`kill` does to them). Returns how many."""
        killed = 0
        for pid in self.server_pids:
            try:
                proc = psutil.Process(pid)
                for child in proc.children(recursive=True):
                    child.send_signal(signal.SIGKILL)
                    killed += 1
                proc.send_signal(signal.SIGKILL)
                killed += 1
            except psutil.Error:
                pass
        self.server_pids = []
        return killed

    def close(self, timeout: float = 120.0) -> None:
        """Stop the engine cleanly, or kill it if it does not stop in time."""
        if self.proc is None:
            return
        try:
            self.call(timeout, op="exit")
            assert self.proc is not None
            self.proc.join(10)
        except (CellTimeout, WorkerDied, EngineError):
            pass
        finally:
            self.kill()
