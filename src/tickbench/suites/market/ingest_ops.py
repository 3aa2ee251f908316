"""Queries while the market ingests (SPEC §2.3's last paragraph: "how does ingest affect
queries?"), inside the engine process: a fixed span of day D (its first minutes of quotes and
trades, the same events for every engine) replayed in time order through the engine's streaming
path (:class:`~tickbench.engines.base.Ingest`) by the stream suite's writers
(:mod:`tickbench.suites.harness`), while users, each with its own reader, run M-SNAP over
the rows already visible. Two controls go with it:

* *ingest alone*: the same writers, payloads and rate into a fresh store first, with no users
  and no watcher;
* *queries alone*: once the span is ingested and visible, the same users on the same store
  binding the same probe times (so the same watermarks) they bound during the ingest, with no
  writer running.

*Already visible* is a watermark: the latest ``W`` such that every replayed row with
``ts <= W`` is visible, proved by counting (the watcher, a thread of this process or, when the
engine gives its counts as plain data, a process of its own, asks the engine how many rows of
each table with ``ts <= x`` it sees, and compares with the replay's own count; the candidate x
comes from the visible totals, bisected down when several writers leave gaps). A user's query
binds its own probe times mapped into the session's start … the watermark (rounded down to one
of the replay's checkpoints, ``MarketReplay.checkpoints``, so a few distinct answers are
checked, and a slow ingest reaches the first soon): since
M-SNAP reads only rows with ``ts <= t``, its answer over the rows visible when the query begins
is exactly the reference's over the whole day with those times, which the runner checks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tickbench import latency
from tickbench.data.dataset import Dataset
from tickbench.datasets.base import params_from_dict
from tickbench.datasets.market.params import MarketParams
from tickbench.engines.base import Engine, Ingest, IngestCounter, IngestReader, Server, capability
from tickbench.suites.harness import Child, Destination, Plan, Sink, Writers

perf = time.perf_counter_ns
# The queries-alone control: each user re-runs this many of its during-ingest probe sets (evenly
# drawn from them in their order; repeated when it ran fewer), at least the protocol's repetitions.
ALONE_MIN_QUERIES = 20
ALONE_MAX_QUERIES = 100
WATCHER_THREAD = "a thread of the engine's worker process, beside the users' threads"
WATCHER_PROCESS = "a process of its own, with its own connection"
WATCHER_READY_S = 120.0
# The watermark a query binds is rounded down to a checkpoint: the end of the replay's first
# len / 2**k events, k = 0 … CHECKPOINT_HALVINGS. Halving steps, not equal ones: an engine that takes
# a few thousand events a second of a million planned still queries during its ingest.
CHECKPOINT_HALVINGS = 10
# ... and at least this long after the session's open: the opening burst (every instrument's first
# quote on each venue within a millisecond) would squeeze a user's probe times into the same µs.
CHECKPOINT_MIN_NS = 1_000_000_000
VISIBLE_WAIT_S = 60.0  # after the writers, how long every acknowledged row may take to become visible
BISECT_STEPS = 12
NOOP_QUERIES = 1_000  # the users' no-op queries each at least (the harness's ceiling)
NS_PER_US = 1_000
TABLES = ("quotes", "trades")
KEYS = {"quotes": "seq", "trades": "trade_id"}


class MarketReplay:
    """Day D's quotes and trades merged in time order (each table by (ts, exchange, id)), those
    with ``ts`` before the session's open plus ``span_ns`` (all of them without it), the first
    ``limit`` of those at most; each table's replayed rows are a prefix of its own order."""

    def __init__(self, ds: Dataset, params: MarketParams, limit: int | None = None,
                 span_ns: int | None = None) -> None:
        day = params.D
        open_ns, close_ns = params.calendar_session_ns(day)
        self.open_ns = open_ns
        #: The span replayed: events with ``ts < open_ns + span_ns`` (``None``: the whole day).
        self.span_ns = span_ns
        read = {t: pa.concat_tables(pq.read_table(f) for f in ds.files(t, [day]))
                .sort_by([("ts", "ascending"), ("exchange", "ascending"), (KEYS[t], "ascending")]) for t in TABLES}
        ts = np.concatenate([read[t].column("ts").cast(pa.int64()).to_numpy() for t in TABLES])
        which = np.concatenate([np.full(read[t].num_rows, c, np.int8) for c, t in enumerate(TABLES)])
        self.total = len(ts)
        order = np.argsort(ts, kind="stable")
        if span_ns is not None:
            order = order[: int(np.searchsorted(ts[order], open_ns + span_ns, side="left"))]
        order = order[:limit]
        self.which = which[order]
        self.event_ts = ts[order]
        self.tables: dict[str, pa.Table] = {}
        self.ts: dict[str, np.ndarray] = {}
        #: Per table, the first row not replayed's ts (``None``: every row is replayed).
        self.next_ts: dict[str, int | None] = {}
        for c, t in enumerate(TABLES):
            n = int((self.which == c).sum())
            self.tables[t] = read[t].slice(0, n).combine_chunks()
            col = read[t].column("ts").cast(pa.int64()).to_numpy()
            self.ts[t] = col[:n]
            self.next_ts[t] = int(col[n]) if n < len(col) else None
        ends = [n - 1 for n in self.next_ts.values() if n is not None]
        #: Every replayed row has ``ts <= end`` and every row of the day with ``ts <= end`` is replayed.
        self.end_ns = min(ends) if ends else close_ns
        #: The watermarks a query may bind, ascending: :meth:`_checkpoints`.
        self.checkpoints = self._checkpoints()

    def __len__(self) -> int:
        return len(self.which)

    def _checkpoints(self) -> np.ndarray:
        """For k = CHECKPOINT_HALVINGS … 1 the last ns before the first event not among the
        replay's first ``len / 2**k`` events, then the replay's end: every row of the day up to a
        checkpoint is replayed. Those at least :data:`CHECKPOINT_MIN_NS` after the session's open,
        distinct, ascending."""
        n = len(self)
        cuts = {int(self.event_ts[n >> k]) - 1 for k in range(1, CHECKPOINT_HALVINGS + 1) if n >> k > 0}
        late = [c for c in cuts | {self.end_ns} if c >= self.open_ns + CHECKPOINT_MIN_NS]
        return np.array(sorted(late), dtype=np.int64)

    def expected(self, table: str, upto: int) -> int:
        """Replayed rows of ``table`` with ``ts <= upto``."""
        return int(np.searchsorted(self.ts[table], upto, side="right"))

    def candidate(self, visible: dict[str, int]) -> int:
        """The largest W that holds if each table's visible rows are a prefix of its order."""
        out = self.end_ns
        for t, c in visible.items():
            if c < len(self.ts[t]):
                out = min(out, int(self.ts[t][c]) - 1)
        return out


class Counting(Protocol):
    def ingest_count(self, table: str, upto_ns: int) -> int: ...


class Replayed(Protocol):
    """What the watcher needs of a replay (:class:`MarketReplay`, or :class:`ReplayedTs` in the
    watcher's own process)."""

    open_ns: int
    end_ns: int

    def expected(self, table: str, upto: int) -> int: ...
    def candidate(self, visible: dict[str, int]) -> int: ...


class ReplayedTs:
    """A replay's per-table ts, open and end: what the watcher's own process is sent."""

    def __init__(self, ts: dict[str, np.ndarray], open_ns: int, end_ns: int) -> None:
        self.ts, self.open_ns, self.end_ns = ts, open_ns, end_ns

    expected = MarketReplay.expected
    candidate = MarketReplay.candidate


class Watermark:
    """The watcher: proves, again and again, how far the replayed rows are all visible."""

    def __init__(self, ingest: Counting, replay: Replayed) -> None:
        self.ingest, self.replay = ingest, replay
        self.value: int | None = None  # the latest proved watermark
        self.checks: list[tuple[int, int, int]] = []  # (start, end, watermark proved) of each advance
        self.polls = 0

    def _holds(self, x: int) -> bool:
        self.polls += 1
        return all(self.ingest.ingest_count(t, x) == self.replay.expected(t, x) for t in TABLES)

    def check(self) -> None:
        """One round: from the visible totals a candidate, bisected down to one that holds."""
        t0 = perf()
        far = 2**62
        totals = {t: self.ingest.ingest_count(t, far) for t in TABLES}
        hi = self.replay.candidate(totals)
        lo = self.value if self.value is not None else self.replay.open_ns - 1
        if hi <= lo:
            return
        if not self._holds(hi):
            for _ in range(BISECT_STEPS):
                mid = (lo + hi) // 2
                if mid <= lo:
                    break
                if self._holds(mid):
                    lo = mid
                else:
                    hi = mid
            hi = lo
        if self.value is None or hi > self.value:
            self.value = hi
            self.checks.append((t0, perf(), hi))


def probes(user: MarketParams, open_ns: int, upto: int) -> tuple[int, ...]:
    """The user's own probe times (their places in D's session) mapped into [open, upto], whole
    µs, distinct."""
    close = user.calendar_session_ns(user.D)[1]
    span = max(0, upto - open_ns)
    out = {open_ns + (span * (t - open_ns) // (close - open_ns)) // NS_PER_US * NS_PER_US for t in user.T}
    return tuple(sorted(out))


def quantised(value: int, replay: MarketReplay) -> int:
    """The latest of the replay's checkpoints at or before the watermark ``value``; the session's
    open when none is."""
    i = int(np.searchsorted(replay.checkpoints, value, side="right"))
    return int(replay.checkpoints[i - 1]) if i else replay.open_ns


def _digest(table: pa.Table) -> str:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()


class UserLog:
    """One user's queries: latencies during the ingest and alone (the control), the probe times
    of each query during the ingest, and its distinct answers per set of probe times."""

    def __init__(self) -> None:
        self.during: list[int] = []
        self.alone: list[int] = []
        self.bound: list[tuple[int, ...]] = []  # the probe times of each query during the ingest
        self.spans: dict[str, tuple[int, int]] = {}  # phase -> (first query's start, last's end)
        self.answers: dict[tuple[int, ...], dict[str, pa.Table]] = {}
        self.error = ""

    def time(self, phase: str, query: Any) -> pa.Table:
        """Run ``query()`` and record its latency in ``phase`` (``during`` or ``alone``)."""
        t0 = perf()
        table: pa.Table = query()
        t1 = perf()
        getattr(self, phase).append(t1 - t0)
        self.spans[phase] = (self.spans.get(phase, (t0, t1))[0], t1)
        return table

    def keep(self, times: tuple[int, ...], table: pa.Table) -> None:
        self.answers.setdefault(times, {}).setdefault(_digest(table), table)

    def alone_probes(self, final: tuple[int, ...], repetitions: int) -> list[tuple[int, ...]]:
        """The probe sets of the queries-alone control: ``n`` of those bound during the ingest,
        evenly spaced in their order (repeated when fewer ran; the final watermark's when none
        did), ``n`` between :data:`ALONE_MIN_QUERIES` (or ``repetitions``) and
        :data:`ALONE_MAX_QUERIES`."""
        seq = self.bound or [final]
        n = max(ALONE_MIN_QUERIES, repetitions, min(len(seq), ALONE_MAX_QUERIES))
        return [seq[(k * len(seq)) // n] for k in range(n)]

    def reply(self) -> dict[str, Any]:
        if self.error:
            return {"error": self.error}
        return {"during": self.during, "alone": self.alone, "spans": self.spans,
                "answers": [{"T": list(k), "tables": list(v.values())} for k, v in self.answers.items()]}


def ingest_op(adapter: Engine, msg: dict[str, Any]) -> dict[str, Any]:
    """The worker operation ``market_ingest``: one cell (:func:`ingest_cell`)."""
    users = [params_from_dict(p) for p in msg["users"]]
    return ingest_cell(adapter, Path(msg["store"]), msg["rate"], int(msg["writers"]), float(msg["minutes"]),
                       float(msg["cap_s"]), int(msg["batch"]), [u for u in users if isinstance(u, MarketParams)],
                       int(msg["repetitions"]))


def ingest_cell(adapter: Engine, store: Path, rate: int | None, writers: int, minutes: float, cap_s: float,
                batch: int, users: list[MarketParams], repetitions: int) -> dict[str, Any]:
    """Day D's first ``minutes`` of events replayed at ``rate`` events/s (``None``: as fast as
    the engine takes them) by ``writers`` writers, each replay stopped after ``cap_s`` seconds if
    still running: first into a fresh store alone (the ingest-alone control), then into another
    fresh store while ``users`` run M-SNAP over what is visible; then, every acknowledged row
    visible, the same users alone on that store (the queries-alone control)."""
    ingest = capability(adapter, Ingest)
    replay = MarketReplay(adapter.dataset, users[0], span_ns=int(minutes * 60 * 1e9))
    # Rows of one ts stay in one payload: their order at that ts is the SPEC's (exchange, then
    # seq or trade_id) only if no two writers' commits can interleave them.
    plan = Plan.build(replay.tables, replay.which, batch, writers, together=replay.event_ts)
    on_commit = bool(type(ingest).ingest_visible_on_commit)
    shutil.rmtree(store, ignore_errors=True)
    errors: list[str] = []
    servers = adapter.memory_pids() if isinstance(adapter, Server) else []
    alone = _ingest_alone(ingest, plan, store / "alone", servers, rate, cap_s, on_commit, errors)
    try:
        ingest.ingest_open(store / "during")
        target = ingest.ingest_stream_target()
        readers = [ingest.ingest_reader() for _ in users]
        try:
            noop = _noop_users(len(users), repetitions)
            with Writers(target, plan, servers) as pool:
                out = _engine_run(ingest, pool, plan, replay, readers, users, rate, cap_s, repetitions, on_commit,
                                  errors)
                out.update({"writers_mode": pool.mode, "pinning": pool.pinning})
        finally:
            for rd in readers:
                rd.close()
    finally:
        ingest.ingest_close()
        shutil.rmtree(store, ignore_errors=True)
    out.update({"path": target.path, "dataset_events": replay.total, "replayed_events": len(replay),
                "span_ns": replay.span_ns, "span_end_ns": replay.end_ns, "open_ns": replay.open_ns,
                "alone": alone, "ceiling": alone["ceiling"], "ceiling_sink": alone["ceiling_sink"],
                "visible_on_commit": on_commit,
                "one_process": type(ingest).ingest_one_process if target.in_process else "",
                "noop": noop, "errors": errors})
    return out


def _ingest_alone(ingest: Ingest, plan: Plan, store: Path, servers: list[int], rate: int | None,
                  cap_s: float, on_commit: bool, errors: list[str]) -> dict[str, Any]:
    """The ingest-alone control, in a fresh store of its own: the writers' ceilings (the same
    writers against the null sink, and the loopback sink for writer processes), then the same
    replay into the engine with no user and no watcher; afterwards (untimed) every acknowledged
    row is checked visible."""
    ceilings: dict[str, float] = {}
    try:
        ingest.ingest_open(store)
        target = ingest.ingest_stream_target()
        with Writers(target, plan, servers) as pool, Sink() as sink:
            for kind in ("null",) if target.in_process else ("null", "sink"):
                r = pool.run(Destination(kind, sink.port), None, cap_s, cap_s=cap_s)
                errors += [f"{kind} sink: {e}" for e in r.errors]
                ceilings[kind] = r.rate(plan)
            run = pool.run(Destination("engine"), rate, cap_s, cap_s=cap_s)
        errors += [f"ingest alone: {e}" for e in run.errors]
        _all_visible(ingest, _acked(plan, run), None, on_commit, errors, "ingest alone")
    finally:
        ingest.ingest_close()
        shutil.rmtree(store, ignore_errors=True)
    written, seconds = _written(plan, run)
    return {"written": written, "seconds": seconds, "throughput": written / seconds if seconds else 0.0,
            "ceiling": ceilings.get("null" if target.in_process else "sink", 0.0),
            "ceiling_sink": "null sink (writer threads, no transport)" if target.in_process
            else "loopback HTTP sink (same writer processes and client)"}


def _acked(plan: Plan, run: Any) -> dict[str, int]:
    acked = {t: 0 for t in TABLES}
    for k in np.flatnonzero(run.sent):
        acked[plan.table[k]] += int(plan.rows[k])
    return acked


def _written(plan: Plan, run: Any) -> tuple[int, float]:
    """Rows acknowledged, and seconds from the run's start to its last acknowledgement."""
    sent = np.flatnonzero(run.sent)
    written = int(plan.rows[sent].sum()) if len(sent) else 0
    elapsed = max(1, max((int(run.ack[k]) for k in sent), default=run.start) - run.start)
    return written, elapsed / 1e9


def _all_visible(ingest: Ingest, acked: dict[str, int], mark: Watermark | None, on_commit: bool,
                 errors: list[str], label: str) -> None:
    """Wait until every acknowledged row is visible; an engine that declares its writes visible
    on commit must show them all at the first look."""
    deadline = perf() + int(VISIBLE_WAIT_S * 1e9)
    first = True
    while True:
        short = sum(max(0, acked[t] - ingest.ingest_count(t, 2**62)) for t in TABLES)
        if not short:
            return
        if first and on_commit:
            errors.append(f"{label}: the engine declares its writes visible on commit, but {short:,} acknowledged "
                          "rows were not visible once the writers finished")
        first = False
        if perf() > deadline:
            errors.append(f"{label}: acknowledged rows not all visible {VISIBLE_WAIT_S:g} s after the writers")
            return
        if mark is not None:
            mark.check()
        time.sleep(0.001)


def _noop_users(users: int, repetitions: int) -> dict[str, Any]:
    """The users' loop against a query that does nothing: the harness's own ceiling."""
    logs = [UserLog() for _ in range(users)]
    together = threading.Barrier(users)
    empty = pa.table({"x": pa.array([], pa.int64())})

    def noop() -> pa.Table:
        return empty

    def user(i: int) -> None:
        together.wait()
        for _ in range(max(repetitions, NOOP_QUERIES)):
            logs[i].time("alone", noop)

    _threads(users, user)
    return {"ns": [x for lg in logs for x in lg.alone], "seconds": _seconds(logs, "alone")}


def _seconds(logs: list[UserLog], phase: str) -> float:
    spans = [lg.spans[phase] for lg in logs if phase in lg.spans]
    if not spans:
        return 0.0
    return (max(e for _, e in spans) - min(s for s, _ in spans)) / 1e9


def _threads(n: int, fn: Any) -> None:
    threads = [threading.Thread(target=fn, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


class _CounterCounts:
    """A :class:`IngestCounter` seen as :class:`Counting`."""

    def __init__(self, counter: IngestCounter) -> None:
        self.counter = counter

    def ingest_count(self, table: str, upto_ns: int) -> int:
        return self.counter.count(table, upto_ns)


def watcher_main(counter: IngestCounter, ts: dict[str, np.ndarray], open_ns: int, end_ns: int, conn: Any) -> None:
    """The watcher in a process of its own (:class:`~tickbench.suites.harness.Child`):
    report ready, then check back to back, sending each advance ``("mark", start, end, W)``,
    until the parent's stop; then ``("done", polls, error)``."""
    mark = Watermark(_CounterCounts(counter), ReplayedTs(ts, open_ns, end_ns))
    error = ""
    try:
        counter.count(TABLES[0], open_ns)  # connect before the clock
        conn.send(("ready",))
        sent = 0
        while not conn.poll():
            mark.check()
            for c in mark.checks[sent:]:
                conn.send(("mark", *c))
            sent = len(mark.checks)
            time.sleep(0.001)
        conn.recv()
    except BaseException as exc:  # recorded for the cell
        error = f"{type(exc).__name__}: {exc}"
    finally:
        counter.close()
    conn.send(("done", mark.polls, error))


class _Watcher:
    """The cell's watcher: a thread of this process checking ``mark``, or, for a store whose
    counts another process may take (:meth:`Ingest.ingest_counter`), a process of
    its own whose advances a thread here copies into ``mark``."""

    def __init__(self, ingest: Ingest, replay: MarketReplay, mark: Watermark, in_process: bool,
                 errors: list[str]) -> None:
        self.mark, self.errors = mark, errors
        self.done = threading.Event()
        counter = None if in_process else ingest.ingest_counter()
        self.child: Child | None = None
        self.mode = WATCHER_THREAD
        if counter is not None:
            self.child = Child("tickbench.suites.market.ingest_ops:watcher_main", counter, replay.ts, replay.open_ns,
                               replay.end_ns)
            self.mode = WATCHER_PROCESS
            if not self.child.conn.poll(WATCHER_READY_S) or self.child.conn.recv()[0] != "ready":
                self.child.kill()
                raise RuntimeError(f"the watcher process was not ready within {WATCHER_READY_S:g} s")
        self.thread = threading.Thread(target=self._copy if self.child else self._watch, name="watermark")

    def _watch(self) -> None:
        try:
            while not self.done.is_set():
                self.mark.check()
                time.sleep(0.001)
        except Exception as exc:
            self.errors.append(f"watermark: {type(exc).__name__}: {exc}")

    def _copy(self) -> None:
        assert self.child is not None
        try:
            while True:
                msg = self.child.conn.recv()
                if msg[0] == "done":
                    self.mark.polls += int(msg[1])
                    if msg[2]:
                        self.errors.append(f"watermark: {msg[2]}")
                    return
                _, start, end, value = msg
                self.mark.checks.append((start, end, value))
                self.mark.value = value
        except (EOFError, OSError) as exc:
            self.errors.append(f"watermark: the watcher process ended: {type(exc).__name__}: {exc}")

    def __enter__(self) -> _Watcher:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        if self.child is not None:
            with contextlib.suppress(OSError):
                self.child.conn.send(None)
        self.thread.join()
        if self.child is not None:
            self.child.join(30)


def _engine_run(ingest: Ingest, pool: Writers, plan: Plan, replay: MarketReplay, readers: list[IngestReader],
                users: list[MarketParams], rate: int | None, cap_s: float, repetitions: int, on_commit: bool,
                errors: list[str]) -> dict[str, Any]:
    mark = Watermark(ingest, replay)
    done = threading.Event()
    logs = [UserLog() for _ in users]

    def user(i: int) -> None:
        p, log = users[i], logs[i]
        try:
            while not done.is_set():
                w = mark.value
                if w is None or quantised(w, replay) <= replay.open_ns:
                    time.sleep(0.001)
                    continue
                times = probes(p, replay.open_ns, quantised(w, replay))
                bound = dataclasses.replace(p, T=times)
                log.keep(times, log.time("during", lambda b=bound: readers[i].run_query("M-SNAP", b)))
                log.bound.append(times)
        except Exception as exc:
            log.error = f"user {i} during the ingest: {type(exc).__name__}: {exc}"

    with _Watcher(ingest, replay, mark, pool.target.in_process, errors) as watcher:
        threads = [threading.Thread(target=user, args=(i,)) for i in range(len(users))]
        for t in threads:
            t.start()
        try:
            run = pool.run(Destination("engine"), rate, cap_s, cap_s=cap_s)
        finally:
            done.set()
            for t in threads:
                t.join()
    errors += run.errors
    # After the writers: every acknowledged row visible, then the final watermark.
    _all_visible(ingest, _acked(plan, run), mark, on_commit, errors, "during the ingest")
    mark.check()
    final = mark.value if mark.value is not None else replay.open_ns
    together = threading.Barrier(len(users))

    def alone(i: int) -> None:
        p, log = users[i], logs[i]
        picks = log.alone_probes(probes(p, replay.open_ns, quantised(final, replay)), repetitions)
        together.wait()
        try:
            for times in picks:
                bound = dataclasses.replace(p, T=times)
                log.keep(times, log.time("alone", lambda b=bound: readers[i].run_query("M-SNAP", b)))
        except Exception as exc:
            log.error = log.error or f"user {i} alone after the ingest: {type(exc).__name__}: {exc}"

    _threads(len(users), alone)
    return {**_ingest_figures(plan, run, replay, mark, on_commit), "final_watermark_ns": final,
            "users": [lg.reply() for lg in logs], "polls": mark.polls, "watcher": watcher.mode,
            "during_seconds": _seconds(logs, "during"), "alone_seconds": _seconds(logs, "alone")}


def _ingest_figures(plan: Plan, run: Any, replay: MarketReplay, mark: Watermark, on_commit: bool) -> dict[str, Any]:
    """Rows acknowledged per second, and (unless the engine's writes are visible on commit)
    acknowledged → visible per payload: from its acknowledgement to the end of the first
    watermark check that proved every row up to its last ts visible (an upper bound: the check
    may have begun before)."""
    written, seconds = _written(plan, run)
    out: dict[str, Any] = {"planned": plan.total_rows, "written": written, "seconds": seconds,
                           "throughput": written / seconds, "visibility_hdr": None}
    if on_commit:
        return out
    vis = latency.new()
    checks = mark.checks
    for k in np.flatnonzero(run.sent):
        last_ts = int(replay.event_ts[plan.events[k]].max())
        ack = int(run.ack[k])
        end = next((e for _, e, w in checks if w >= last_ts and e >= ack), None)
        if end is not None:
            latency.record(vis, max(1, end - ack), int(plan.rows[k]))
    out["visibility_hdr"] = latency.encode(vis)
    return out
