"""Each engine runs in a process of its own: the engine process.

The engine process holds the engine's adapter and times each operation itself, around the
adapter call, with the monotonic ``perf_counter_ns`` clock: the measured interval is exactly the
engine's work plus the transfer of the full result into that process (what a client waits for),
and nothing of tickbench's process-to-process traffic. The parent (:class:`EngineProcess`)
enforces timeouts: a repetition that does not come back in time, or a process that dies, is
recorded for its cell, and the process (and any server it started) is killed and restarted.
A separate process also gives each engine its own memory figures and lets engines such as chDB,
which allow one database path per process, coexist in one run.

Its operations are the core ones here (start, stop, info, load, query, explain, start_shared)
and those of the suite that made it (the suite's ``worker_ops``, handed over when the process
is spawned): the runner knows no suite's operations. Test-only faults (:mod:`tickbench.run.faults`)
are a subclass of the adapter installed only when ``$TICKBENCH_FAULTS`` names the engine, so
nothing of them is on the timed path otherwise.

This module is private to :mod:`tickbench.run`: suites reach engine processes through
:class:`tickbench.run.cell.Worker`.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import time
import traceback
import weakref
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import psutil

from tickbench.datasets.base import RunParams, open_dataset, params_from_dict
from tickbench.engines.base import Engine, EngineTime, open_shared
from tickbench.engines.registry import adapter_class, engine_infos
from tickbench.engines.server import kill_tree, server_leaders
from tickbench.run.faults import faults, with_faults
from tickbench.run.memory import BUDGET_ENV, GIB, PeakMemory, budget_bytes, tree_rss
from tickbench.run.memory import KIND as MEMORY_KIND
from tickbench.run.visibility import wait_settled, wait_visible

#: An operation a suite adds to the engine process: (adapter, request) -> reply. It runs inside
#: the engine process and may time its own work there.
WorkerOp = Callable[[Engine, dict[str, Any]], dict[str, Any]]
CORE_OPS = frozenset({"start", "stop", "exit", "info", "load", "query", "explain", "start_shared"})


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


PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when its parent ends


def die_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this process when the process that started it ends (a runner
    killed outright must not leave engine processes, nor their servers, behind); exit at once
    if it already has."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent ended before the request took effect
        os._exit(1)


def _serve(conn: Connection, engine: str, workdir: str, data: str, params: dict[str, Any],
           ops: Mapping[str, WorkerOp], parent: int) -> None:
    """The engine process's loop: one request in, one reply out."""
    die_with_parent(parent)
    # Ctrl-C reaches the whole terminal's process group: the runner handles it and stops this
    # process itself (recording the cells it interrupted), so the signal must not kill it first.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.setdefault("POLARS_MAX_THREADS", str(os.cpu_count() or 1))
    qp = params_from_dict(params)
    cls = adapter_class(engine)
    injected = faults(engine)
    if injected:  # tests only
        cls = with_faults(cls, injected)
    adapter: Engine = cls(engine_infos()[engine], Path(workdir), open_dataset(Path(data)), qp)
    owns_server = False  # started here (not attached to another process's server)
    while True:
        msg = conn.recv()
        op = msg["op"]
        owns_server = (owns_server or op == "start") and op not in ("start_shared", "stop", "exit")
        try:
            reply = _handle(adapter, op, msg, ops)
        except Exception as exc:
            reply = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
        if owns_server and "pids" not in reply:
            # Any operation may have restarted the server (a load into the queries' settings,
            # SE's restart): the parent must know whom to stop if this process dies.
            reply["pids"] = _server_pids(adapter)
        conn.send(reply)
        if op == "exit":
            return


def _server_pids(adapter: Engine) -> list[int]:
    """The engine's own processes, apart from this one."""
    return [p for p in adapter.memory_pids() if p != os.getpid()]


def _handle(adapter: Engine, op: str, msg: dict[str, Any], ops: Mapping[str, WorkerOp]) -> dict[str, Any]:
    if op == "start":
        adapter.start()
        return {"pids": _server_pids(adapter)}
    if op == "stop" or op == "exit":
        adapter.stop()
        return {}
    if op == "info":
        endpoint = adapter.endpoint_info()  # an external endpoint's address and server version
        return {"version": adapter.version(), "settings": adapter.settings(),
                **({"endpoint": endpoint} if endpoint else {})}
    if op == "load":
        t0 = time.perf_counter_ns()
        rows = adapter.load()
        wait_visible(adapter)  # the load ends when its rows are queryable
        wait_settled(adapter)  # ... and the engine's own work on them (compaction) is done
        return {"ns": time.perf_counter_ns() - t0, "rows": rows}
    if op == "query":
        mem = PeakMemory(adapter.memory_pids())
        mem.start()
        t0 = time.perf_counter_ns()
        table = adapter.run_query(msg["qid"])
        ns = time.perf_counter_ns() - t0
        return {
            "ns": ns, "server_ns": adapter.query_server_ns() if isinstance(adapter, EngineTime) else None,
            "rows": table.num_rows, "memory": mem.delta_bytes(),
            "memory_kind": MEMORY_KIND, "engine_memory": adapter.query_memory_bytes(),
            "notes": adapter.query_notes(msg["qid"]),
            "answer": table if msg.get("answer") else None,
        }
    if op == "explain":
        return {"plan": adapter.explain(msg["qid"])}
    if op == "start_shared":
        # No pids reported: a client attached to another process's server must not kill it.
        open_shared(adapter)
        return {}
    handler = ops.get(op)
    if handler is None:
        raise ValueError(f"unknown op {op!r}")
    return handler(adapter, msg)


class EngineProcess:
    """The parent's handle on one engine's worker process."""

    def __init__(self, engine: str, workdir: Path, data: Path, params: RunParams,
                 ops: Mapping[str, WorkerOp] | None = None) -> None:
        clash = sorted(CORE_OPS & set(ops or {}))
        if clash:
            raise ValueError(f"a suite's worker_ops may not redefine the core operations {', '.join(clash)}")
        self.engine = engine
        self.args = (engine, str(workdir), str(data), params.as_dict(), dict(ops or {}))
        self.proc: mp.process.BaseProcess | None = None
        self.conn: Connection | None = None
        self.server_pids: list[int] = []
        #: The process groups the worker's servers lead (their pids) with their start times.
        self.server_leaders: dict[int, float] = {}
        self.peak_rss = 0  # the largest sampled resident memory of the worker and its servers
        self.budget = budget_bytes()

    def spawn(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, *self.args, os.getpid()), daemon=True,
                                name=f"tickbench-{self.engine}")
        self.proc.start()
        _live.add(self)
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
        if "pids" in reply:  # a (re)start reports the engine's server processes (an error's reply too)
            self.server_pids = list(reply["pids"])
            self.server_leaders = server_leaders(self.server_pids)
        if "error" in reply:
            raise EngineError(reply["error"])
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
        """Kill every server process the worker reported starting, with their process groups,
        then the worker: the servers first, while their leaders are alive (the worker's death
        would end a leader alone, its children re-parented to init)."""
        self.kill_servers()
        if self.proc is not None and self.proc.is_alive():
            self.proc.kill()
            self.proc.join(10)
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
        """SIGKILL every server process the worker reported starting: the process group each
        leads (every process it forked, also one started since it reported), and their children
        (the durability suite's crash; what :meth:`kill` does to them). Returns how many."""
        shm_files = getattr(adapter_class(self.engine), "shm_files", None)
        groups = [kill_tree(pid, created, shm_files) for pid, created in self.server_leaders.items()]
        killed = sum(map(len, groups))
        self.server_leaders = {}
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
        """Stop the engine cleanly, or kill it if it does not stop in time (at once while the
        run is being stopped by a signal)."""
        if self.proc is None:
            return
        if _stopping:
            self.kill()
            return
        try:
            self.call(timeout, op="exit")
            assert self.proc is not None
            self.proc.join(10)
        except (CellTimeout, WorkerDied, EngineError):
            pass
        finally:
            self.kill()


_live: weakref.WeakSet[EngineProcess] = weakref.WeakSet()  # every engine process spawned, while referenced
_stopping = False  # set when the run is being stopped by a signal: engine processes are killed, not closed


def stop_all() -> int:
    """Kill every live engine process and the servers each started (the run is being stopped);
    from then on :meth:`EngineProcess.close` kills instead of waiting. Returns how many."""
    global _stopping
    _stopping = True
    alive = [p for p in list(_live) if p.proc is not None]
    for p in alive:
        p.kill()
    return len(alive)


def stopping() -> bool:
    """Whether the run is being stopped by a signal."""
    return _stopping


def resume_normal() -> None:
    """Close engine processes cleanly again (a new run in the same process, e.g. in tests)."""
    global _stopping
    _stopping = False
