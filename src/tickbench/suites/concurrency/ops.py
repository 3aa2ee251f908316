"""The concurrency suite's work inside a worker: client threads that run the query mix, each
timing its own queries into an HDR histogram."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from tickbench import latency
from tickbench.engines.base import Engine, open_shared

perf = time.perf_counter_ns


def mix_op(adapter: Engine, msg: dict[str, Any]) -> dict[str, Any]:
    """The worker operation ``mix``: this worker's clients run the mix. With ``own`` the worker
    is itself one client process, already started; otherwise its clients are threads, each
    with its own adapter instance over the same store."""
    clients = int(msg["clients"])
    if msg.get("own"):
        instances = [adapter]
    elif not adapter.persistent:
        # An in-memory engine's data live in this adapter only: its clients share it (the
        # frames are immutable, so threads read them without a lock).
        instances = [adapter] * clients
    else:
        instances = [type(adapter)(adapter.info, adapter.workdir, adapter.dataset, adapter.params)
                     for _ in range(clients)]
        for inst in instances:
            open_shared(inst)
    try:
        return mix_loop(instances, msg["qids"], msg["expected"], msg["seconds"], msg["seed"],
                        msg.get("client", 0), msg.get("start_at", time.time()))
    finally:
        if not msg.get("own") and adapter.persistent:
            for inst in instances:
                inst.stop()


def mix_loop(instances: list[Engine], qids: list[str], expected: dict[str, int], seconds: float,
             seed: int, first_client: int, start_at: float) -> dict[str, Any]:
    """Each instance is one client (a thread): it runs the query mix, each round in its own
    seeded order, until ``seconds`` have passed (the query under way then completes).
    ``start_at`` (epoch seconds) lines clients in several processes up on one start."""
    out: list[dict[str, Any]] = [{} for _ in instances]

    def client(c: int) -> None:
        rng = random.Random(f"{seed}/concurrency/{first_client + c}")
        h = latency.new()
        counts: dict[str, int] = {}
        wrong: list[str] = []
        time.sleep(max(0.0, start_at - time.time()))
        t_start = perf()
        deadline = t_start + int(seconds * 1e9)
        try:
            while perf() < deadline:
                order = list(qids)
                rng.shuffle(order)
                for q in order:
                    t0 = perf()
                    table = instances[c].run_query(q)
                    latency.record(h, perf() - t0)
                    counts[q] = counts.get(q, 0) + 1
                    if table.num_rows != expected[q]:
                        wrong.append(f"{q}: {table.num_rows} rows, expected {expected[q]}")
                    if perf() >= deadline:
                        break
            out[c] = {"hdr": latency.encode(h), "counts": counts, "wrong": wrong[:5],
                      "seconds": (perf() - t_start) / 1e9}
        except Exception as exc:
            out[c] = {"error": f"{type(exc).__name__}: {exc}"}

    threads = [threading.Thread(target=client, args=(c,)) for c in range(len(instances))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"clients": out}
