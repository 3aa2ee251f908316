"""The market suite's own operations in the engine process (its load, M-W and M-SE are the
core ``load`` and :data:`tickbench.suites.cells.WORKER_OPS`, as the published suite's): the users
(:func:`users_op`), in a client process of each user's own, or as threads of the engine's process
where the engine admits one open per process, each user with its own client, timing its own
queries."""

from __future__ import annotations

import contextlib
import copy
import itertools
import os
import threading
import time
from typing import Any

import pyarrow as pa

from tickbench.datasets.base import params_from_dict
from tickbench.engines.base import Engine, ProcessClients, SharedReaders, capability
from tickbench.run.gate import wait_at_gate
from tickbench.run.memory import tree_rss

perf = time.perf_counter_ns
WARM_GO_NS = 1_000_000  # one process's users, all warm, start their timed queries together this long after


# -- users (SPEC §2.3's last paragraph) --------------------------------------------------------

RSS_SAMPLE_S = 0.1  # how often the users' resident memory is sampled while they run
MIN_CEILING_QUERIES = 1_000  # the harness ceiling's decodings per user at least: enough for a rate


def user_clients(adapter: Engine, users: list[dict[str, Any]], own: bool) -> list[Engine]:
    """One client per user of ``users`` (each ``{"user": i, "params": …}``), bound to its own
    parameters: with ``own`` this process is a client process of its own (opened with
    ``start_shared``), its first user on that open and each further user on an open of its own
    (a fresh adapter's ``start_shared``: its own connection, or its own open of the store); on
    an engine that admits one open per process (:class:`ProcessClients`) a connection of its
    own in this process; on an in-memory engine a copy of the adapter over its frames. A user
    that cannot open its client ends them all, naming itself."""
    out: list[Engine] = []
    try:
        for u in users:
            p = params_from_dict(u["params"])
            try:
                if own and not out:
                    adapter.set_params(p)
                    out.append(adapter)
                elif own:
                    inst = type(adapter)(adapter.info, adapter.workdir, adapter.dataset, p)
                    out.append(inst)  # listed before it opens: closed with the others if it fails
                    capability(inst, SharedReaders).start_shared()
                elif isinstance(adapter, ProcessClients):
                    out.append(adapter.open_client(p))
                else:
                    inst = copy.copy(adapter)
                    inst.set_params(p)
                    out.append(inst)
            except Exception as exc:
                raise RuntimeError(f"user {u['user']} (pid {os.getpid()}) could not open its own client: "
                                   f"{type(exc).__name__}: {exc}") from exc
    except BaseException:
        close_clients(adapter, out, own)
        raise
    return out


def close_clients(adapter: Engine, clients: list[Engine], own: bool) -> None:
    """Close the users' own connections and opens: each but this process's own open (its first
    client with ``own``), and nothing of a copy sharing the adapter's frames."""
    if own or isinstance(adapter, ProcessClients):
        for c in clients:
            if c is not adapter:
                with contextlib.suppress(Exception):
                    c.stop()


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def users_op(adapter: Engine, msg: dict[str, Any]) -> dict[str, Any]:
    """The worker operation ``market_users``: the users of ``msg["users"]`` (each ``{"user": i,
    "params": …}``) in this process, each a thread with its own client (:func:`user_clients`),
    all waiting for ``start_ns`` (the runner's common start, on the machine's monotonic clock:
    the barrier across the users' processes, after every client is open). Each runs query
    ``qid`` ``warmup`` times untimed; once every user is warm (this process's, and with
    ``gate`` every process's: :func:`~tickbench.run.gate.wait_at_gate`) all run it
    ``repetitions`` timed times from one common start (each its next query once the last one's
    whole answer is in, as the engine's client returns it: tickbench decodes nothing in the
    timed path), and on until ``window_s`` seconds after that start, when given. Past
    ``budget_s`` a user starts no further query (it has run at least one timed). With
    ``ceiling`` (the users' Arrow IPC answers, one per user) the users instead run
    the adapter's own decoding of that answer (:meth:`Engine.client_decoder`) with no engine
    behind it, at least :data:`MIN_CEILING_QUERIES` times each: the harness's ceiling.

    Replies, per user: its pid, timed latencies (ns), its start (its warm-up's) and the span of
    its timed queries on the monotonic clock, the order in which its timed queries ended among
    every user's of this process, and its distinct answers as Arrow IPC (kept as the engine returned them and
    encoded once the users are done, outside the clock), each answer's index among them; a
    user that fails replies its error, naming itself; and the largest resident memory of this
    process and the engine's servers while the users ran."""
    qid = str(msg["qid"])
    users: list[dict[str, Any]] = msg["users"]
    warmup, reps = int(msg["warmup"]), int(msg["repetitions"])
    ceiling: list[bytes] | None = msg.get("ceiling")
    own = bool(msg.get("own"))
    if ceiling is not None:
        reps = max(reps, MIN_CEILING_QUERIES)
        decoders = [adapter.client_decoder(qid, pa.ipc.open_stream(b).read_all()) for b in ceiling]
        clients: list[Engine] = []
    else:
        clients = user_clients(adapter, users, own)
    pids = sorted({os.getpid(), *adapter.memory_pids()})
    out: list[dict[str, Any]] = [{} for _ in users]
    done = threading.Event()
    peak = [tree_rss(pids)]
    start_ns = int(msg.get("start_ns") or perf())
    ended = itertools.count()  # the order the timed queries end in, across this process's users
    together = threading.Barrier(len(users))  # ... and the users of this process start together

    def sample() -> None:
        while not done.wait(RSS_SAMPLE_S):
            peak[0] = max(peak[0], tree_rss(pids))

    go = [0]  # the common start of the timed queries, once every user is warm
    gate = msg.get("gate")

    def all_warm() -> None:  # in one thread, once this process's users are all warm
        go[0] = wait_at_gate(str(gate)) if gate else perf() + WARM_GO_NS

    warm = threading.Barrier(len(users), action=all_warm)

    def user(i: int) -> None:
        who = f"user {users[i]['user']} (pid {os.getpid()})"
        run = decoders[i] if ceiling is not None else (lambda: clients[i].run_query(qid))
        answers: list[Any] = []
        ns: list[int] = []
        order: list[int] = []
        first = last = 0
        stopped = False
        together.wait()
        time.sleep(max(0, start_ns - perf()) / 1e9)
        began = perf()  # the user's start (its untimed warm-up's): together with every other user's
        try:
            for _ in range(warmup):
                table = run()
                if ceiling is None:
                    answers.append(table)
        except Exception as exc:
            warm.abort()  # this process's other users stop waiting for it
            out[i] = {"error": f"{who}: {type(exc).__name__}: {exc}"}
            return
        try:
            warm.wait()
        except threading.BrokenBarrierError:
            out[i] = {"error": f"{who}: stopped before its timed queries: another user of its process failed"}
            return
        time.sleep(max(0, go[0] - perf()) / 1e9)
        deadline = perf() + int(float(msg["budget_s"]) * 1e9)
        window_end = go[0] + int(float(msg.get("window_s") or 0) * 1e9)
        try:
            while len(ns) < reps or perf() < window_end:
                if ns and perf() >= deadline:
                    stopped = len(ns) < reps
                    break
                t0 = perf()
                table = run()
                t1 = perf()
                if ceiling is None:
                    answers.append(table)
                first = first or t0
                last = t1
                ns.append(t1 - t0)
                order.append(next(ended))
        except Exception as exc:
            out[i] = {"error": f"{who}: {type(exc).__name__}: {exc}"}
            return
        out[i] = {"pid": os.getpid(), "ns": ns, "began_ns": began, "first_ns": first, "last_ns": last,
                  "stopped": stopped, "order": order, "answers": answers}

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    threads = [threading.Thread(target=user, args=(i,)) for i in range(len(users))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        peak[0] = max(peak[0], tree_rss(pids))
    finally:
        done.set()
        sampler.join()
        close_clients(adapter, clients, own)
    for u in out:  # outside the clock: identical answers are encoded, sent and checked once
        if "answers" in u:
            distinct: dict[bytes, int] = {}
            of: list[int] = []
            for table in u["answers"]:
                data = _ipc(table)
                of.append(distinct.setdefault(data, len(distinct)))
            u["answers"], u["answer_of"] = list(distinct), of
    return {"users": out, "rss_peak_bytes": peak[0]}
