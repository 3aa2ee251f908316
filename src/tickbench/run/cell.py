"""One engine's cells of one suite: the workers, the records, and the one place where a failed
cell is handled (timeout, crash, engine error, a server that died under it).

A suite's ``run`` gets a :class:`CellContext`. It makes :class:`Worker` s (engine processes,
started and optionally loaded) and records cells with :meth:`CellContext.record`;
:meth:`Worker.attempt` runs one cell's body and turns any failure into that cell's record,
restarting the engine for the next cell. A suite drives its engine processes only through
:class:`Worker`'s verbs (call, begin and collect, wait until, pause until, kill the servers,
fan out to several clients), so the clock and the processes stay the runner's.

What the runner needs of a suite is :class:`RunnableSuite`: it reads the suite's declared
attributes (its worker operations, its endpoint policy, its figures model) and never imports a
suite or names one.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import threading
import time
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from tickbench.data.dataset import Dataset, DatasetError
from tickbench.datasets.base import ReferenceAnswers, RunParams
from tickbench.engines.base import Engine, EngineInfo
from tickbench.results import Record
from tickbench.run.engine_process import (
    CellTimeout,
    EngineError,
    EngineProcess,
    MemoryBudgetExceeded,
    WorkerDied,
    WorkerOp,
    stopping,
)
from tickbench.run.gate import WarmGate
from tickbench.run.memory import BUDGET_ENV, GIB, tree_rss

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["FAILURES", "Budget", "CellContext", "CellTimeout", "EngineError", "MemoryBudgetExceeded", "Options",
           "Protocol", "RunnableSuite", "Worker", "WorkerDied", "WorkerOp", "stopping"]

# DatasetError: the reference answer of a cell could not be read from the dataset. It is that
# cell's failure, recorded like an engine's, never the end of the run for the engines after it.
FAILURES = (CellTimeout, WorkerDied, EngineError, DatasetError)
Options = dict[str, Any]  # one suite's option values, by option name


class RunnableSuite(typing.Protocol):
    """What the runner reads of a suite (``tickbench.suites.base.Suite`` implements it)."""

    @property
    def name(self) -> str:
        """The ``--suite`` value, the first part of its benchmark ids, the records' ``suite``."""

    @property
    def figures_model(self) -> type[BaseModel] | None:
        """The typed model of its records' figures, checked when a record is made."""

    @property
    def worker_ops(self) -> Mapping[str, WorkerOp]:
        """The operations it adds to the engine process, by name (module-level functions)."""

    @property
    def dataset_kind(self) -> str:
        """The kind of dataset it runs on (``paper`` or ``market``)."""

    @property
    def load_op(self) -> str:
        """The engine-process operation that loads its data (``load``, or one of its ``worker_ops``)."""

    @property
    def endpoint_refusal(self) -> str | None:
        """Why the suite cannot run against a server tickbench does not run (``--endpoint``),
        or ``None`` when it can."""

    @property
    def endpoint_unmeasured(self) -> Mapping[str, str]:
        """The cells it does not measure against such a server, each with the reason."""

    def defaults(self) -> Options: ...

    def options_from_json(self, raw: dict[str, Any]) -> Options: ...

    def option_names(self) -> Sequence[str]: ...

    def requires(self, engine: type[Engine], info: EngineInfo) -> str | None: ...

    def refusal(self, engine: type[Engine], info: EngineInfo) -> str | None: ...

    def cell_ids(self, opts: Options, engine: type[Engine]) -> list[str]: ...

    def category(self, benchmark: str) -> str: ...

    def run(self, ctx: CellContext, todo: list[str]) -> None: ...


@dataclass(frozen=True)
class Protocol:
    """How each cell is measured (SPEC §3)."""

    repetitions: int = 10
    #: Untimed runs of a query before its timed repetitions: at least one (its answer is the
    #: one verified), then more until ``warmup`` runs or ``warmup_s`` seconds, whichever comes
    #: first (:class:`WarmUp`). One run left QuestDB's freshly started JVM compiling its code
    #: paths through the timed repetitions (waits of 12-14 ms in some of them at SF 1).
    warmup: int = 10
    warmup_s: float = 1.0
    timeout_s: float = 300.0
    load_timeout_s: float = 3600.0
    load_repetitions: int = 3  # W: each path this many times, interleaved; the median is reported
    cold: bool = False
    save_answers: Path | None = None  # directory for answers/<engine>/<ID>.parquet
    #: Seconds a cell may take (beyond its warm-up and verification): a cell that reaches it
    #: stops, and records what it measured so far, marked as stopped at the budget.
    cell_budget_s: float = 60.0


class WarmUp:
    """A query cell's warm-up, on the runner's clock (:attr:`Protocol.warmup`,
    :attr:`Protocol.warmup_s`): :meth:`more` says whether to run the query once more untimed,
    :meth:`ran` counts a run; :attr:`runs` is what the cell records."""

    def __init__(self, protocol: Protocol) -> None:
        self.most = max(1, protocol.warmup)
        self.seconds = protocol.warmup_s
        self.start = time.monotonic()
        self.runs = 0

    def more(self) -> bool:
        """Whether another untimed run is due: always the first, then while fewer than
        ``warmup`` ran and ``warmup_s`` seconds have not passed since the first began."""
        return self.runs == 0 or (self.runs < self.most and time.monotonic() - self.start < self.seconds)

    def ran(self) -> None:
        self.runs += 1


class Budget:
    """A cell's time budget, on the runner's clock (:attr:`Protocol.cell_budget_s`)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left (0 once spent)."""
        return max(0.0, self.end - time.monotonic())

    def spent(self) -> bool:
        return self.left() == 0.0

    def note(self, done: int, asked: int, what: str) -> str:
        """The record's note for a cell stopped at the budget after ``done`` of ``asked`` ``what``."""
        return (f"stopped at the cell budget of {self.seconds:g} s after {done:,} of {asked:,} {what} "
                "(raise it with --cell-budget)")


class PhaseClock:
    """Wall seconds of each phase of one engine's run (start, load, each cell), in run order:
    the runner's record of where an engine's time went, kept in ``meta["phase_seconds"]``."""

    def __init__(self, meta: dict[str, Any], announce: Callable[[str], None] | None = None) -> None:
        self.seconds: dict[str, float] = meta.setdefault("phase_seconds", {})
        self.mark = time.monotonic()
        self._announce = announce

    def announce(self, what: str) -> None:
        """Say which phase begins (progress for a long start or load, which records no cell)."""
        if self._announce is not None:
            self._announce(what)

    def lap(self, phase: str) -> None:
        """Close ``phase`` (a repeated phase, e.g. a restart's load, adds to its total)."""
        now = time.monotonic()
        self.seconds[phase] = round(self.seconds.get(phase, 0.0) + now - self.mark, 3)
        self.mark = now


#: How the engines word a full disk (PostgreSQL's DiskFull, ClickHouse's NOT_ENOUGH_SPACE, errno's ENOSPC …).
DISK_FULL = re.compile(r"no space left on device|disk ?full|not[ _]enough[ _](disk[ _])?space|ENOSPC", re.IGNORECASE)


def free_bytes(path: Path) -> int:
    """Free space on the disk that holds ``path`` (or would: its nearest existing parent)."""
    where = next((p for p in (path, *path.absolute().parents) if p.exists()), Path("/"))
    return shutil.disk_usage(where).free


def disk_full_hint(workdir: Path, engine: str, reason: str) -> str:
    """What to do when ``reason`` is a full disk: the engine's message names a file, not the
    run's working directory, nor that the failed cells can be run again."""
    if not DISK_FULL.search(reason):
        return ""
    free = free_bytes(workdir) / 1e9
    return (f" [the disk under {workdir} filled up ({free:.1f} GB free now): free space there or run with "
            f"--out on a larger disk, then `tickbench run --resume DIR --redo {engine}` runs {engine} again]")


@dataclass
class CellContext:
    """What a suite's run of one engine has to hand."""

    suite: RunnableSuite
    info: EngineInfo
    engine: type[Engine]
    ds: Dataset
    params: RunParams
    refs: ReferenceAnswers
    workdir: Path
    protocol: Protocol
    opts: Options
    seed: int
    on_record: Callable[[Record], None]
    #: Run-wide artefacts a suite computes once and shares between engines (e.g. the
    #: scaling suite's larger datasets), by the suite's own keys.
    shared: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)  # the engine's version, settings, load figures
    clock: PhaseClock | None = None  # where the engine's wall time went (shared by its suites)

    def record(self, bench: str, status: str, reason: str = "", **extra: Any) -> Record:
        """Make the cell's record (its figures checked against the suite's model) and hand it
        to the run, which writes ``results.json`` at once."""
        rec = self.make(bench, status, reason, **extra)
        self.on_record(rec)
        return rec

    def make(self, bench: str, status: str, reason: str = "", **extra: Any) -> Record:
        figures = extra.pop("figures", None) or {}
        model = self.suite.figures_model
        if model is not None and figures:
            figures = model.model_validate(figures).model_dump(exclude_unset=True)
        if status in ("error", "timeout"):
            reason += disk_full_hint(self.workdir, self.info.name, reason)
        return Record(engine=self.info.name, benchmark=bench, suite=self.suite.name,
                      category=self.suite.category(bench), status=status, reason=reason,  # type: ignore[arg-type]
                      figures=figures, **extra)

    def budget(self) -> Budget:
        """The time budget of one cell, starting now."""
        return Budget(self.protocol.cell_budget_s)

    def worker(self, name: str, ds: Dataset | None = None, load: bool = False) -> Worker:
        """A worker for the engine over ``workdir/name`` (not started yet)."""
        return Worker(self, name, ds or self.ds, load)

    def all_failed(self, todo: list[str], exc: Exception) -> None:
        """Record every cell of ``todo`` as failed because the engine did not start or load."""
        status = "timeout" if isinstance(exc, CellTimeout) else "error"
        for bench in todo:
            self.record(bench, status, f"engine did not start or load: {exc}")


POLL_S = 0.005  # how often :meth:`Worker.wait_until` looks at its condition
CLIENTS_START_S = 0.5  # :meth:`Worker.fan_out`'s clients begin together this long after they are sent


class Worker:
    """One engine process for a suite, with the one copy of failure handling, and the verbs a
    suite drives it with.

    ``load``: whether :meth:`start` also loads the query data (an ingest suite's worker starts
    an empty engine). After a failure the worker is killed and started again (and loaded again
    only when the engine keeps no data across a restart); when that fails too, the next cell
    tries once more and is recorded as an error if the engine still cannot start.
    """

    def __init__(self, ctx: CellContext, name: str, ds: Dataset, load: bool) -> None:
        self.ctx = ctx
        self.load = load
        self.workdir = ctx.workdir / name
        self.ds = ds
        self.proc = EngineProcess(ctx.info.name, self.workdir, ds.root, ctx.params, ctx.suite.worker_ops)
        self.down: str | None = None  # why the engine is not running after a failed restart

    # -- verbs --------------------------------------------------------------------------------

    def call(self, timeout: float, **msg: Any) -> dict[str, Any]:
        """Run one operation (``op=`` and its arguments) and return its reply; a reply that does
        not come within ``timeout`` seconds is a :class:`CellTimeout` (the process is killed)."""
        return self.proc.call(timeout, **msg)

    def begin(self, **msg: Any) -> None:
        """Start one operation without waiting for it (:meth:`collect` takes its reply)."""
        self.proc.send(**msg)

    def replied(self) -> bool:
        """Whether the operation begun last has replied (without taking the reply)."""
        return self.proc.conn is not None and self.proc.conn.poll(0)

    def collect(self, timeout: float) -> dict[str, Any]:
        """The reply of the operation begun last, waiting up to ``timeout`` seconds."""
        return self.proc.receive(timeout)

    def wait_until(self, condition: Callable[[], bool], timeout: float) -> int | None:
        """Wait, while an operation begun with :meth:`begin` runs, until ``condition()`` holds;
        return the runner's monotonic clock (ns) when it did, or ``None`` when the operation
        replied first (its reply is left for :meth:`collect`). Past ``timeout`` seconds the
        process is killed and :class:`CellTimeout` raised."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return time.monotonic_ns()
            if self.replied():
                return None
            time.sleep(POLL_S)
        self.proc.kill()
        raise CellTimeout(f"not ready within {timeout:g} s")

    @staticmethod
    def pause_until(t_ns: int) -> None:
        """Sleep until the runner's monotonic clock reads ``t_ns`` (from :meth:`wait_until`)."""
        time.sleep(max(0, t_ns - time.monotonic_ns()) / 1e9)

    def engine_pids(self) -> list[int]:
        """The engine process's pid and its servers' (those it reported starting), for memory."""
        proc = self.proc.proc
        return [*([proc.pid] if proc is not None and proc.pid else []), *self.proc.server_pids]

    def kill_servers(self) -> int:
        """SIGKILL the engine's server processes and their children, not the engine process (a
        server crash); how many processes were killed. An embedded engine has none."""
        return self.proc.kill_servers()

    def fan_out(self, count: int, timeout: float, **msg: Any) -> list[dict[str, Any]]:
        """Run one operation in ``count`` further engine processes at once, each opened beside
        this one over its store (``start_shared``) and told its number (``client``) and a common
        start time (``start_at``, epoch seconds); their replies in client order. The processes
        are closed afterwards."""
        procs = [EngineProcess(self.ctx.info.name, self.workdir, self.ds.root, self.ctx.params,
                               self.ctx.suite.worker_ops) for _ in range(count)]
        replies: list[dict[str, Any]] = [{} for _ in procs]
        errors: list[BaseException] = []
        try:
            for p in procs:
                p.call(self.ctx.protocol.load_timeout_s, op="start_shared")
            start_at = time.time() + CLIENTS_START_S

            def one(i: int) -> None:
                try:
                    replies[i] = procs[i].call(timeout, **msg, client=i, start_at=start_at)
                except BaseException as exc:  # raised below, in the caller's thread
                    errors.append(exc)

            threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors:
                raise errors[0]
            return replies
        finally:
            for p in procs:
                p.close()

    def clients(self, count: int) -> Clients:
        """A pool of ``count`` further engine processes, each opened beside this one over its
        store (``start_shared``: its own connection, or its own open) before any clock: use it
        as a context manager; leaving it closes them, or kills them after a failure."""
        return Clients(self, count)

    def start(self, load: bool | None = None) -> None:
        """Start the engine (and load it when the worker loads); failures raise."""
        timeout = self.ctx.protocol.load_timeout_s
        clock = self.ctx.clock
        if clock is not None:
            clock.announce("starting")
        self.proc.call(timeout, op="start")
        if clock is not None:
            clock.lap("start")
        if self.load if load is None else load:
            if clock is not None:
                clock.announce("loading")
            try:
                reply = self.proc.call(timeout, op=self.ctx.suite.load_op)
            except CellTimeout:
                raise CellTimeout(f"the load took longer than {timeout:g} s (raise it with --load-timeout)") from None
            finally:
                if clock is not None:
                    clock.lap("load")  # a failed load's time is the load's, not the first cell's
            self.ctx.meta.setdefault("load_seconds", reply["ns"] / 1e9)  # the first load's, not a restart's
            self.ctx.meta.setdefault("load_rows", reply["rows"])

    def start_or_fail(self, todo: list[str], then: Callable[[], object] | None = None) -> bool:
        """Start, then run ``then`` (the suite's first calls on the started engine, e.g. asking
        its version); when either fails, kill the worker, record every cell of ``todo`` as
        failed and return False."""
        try:
            self.start()
            if then is not None:
                then()
        except FAILURES as exc:
            self.kill()
            self.ctx.all_failed(todo, exc)
            return False
        return True

    def recover(self) -> None:
        """Kill the worker (and its servers) and start the engine again over its stored data."""
        self.proc.kill()
        try:
            self.start(load=self.load and not self.ctx.engine.persistent)
            self.down = None
        except FAILURES as exc:
            self.proc.kill()  # the next cell tries again from a fresh worker
            self.down = str(exc)

    def revive(self) -> str | None:
        """Start the engine again if an earlier restart failed; the reason if it still fails."""
        if self.down is None:
            return None
        self.recover()
        return None if self.down is None else f"the engine could not be restarted after a failure: {self.down}"

    def failure(self, exc: Exception) -> tuple[str, str]:
        """The status and reason of a cell that failed with ``exc``; the engine is restarted
        when the failure left it dead (a timeout or crash kills the worker; an engine error
        whose server processes ended means the server crashed)."""
        if isinstance(exc, CellTimeout):
            self.recover()
            return "timeout", str(exc)
        if isinstance(exc, MemoryBudgetExceeded):
            self.recover()
            return "error", str(exc)
        if isinstance(exc, WorkerDied):
            self.recover()
            return "error", f"engine crashed: {exc}"
        if isinstance(exc, DatasetError):  # raised in this process, not the engine's: it runs on
            return "error", f"the reference answer could not be computed from the dataset: {exc}"
        if self.proc.servers_alive():
            return "error", str(exc)
        self.recover()
        return "error", f"engine crashed: its server process ended; restarted for the next cell ({exc})"

    def attempt(self, bench: str, body: Callable[[], Record], **extra: Any) -> Record:
        """Run one cell's ``body`` (which makes its record); a failure becomes the cell's
        record with ``extra`` (e.g. the figures so far). The record is returned, not sent."""
        if (down := self.revive()) is not None:
            return self.ctx.make(bench, "error", down, **extra)
        try:
            return body()
        except FAILURES as exc:
            status, reason = self.failure(exc)
            return self.ctx.make(bench, status, reason[:2000], **extra)

    def explain(self, qid: str) -> str:
        """The engine's plan of ``qid`` on the worker's store (:meth:`Engine.explain`), asked
        outside the clock; a plan the engine fails to give is said in its place, so the
        cell's verified timings stand."""
        try:
            reply = self.proc.call(self.ctx.protocol.timeout_s, op="explain", qid=qid)
        except EngineError as exc:
            return f"(no plan: the engine's EXPLAIN failed: {str(exc)[:500]})"
        return str(reply["plan"] or "")

    def close(self) -> None:
        """Stop the engine cleanly (killed if it does not stop in time)."""
        self.proc.close()
        self._note_peak()

    def kill(self) -> None:
        """Kill the engine process and its servers; the next call starts a fresh process."""
        self.proc.kill()
        self._note_peak()

    def _note_peak(self) -> None:
        """The engine's largest sampled resident memory (worker and servers), for the results."""
        meta = self.ctx.meta
        meta["peak_rss_bytes"] = max(meta.get("peak_rss_bytes", 0), self.proc.peak_rss)
        meta["memory_budget_bytes"] = self.proc.budget


CLIENTS_GO_S = 0.2  # :meth:`Clients.run`: the clients start together this long after the last is sent
CLIENTS_SAMPLE_S = 0.1  # how often :meth:`Clients.run` samples the clients' memory
CLIENTS_CLOSE_S = 120.0  # how long the clients may take to close their own clients, all together


class Clients:
    """A pool of client processes, each an engine process opened beside the worker's
    (:meth:`Worker.clients`). They are spawned together and opened in parallel (outside any
    clock); :meth:`run` then starts one operation in every one at once. Like every engine
    process, each dies with the runner (``PR_SET_PDEATHSIG``) and is killed on a timeout, a
    crash or a signal; a failure names the client (its number and pid)."""

    def __init__(self, worker: Worker, count: int) -> None:
        ctx = worker.ctx
        self.worker = worker
        self.procs = [EngineProcess(ctx.info.name, worker.workdir, worker.ds.root, ctx.params, ctx.suite.worker_ops)
                      for _ in range(count)]
        self.failed = False
        #: The largest sampled resident memory of the clients, the worker and its servers (:meth:`run`).
        self.peak_rss = 0

    def __enter__(self) -> Clients:
        try:
            for p in self.procs:  # spawned together: their imports and opens overlap
                p.send(op="start_shared")
            deadline = time.monotonic() + self.worker.ctx.protocol.load_timeout_s
            for i, p in enumerate(self.procs):
                self._receive(i, p, deadline)
        except BaseException:
            self.kill()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.failed or exc[0] is not None or stopping():
            self.kill()
            return
        try:  # each closes its own client, all at once; one that does not is killed
            for p in self.procs:
                p.send(op="exit")
            deadline = time.monotonic() + CLIENTS_CLOSE_S
            for p in self.procs:
                p.receive(max(0.0, deadline - time.monotonic()))
        except (CellTimeout, WorkerDied, EngineError):
            pass
        finally:
            self.kill()

    @property
    def pids(self) -> list[int]:
        """The clients' process ids, in client order (0 for one not running)."""
        return [(p.proc.pid or 0) if p.proc is not None else 0 for p in self.procs]

    def kill(self) -> None:
        for p in self.procs:
            p.kill()

    def _receive(self, i: int, p: EngineProcess, deadline: float) -> dict[str, Any]:
        pid = (p.proc.pid or 0) if p.proc is not None else 0
        try:
            return p.receive(max(0.0, deadline - time.monotonic()))
        except (CellTimeout, WorkerDied, EngineError) as exc:
            self.failed = True
            raise type(exc)(f"client {i} (pid {pid}): {exc}") from exc

    def run(self, timeout: float, msgs: Sequence[dict[str, Any]], warm_gate: bool = False) -> list[dict[str, Any]]:
        """Send ``msgs[i]`` (``op=`` and its arguments) to client ``i``, each with a common start
        ``start_ns`` on the machine's monotonic clock (``time.perf_counter_ns``: the same clock in
        every process on Linux), after every message is sent: a barrier across the processes.
        With ``warm_gate`` each message also names a :class:`~tickbench.run.gate.WarmGate` that
        the clients wait at once warm, opened when every client is warm (or one has replied
        already). Their replies in client order. While they run, the resident memory of the
        clients, the worker and its servers is sampled (:attr:`peak_rss`); past the memory
        budget, or past ``timeout`` seconds, every client is killed."""
        if len(msgs) != len(self.procs):
            raise ValueError(f"{len(msgs)} messages for {len(self.procs)} clients")
        start_ns = time.perf_counter_ns() + int((CLIENTS_GO_S + 0.001 * len(msgs)) * 1e9)
        budget = self.procs[0].budget if self.procs else 0
        with contextlib.ExitStack() as stack:
            gate = stack.enter_context(WarmGate(self.worker.workdir, len(msgs))) if warm_gate else None
            extra = {"gate": str(gate.dir)} if gate is not None else {}
            try:
                for p, msg in zip(self.procs, msgs, strict=True):
                    p.send(**msg, **extra, start_ns=start_ns)
                deadline = time.monotonic() + timeout
                replies: list[dict[str, Any]] = []
                for i, p in enumerate(self.procs):
                    while p.conn is not None and not p.conn.poll(CLIENTS_SAMPLE_S) and time.monotonic() < deadline:
                        if gate is not None and gate.shut and (gate.warm() >= gate.processes or self._replied()):
                            gate.open()
                        rss = tree_rss([*self.pids, *self.worker.engine_pids()])
                        self.peak_rss = max(self.peak_rss, rss)
                        if rss > budget:
                            raise MemoryBudgetExceeded(
                                f"{len(self.procs)} client processes and the engine held {rss / GIB:.1f} GiB, above "
                                f"the memory budget of {budget / GIB:.1f} GiB; stopped before the machine ran out "
                                f"(fewer clients, or raise it with {BUDGET_ENV}=GIB if the machine has room)")
                    replies.append(self._receive(i, p, deadline))
                return replies
            except BaseException:
                self.failed = True
                self.kill()
                raise

    def _replied(self) -> bool:
        """Whether a client has replied already (before the others are warm: it failed)."""
        return any(p.conn is not None and p.conn.poll(0) for p in self.procs)
