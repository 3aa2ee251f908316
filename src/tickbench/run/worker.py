"""Each engine runs in a worker process of its own.

The worker holds the engine's adapter and times each operation itself, around the adapter
call, with the monotonic ``perf_counter_ns`` clock: the measured interval is exactly the
engine's work plus the transfer of the full result into the worker (what a client waits for),
and nothing of tickbench's process-to-process traffic. The parent (:class:`EngineProcess`)
enforces timeouts: a repetition that does not come back in time, or a worker that dies, is
recorded for its cell, and the worker (and any server it started) is killed and restarted.
A separate process also gives each engine its own memory figures and lets engines such as chDB,
which allow one database path per process, coexist in one run.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import threading
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import psutil

from tickbench.data.dataset import Dataset
from tickbench.engines.base import Engine
from tickbench.engines.registry import adapter_class
from tickbench.run import durability, ingest
from tickbench.run.memory import KIND as MEMORY_KIND
from tickbench.run.memory import PeakMemory
from tickbench.run.visibility import wait_visible
from tickbench.suites.beyond import params_from_dict
from tickbench.suites.published import QueryParams


class CellTimeout(Exception):
    """An operation ran past its timeout; the worker was killed."""


class WorkerDied(Exception):
    """The worker process ended (the engine crashed it, or it was killed)."""


class EngineError(Exception):
    """The adapter raised; the message is the engine's error."""


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


FAULTS_ENV = "TICKBENCH_FAULTS"


def faults(engine: str) -> dict[str, str]:
    """Test-only fault injection for ``engine`` from ``$TICKBENCH_FAULTS``, e.g.
    ``duckdb:slow=0.05;duckdb:crash=O-S;duckdb:hang=O-V1;duckdb:wrong=T-V1``:
    ``slow`` adds seconds to every query inside the timed interval, ``crash`` ends the worker
    on that query as an engine crash would, ``hang`` never returns, ``wrong`` drops the last
    row of the answer, ``kill_server=ID`` SIGKILLs the engine's server processes as query ID
    starts, ``kill_server_load=SECONDS`` that long into the load, ``stall=SECONDS@N`` delays
    the worker's Nth ingest write once (inside the writer's timed interval), ``lose=N``
    acknowledges every Nth ingest write of a client without making it. Never set outside tests."""
    out: dict[str, str] = {}
    for item in os.environ.get(FAULTS_ENV, "").split(";"):
        name, _, spec = item.partition(":")
        if name.strip() == engine and "=" in spec:
            key, _, value = spec.partition("=")
            out[key.strip()] = value.strip()
    return out


def _kill_servers(adapter: Engine, delay: float = 0.0) -> None:
    """Test-only: SIGKILL the adapter's server processes (not the worker) after ``delay``
    seconds, from a thread, as a server crashing under the worker would."""
    pids = [p for p in adapter.memory_pids() if p != os.getpid()]

    def kill() -> None:
        time.sleep(delay)
        for pid in pids:
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).send_signal(signal.SIGKILL)

    if delay:
        threading.Thread(target=kill, daemon=True).start()
    else:
        kill()


def _inject(fault: dict[str, str], qid: str) -> None:
    if fault.get("crash") == qid:
        os._exit(137)
    if fault.get("hang") == qid:
        while True:
            time.sleep(3600)
    if "slow" in fault:
        time.sleep(float(fault["slow"]))


def _handle(adapter: Engine, op: str, msg: dict[str, Any]) -> dict[str, Any]:
    if op == "start":
        adapter.start()
        return {"pids": [p for p in adapter.memory_pids() if p != os.getpid()]}
    if op == "stop" or op == "exit":
        adapter.stop()
        return {}
    if op == "info":
        return {"version": adapter.probe(), "settings": adapter.settings()}
    if op == "load":
        if "kill_server_load" in faults(adapter.info.name):
            _kill_servers(adapter, float(faults(adapter.info.name)["kill_server_load"]))
        t0 = time.perf_counter_ns()
        rows = adapter.load()
        wait_visible(adapter)  # the load ends when its rows are queryable
        return {"ns": time.perf_counter_ns() - t0, "rows": rows}
    if op == "query":
        fault = faults(adapter.info.name)
        if fault.get("kill_server") == msg["qid"]:
            _kill_servers(adapter)
        mem = PeakMemory(adapter.memory_pids())
        mem.start()
        t0 = time.perf_counter_ns()
        table = adapter.run_query(msg["qid"])
        if fault:
            _inject(fault, msg["qid"])
        ns = time.perf_counter_ns() - t0
        if fault.get("wrong") == msg["qid"] and table.num_rows:
            table = table.slice(0, table.num_rows - 1)
        engine_mem = adapter.query_memory_bytes()
        notes = adapter.query_notes(msg["qid"])
        return {
            "ns": ns, "rows": table.num_rows, "memory": mem.delta_bytes(),
            "memory_kind": MEMORY_KIND, "engine_memory": engine_mem, "notes": notes,
            "answer": table if msg.get("answer") else None,
        }
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
        return {"bytes": adapter.storage_bytes()}
    return _handle_beyond(adapter, op, msg)


def _handle_beyond(adapter: Engine, op: str, msg: dict[str, Any]) -> dict[str, Any]:
    """The operations of the suites beyond the paper (:mod:`tickbench.run.ingest`)."""
    fault = faults(adapter.info.name)
    if op == "tick":
        return ingest.tick_rep(adapter, Path(msg["store"]), msg["x"], msg["y"], msg["batch"], fault)
    if op == "stream":
        return ingest.stream_cell(adapter, Path(msg["store"]), msg["rate"], msg["writers"], msg["seconds"],
                                  msg["max_batch"], fault)
    if op == "durability_open":
        return durability.open_store(adapter, Path(msg["store"]), msg["setting"])
    if op == "durability_write":
        return durability.write_until_killed(adapter, msg["seconds"], msg["writers"], Path(msg["ack_log"]), fault)
    if op == "durability_recover":
        return durability.recover(adapter, Path(msg["store"]), msg["setting"], Path(msg["ack_log"]))
    if op == "params":
        # Scaling rebinds the queries' ranges; the loaded data stays as it is.
        adapter.set_params(params_from_dict(msg["params"]))
        wait_visible(adapter)
        return {}
    if op == "start_shared":
        # No pids reported: a client attached to another worker's server must not kill it.
        adapter.start_shared()
        return {}
    if op == "mix":
        clients = int(msg["clients"])
        if msg.get("own"):  # this worker is one client process, already started
            instances = [adapter]
        else:  # client threads, each with its own adapter instance over the same store
            instances = [type(adapter)(adapter.workdir, adapter.dataset, adapter.params) for _ in range(clients)]
            for inst in instances:
                inst.start_shared()
        try:
            return ingest.mix_loop(instances, msg["qids"], msg["expected"], msg["seconds"], msg["seed"],
                                   msg.get("first_client", 0), msg["start_at"])
        finally:
            if not msg.get("own"):
                for inst in instances:
                    inst.stop()
    raise ValueError(f"unknown op {op!r}")


class EngineProcess:
    """The parent's handle on one engine's worker process."""

    def __init__(self, engine: str, workdir: Path, data: Path, params: QueryParams) -> None:
        self.engine = engine
        self.args = (engine, str(workdir), str(data), params.as_dict())
        self.proc: mp.process.BaseProcess | None = None
        self.conn: Connection | None = None
        self.server_pids: list[int] = []

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
            if not self.conn.poll(timeout):
                self.kill()
                raise CellTimeout(f"no answer within {timeout:g} s")
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
