"""The streaming load generator, shared by the suites that replay events into an engine (the
stream suite, the market suite's queries during ingest; not a suite itself): writer *processes*
fed input encoded before the clock, and the sink that gives the harness's own ceiling.

A plan cuts the replayed events into batches of ``batch`` events (a batch holding both tables
is two payloads, one per table, sent back to back) and deals them round-robin to ``writers``
writers. Each writer encodes its payloads (:meth:`StreamTarget.encode`) before the clock
starts, then sends them in order, each no earlier than it is due: payload ``k`` is due when
its last event is (``start + last / rate``; at once when as fast as possible). The writer
records each send's submission and acknowledgement times (``perf_counter_ns``, CLOCK_MONOTONIC,
the same clock in every process on Linux); every row's latencies are computed afterwards from
its own intended send time (no coordinated omission), outside the timed loop.

Writers are processes (fresh interpreters, :class:`Child`) for a target that is plain data; an embedded engine's target
(``in_process``) runs its writers as threads of the worker, the only process that may write
its store. The same writers, with the same payloads, batch size and writer count, run against

* the *null* sink: ``send`` returns at once (the writers' own loop: the offered rate), and
* the *loopback* sink: an HTTP server in a process of its own that reads each request whole and
  answers 204 without storing (the target's client speaks to it when it can, e.g. QuestDB's
  ILP/HTTP sender; otherwise its wire bytes are posted with ``http.client``),

which is the harness ceiling the engine's figures are judged against (:func:`bound`).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import itertools
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import psutil
import pyarrow as pa

from tickbench.engines.base import StreamSender, StreamTarget

perf = time.perf_counter_ns
LOOPBACK = "127.0.0.1"
#: A figure within this factor of the harness ceiling is marked client-bound.
CLIENT_BOUND_FACTOR = 2.0
START_LEAD_NS = 200_000_000  # every writer waits on the clock this long after the last is ready
READY_TIMEOUT_S = 300.0


# -- the plan ---------------------------------------------------------------------------------


def batch_size(rate: int | None, max_batch: int, linger: float) -> int:
    """Events per payload: ``max_batch`` as fast as possible; at a fixed rate, at most the
    events due within ``linger`` seconds (a batch waits for its last event), at least one."""
    if rate is None:
        return max_batch
    return max(1, min(max_batch, math.ceil(rate * linger)))



@dataclass
class Plan:
    """The replayed events cut into payloads.

    ``tables`` hold each table's rows in time order; payload ``k`` is rows
    ``offset[k]:offset[k] + rows[k]`` of ``table[k]``, goes to writer ``writer[k]`` and is due
    ``last[k]`` events after the start; ``events[k]`` are its rows' event numbers."""

    tables: dict[str, pa.Table]
    table: list[str]
    offset: np.ndarray
    rows: np.ndarray
    writer: np.ndarray
    last: np.ndarray
    events: list[np.ndarray]
    writers: int
    batch: int

    @classmethod
    def build(cls, tables: dict[str, pa.Table], which: np.ndarray, batch: int, writers: int,
              together: np.ndarray | None = None) -> Plan:
        """``which[i]`` names the table of event ``i`` (an index into ``list(tables)``); each
        table's ``k``-th event is its ``k``-th row. With ``together`` (a key per event, e.g. its
        ts), a cut of ``batch`` events moves forward until the key changes: events of one key go
        in one payload per table, so writers committing out of order never reorder rows that only
        their arrival order ranks (an engine that keeps the last of several rows at one ts)."""
        bounds = [0]
        while bounds[-1] < len(which):
            hi = min(len(which), bounds[-1] + batch)
            if together is not None:
                while hi < len(which) and together[hi] == together[hi - 1]:
                    hi += 1
            bounds.append(hi)
        names = list(tables)
        rank = np.empty(len(which), np.int64)
        for code in range(len(names)):
            mask = which == code
            rank[mask] = np.arange(int(mask.sum()))
        table: list[str] = []
        offset, rows, writer, last, events = [], [], [], [], []
        for c, (lo, hi) in enumerate(itertools.pairwise(bounds)):
            idx = np.arange(lo, hi)
            codes = which[lo:hi]
            for code in sorted(set(codes.tolist()), key=lambda x: int(np.argmax(codes == x))):
                mine = idx[codes == code]
                table.append(names[code])
                offset.append(int(rank[mine[0]]))
                rows.append(len(mine))
                writer.append(c % writers)
                last.append(hi - 1)
                events.append(mine)
        return cls(tables, table, np.array(offset, np.int64), np.array(rows, np.int64),
                   np.array(writer, np.int64), np.array(last, np.int64), events, writers, batch)

    def __len__(self) -> int:
        return len(self.table)

    @property
    def total_rows(self) -> int:
        return int(self.rows.sum())

    def job(self, w: int) -> tuple[dict[str, pa.Table], list[tuple[str, int, int]], np.ndarray]:
        """Writer ``w``'s input: its rows copied out per table (so a process receives only its
        own), its payloads as (table, offset, rows) into those, and their global numbers."""
        ks = np.flatnonzero(self.writer == w)
        parts: dict[str, list[pa.Table]] = {}
        items: list[tuple[str, int, int]] = []
        sizes: dict[str, int] = {}
        for k in ks:
            t = self.table[k]
            parts.setdefault(t, []).append(self.tables[t].slice(int(self.offset[k]), int(self.rows[k])))
            items.append((t, sizes.get(t, 0), int(self.rows[k])))
            sizes[t] = sizes.get(t, 0) + int(self.rows[k])
        data = {t: pa.concat_tables(p).combine_chunks() for t, p in parts.items()}
        return data, items, ks


# -- destinations -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Destination:
    """Where a writer sends: ``engine`` (the target's own connection), ``null`` (the in-process
    sink: nothing is sent) or ``sink`` (the loopback HTTP sink at ``port``)."""

    kind: str
    port: int = 0
    #: Test-only faults (``run/faults.py``): seconds each writer waits before every send (a
    #: slower client), and seconds the engine's acknowledgement is delayed (a slower engine).
    writer_delay: float = 0.0
    ack_delay: float = 0.0
    #: Test-only (``stall=SECONDS@N``): the engine's acknowledgement of the run's ``N``-th
    #: payload (plan order) comes ``SECONDS`` late, once, as an engine that stalls would.
    stall_s: float = 0.0
    stall_nth: int = 0


class _Null(StreamSender):
    def send(self, payload: Any) -> None:
        return None


SINK_ANSWER = b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"


def http_post(body: bytes) -> bytes:
    """A whole HTTP/1.1 POST of ``body`` to the sink, built before the clock."""
    return (f"POST /write HTTP/1.1\r\nHost: {LOOPBACK}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


class _HttpPost(StreamSender):
    """Sends pre-built HTTP requests (:func:`http_post`) to the loopback sink over one
    keep-alive connection and reads each 204 answer: the least client work per request."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection((LOOPBACK, port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, payload: Any) -> None:
        self.sock.sendall(payload)
        got = b""
        while len(got) < len(SINK_ANSWER):
            chunk = self.sock.recv(len(SINK_ANSWER) - len(got))
            if not chunk:
                raise RuntimeError("the sink closed the connection")
            got += chunk
        if got != SINK_ANSWER:
            raise RuntimeError(f"the sink answered {got!r}")

    def close(self) -> None:
        self.sock.close()


class _Delayed(StreamSender):
    """Test-only: acknowledges ``seconds`` late, as a slower engine would."""

    def __init__(self, inner: StreamSender, seconds: float) -> None:
        self.inner, self.seconds = inner, seconds

    def send(self, payload: Any) -> None:
        self.inner.send(payload)
        time.sleep(self.seconds)

    def close(self) -> None:
        self.inner.close()


def _open(target: StreamTarget, dest: Destination) -> tuple[StreamSender, bool]:
    """The sender for ``dest``, and whether payloads must be sent as wire bytes."""
    if dest.kind == "null":
        return _Null(), False
    if dest.kind == "sink":
        own = target.connect_sink(LOOPBACK, dest.port)
        if own is not None:
            return own, False
        return _HttpPost(dest.port), True
    sender = target.connect()
    return (_Delayed(sender, dest.ack_delay) if dest.ack_delay else sender), False


# -- one writer -------------------------------------------------------------------------------


def writer_main(target: StreamTarget, data: dict[str, pa.Table], items: list[tuple[str, int, int]],
                cpus: list[int] | None, conn: Connection) -> None:
    """One writer (a process, or a thread of an embedded engine's worker): encode its payloads
    once and report ready; then, per run asked for, connect to the run's destination, report
    armed, wait for the start time, send each payload when due and report the times."""
    try:
        if cpus:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, cpus)
        t0 = perf()
        payloads = [target.encode(table, data[table].slice(off, n)) for table, off, n in items]
        nbytes = sum(target.payload_bytes(p) for p in payloads)
        del data
        rss = psutil.Process().memory_info().rss if not target.in_process else 0
        conn.send(("ready", (perf() - t0) / 1e9, nbytes, rss))
    except BaseException as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    while True:
        msg = conn.recv()
        if msg is None:
            return
        dest, due_ns, stall_k = msg
        try:
            sender, as_bytes = _open(target, dest)
            wire = [http_post(target.wire_bytes(p)) for p in payloads] if as_bytes else payloads
            conn.send(("armed",))
        except BaseException as exc:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
            continue
        start, stop = conn.recv()
        conn.send(("done", *_send_all(sender, wire, dest, due_ns, stall_k, start, stop)))
        del wire


def _send_all(sender: StreamSender, payloads: list[Any], dest: Destination, due_ns: np.ndarray, stall_k: int,
              start: int, stop: int) -> tuple[np.ndarray, np.ndarray, str]:
    """The timed loop: each payload no earlier than due; submission and acknowledgement times."""
    submit = np.zeros(len(payloads), np.int64)
    ack = np.zeros(len(payloads), np.int64)
    done = 0
    error = ""
    delay = dest.writer_delay
    try:
        while perf() < start:
            time.sleep(max(0.0, (start - perf()) / 1e9 - 0.001) if start - perf() > 2_000_000 else 0)
        for k, payload in enumerate(payloads):
            due = start + int(due_ns[k])
            now = perf()
            if now >= stop:
                break
            if due > now:
                time.sleep((due - now) / 1e9)
            if delay:
                time.sleep(delay)
            submit[k] = perf()
            sender.send(payload)
            if k == stall_k:
                time.sleep(dest.stall_s)
            ack[k] = perf()
            done = k + 1
    except BaseException as exc:  # recorded for the cell
        error = f"{type(exc).__name__}: {exc}"
    with contextlib.suppress(Exception):
        sender.close()
    return submit[:done], ack[:done], error


# -- child processes ---------------------------------------------------------------------------
# The engine's worker is itself a daemonic multiprocessing process, which may not start
# multiprocessing children: writers and the sink are plain subprocesses of this interpreter,
# talking over a socket pair with multiprocessing's message framing.


class Child:
    """A subprocess running ``harness.<func>(*args, conn)`` (or ``<module>:<func>`` of another
    tickbench module); ``args`` go over the connection."""

    def __init__(self, func: str, *args: Any) -> None:
        ours, theirs = socket.socketpair()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        # The parent's pid goes in the code: a child that looked it up itself after the parent
        # was killed would watch its new parent (init) and outlive the run.
        code = f"from tickbench.suites.harness import _child; _child({theirs.fileno()}, {os.getpid()})"
        self.proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=[theirs.fileno()], env=env,
                                     stdin=subprocess.DEVNULL)
        theirs.close()
        self.conn = Connection(ours.detach())
        self.conn.send((func, args))

    def join(self, timeout: float) -> None:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def _orphan_watch(parent: int) -> None:
    """End this child once the process that started it is gone (e.g. a worker killed at its
    time limit), so no writer or sink outlives its cell: the kernel's SIGKILL when the parent
    ends (Linux), this look every second otherwise."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when its parent ends


def _child(fd: int, parent: int) -> None:
    with contextlib.suppress(OSError, AttributeError):  # prctl is Linux's
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent ended before this child started (or the request took effect)
        os._exit(1)
    threading.Thread(target=_orphan_watch, args=(parent,), daemon=True).start()
    conn = Connection(fd)
    func, args = conn.recv()
    main: Any = {"writer_main": writer_main, "sink_main": sink_main}.get(func)
    if main is None:  # another suite's child, named "tickbench.<module>:<function>"
        module, _, name = func.partition(":")
        if not module.startswith("tickbench."):
            raise ValueError(f"not a tickbench child: {func!r}")
        main = getattr(importlib.import_module(module), name)
    main(*args, conn)


# -- a run of all writers ---------------------------------------------------------------------


@dataclass
class Run:
    """What one run of the writers did: per payload (global numbering) its submission and
    acknowledgement times (0 where not sent), the start, and what the writers reported."""

    start: int
    submit: np.ndarray
    ack: np.ndarray
    errors: list[str]
    encode_s: float
    encoded_bytes: int
    writer_rss: list[int]
    mode: str
    pinning: str

    @property
    def sent(self) -> np.ndarray:
        return self.ack > 0

    def rows(self, plan: Plan) -> int:
        return int(plan.rows[self.sent].sum())

    def rate(self, plan: Plan, times: np.ndarray | None = None) -> float:
        """Rows acknowledged per second, start → last acknowledgement."""
        times = self.ack if times is None else times
        if not self.sent.any():
            return 0.0
        return self.rows(plan) / max(1e-9, (int(times[self.sent].max()) - self.start) / 1e9)


def _cpus(engine_pids: list[int]) -> tuple[list[int] | None, str]:
    """Best-effort pinning: with four or more cores, writers on the upper half and the engine's
    server processes on the lower half; on fewer, no pinning (both share every core)."""
    try:
        cores = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return None, "none (no CPU affinity on this platform)"
    if len(cores) < 4:
        return None, f"none: {len(cores)} cores, writers and engine share them"
    half = len(cores) // 2
    low, high = cores[:half], cores[half:]
    pinned = 0
    for pid in engine_pids:
        with contextlib.suppress(OSError, psutil.Error):
            for p in [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]:
                p.cpu_affinity(low)
                pinned += 1
    return high, f"writers on cores {high[0]}-{high[-1]}, {pinned} engine processes on {low[0]}-{low[-1]}"


class Writers:
    """The writers of one plan: started and fed once (each encodes its payloads), then run
    against several destinations (the sinks, then the engine) with the same payloads."""

    def __init__(self, target: StreamTarget, plan: Plan, engine_pids: list[int] | None = None) -> None:
        self.target, self.plan = target, plan
        if target.in_process:
            cpus, self.pinning = None, "none: writers are threads of the engine's process"
        else:
            cpus, self.pinning = _cpus(engine_pids or [])
        self.mode = (f"{plan.writers} writer thread(s) in the engine's process" if target.in_process
                     else f"{plan.writers} writer process(es)")
        self.pipes: list[Connection] = []
        self.handles: list[Any] = []
        self.ids: list[np.ndarray] = []
        for w in range(plan.writers):
            data, items, ks = plan.job(w)
            if target.in_process:
                parent, child = Pipe()
                h: Any = threading.Thread(target=writer_main, args=(target, data, items, cpus, child),
                                          name=f"stream-writer-{w}", daemon=True)
                h.start()
            else:
                h = Child("writer_main", target, data, items, cpus)
                parent = h.conn
            self.pipes.append(parent)
            self.handles.append(h)
            self.ids.append(ks)
        self.errors: list[str] = []
        self.encode_s, self.nbytes, self.rss = 0.0, 0, []
        self.ready: list[int] = []
        for w, p in enumerate(self.pipes):
            if not p.poll(READY_TIMEOUT_S):
                self.errors.append(f"writer {w}: not ready after {READY_TIMEOUT_S:g} s")
                continue
            msg = p.recv()
            if msg[0] == "error":
                self.errors.append(f"writer {w}: {msg[1]}")
                continue
            self.encode_s = max(self.encode_s, msg[1])
            self.nbytes += msg[2]
            self.rss.append(msg[3])
            self.ready.append(w)

    def run(self, dest: Destination, rate: int | None, seconds: float, cap_s: float | None = None) -> Run:
        """Every writer against ``dest`` at ``rate`` events/s (``None``: as fast as possible)
        for at most ``seconds`` (a fixed rate may overrun to ``3 × seconds + 10`` while behind);
        with ``cap_s``, for at most ``cap_s`` seconds whatever the rate (a replay of a fixed span
        that the writers send whole unless the engine takes longer than that)."""
        plan = self.plan
        step = 0.0 if rate is None else 1e9 / rate
        errors = list(self.errors)
        armed = []
        for w in self.ready:
            ks = self.ids[w]
            due = (plan.last[ks] * step if rate is not None else np.zeros(len(ks))).astype(np.int64)
            stall: Any = np.flatnonzero(ks == dest.stall_nth - 1) if dest.kind == "engine" and dest.stall_s else []
            self.pipes[w].send((dest, due, int(stall[0]) if len(stall) else -1))
        for w in self.ready:
            msg = self.pipes[w].recv()
            if msg[0] == "error":
                errors.append(f"writer {w}: {msg[1]}")
            else:
                armed.append(w)
        start = perf() + START_LEAD_NS
        stop = start + int(seconds * 1e9) if rate is None else start + int((3 * seconds + 10) * 1e9)
        if cap_s is not None:
            stop = start + int(cap_s * 1e9)
        for w in armed:
            self.pipes[w].send((start, stop))
        submit = np.zeros(len(plan), np.int64)
        ack = np.zeros(len(plan), np.int64)
        for w in armed:
            _, s, a, err = self.pipes[w].recv()
            submit[self.ids[w][: len(s)]] = s
            ack[self.ids[w][: len(a)]] = a
            if err:
                errors.append(f"writer {w}: {err}")
        return Run(start, submit, ack, errors, self.encode_s, self.nbytes, self.rss, self.mode, self.pinning)

    def close(self) -> None:
        for w in self.ready:
            with contextlib.suppress(OSError):
                self.pipes[w].send(None)
        for h in self.handles:
            h.join(timeout=30)

    def __enter__(self) -> Writers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_writers(target: StreamTarget, dest: Destination, plan: Plan, rate: int | None, seconds: float,
                engine_pids: list[int] | None = None) -> Run:
    """One run of freshly started writers (:class:`Writers`) against ``dest``."""
    with Writers(target, plan, engine_pids) as writers:
        return writers.run(dest, rate, seconds)


def row_latencies(plan: Plan, run: Run, rate: int | None, times: np.ndarray) -> np.ndarray:
    """Per row of every sent payload: ``times`` of its payload minus the row's intended send
    time (the start plus its event number over the rate; the payload's submission when as
    fast as possible), in ns."""
    out = []
    for k in np.flatnonzero(run.sent):
        if rate is None:
            out.append(np.full(int(plan.rows[k]), times[k] - run.submit[k], np.int64))
        else:
            out.append(times[k] - (run.start + (plan.events[k] * (1e9 / rate)).astype(np.int64)))
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def bound(rate: float, ceiling: float | None) -> bool:
    """Whether a measured ``rate`` is within :data:`CLIENT_BOUND_FACTOR` of the harness ceiling
    (the harness, not the engine, may be what limits it)."""
    return bool(ceiling) and rate * CLIENT_BOUND_FACTOR >= float(ceiling or 0)


# -- the loopback sink ------------------------------------------------------------------------


def _serve_sink(sock: socket.socket, delay: float) -> None:
    """Answer every HTTP request on ``sock`` with 204 once its body is read whole; store
    nothing. ``delay`` (test-only) is slept before each answer, as a slower engine would."""
    while True:
        conn, _ = sock.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_sink_conn, args=(conn, delay), daemon=True).start()


def _sink_conn(conn: socket.socket, delay: float) -> None:
    buf = bytearray()
    scratch = bytearray(4 << 20)
    with contextlib.suppress(OSError), conn:
        while True:
            while (end := buf.find(b"\r\n\r\n")) < 0:
                chunk = conn.recv(1 << 20)
                if not chunk:
                    return
                buf += chunk
            head = bytes(buf[:end])
            del buf[: end + 4]
            length = 0
            chunked = False
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                key = name.strip().lower()
                if key == b"content-length":
                    length = int(value)
                elif key == b"transfer-encoding" and b"chunked" in value.lower():
                    chunked = True
                elif key == b"expect" and b"100-continue" in value.lower():
                    conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            if chunked:
                if not _read_chunked(conn, buf):
                    return
            else:
                # The body is read into one scratch buffer and dropped (nothing is stored).
                left = length - len(buf)
                if left <= 0:
                    del buf[:length]
                else:
                    buf.clear()
                    while left > 0:
                        got = conn.recv_into(scratch, min(left, len(scratch)))
                        if not got:
                            return
                        left -= got
            if delay:
                time.sleep(delay)
            conn.sendall(SINK_ANSWER)


def _read_chunked(conn: socket.socket, buf: bytearray) -> bool:
    """Consume a chunked body from ``buf`` (and the socket); False if the peer closed."""
    while True:
        while (end := buf.find(b"\r\n")) < 0:
            chunk = conn.recv(1 << 20)
            if not chunk:
                return False
            buf += chunk
        size = int(bytes(buf[:end]).split(b";")[0], 16)
        del buf[: end + 2]
        while len(buf) < size + 2:
            chunk = conn.recv(1 << 20)
            if not chunk:
                return False
            buf += chunk
        del buf[: size + 2]
        if size == 0:
            return True


def sink_main(delay: float, port_pipe: Connection) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((LOOPBACK, 0))
    sock.listen(64)
    port_pipe.send(sock.getsockname()[1])
    _serve_sink(sock, delay)


@dataclass
class Sink:
    """The loopback HTTP sink, a process of its own (:func:`_serve_sink`)."""

    delay: float = 0.0
    port: int = 0
    process: Any = field(default=None, repr=False)

    def __enter__(self) -> Sink:
        self.process = Child("sink_main", self.delay)
        if not self.process.conn.poll(60):
            self.process.kill()
            raise RuntimeError("the stream sink did not start")
        self.port = self.process.conn.recv()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.kill()



class SinkTarget(StreamTarget):
    """The loopback sink taken as the engine under test (the harness's own tests): batches
    encoded as Arrow IPC streams and posted to the sink at ``port``."""

    path = "Arrow IPC stream posted over HTTP to the loopback sink"

    def __init__(self, port: int) -> None:
        self.port = port

    @staticmethod
    def _ipc(batch: pa.Table) -> bytes:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as out:
            out.write_table(batch)
        return sink.getvalue().to_pybytes()

    def wire_bytes(self, payload: Any) -> bytes:
        return bytes(payload)

    def encode(self, table: str, batch: pa.Table) -> Any:
        return http_post(self._ipc(batch))  # the whole request, built before the clock

    def connect(self) -> StreamSender:
        return _HttpPost(self.port)

    def connect_sink(self, host: str, port: int) -> StreamSender | None:
        return _HttpPost(port)
