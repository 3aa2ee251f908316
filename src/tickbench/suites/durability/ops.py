"""The durability suite's work inside the engine's worker, and its checks: stream ingest,
SIGKILL the engine at a seeded point, restart it, and count the acknowledged rows that are
missing or changed, per engine and durability setting.

A cell, in order (METHODOLOGY.md, "Durability"):

1. ``durability_open`` (worker): a fresh ingest store under the setting; the reply names the
   engine's server processes as they now are (a setting may restart the server).
2. ``durability_write`` (worker, not awaited): writer threads send one event per write and,
   as each acknowledgement returns, append ``(event, submitted, acknowledged)`` to an ack log
   with ``os.write``. The log is the client's record: it lives in the page cache, which a
   killed process does not take with it, so it holds every acknowledgement received before
   the kill and no other.
3. The parent waits for the first acknowledgement, sleeps a seeded fraction (25-75 %) of
   ``--durability-seconds``, then SIGKILLs the server's processes (server engines) or the
   worker holding the writers (embedded engines: their writer is the engine).
4. ``durability_recover`` (the same worker for a server engine, a new one for an embedded
   engine): restart the engine, reopen the store, and time restart → first answered count
   (the recovery time); read every row back and compare with the ack log.

Steps 1, 2 and 4 are here; the parent's part (3, and the records) is
:mod:`tickbench.suites.durability.suite`.

Events are trades whose every field derives from the event number (``trade_id``), so a row
read back is checked field by field. What a process kill tests is a crash of the engine's
processes, not of the machine: the page cache survives it, so an acknowledgement made safe
only in the page cache survives too, and an fsync is not exercised (see METHODOLOGY.md).
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import struct
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from tickbench.engines.base import Engine, Ingest, capability
from tickbench.run.visibility import wait_visible
from tickbench.suites.ingest import tick_row, tick_syms

# One ack-log entry: event number, submitted and acknowledged (CLOCK_MONOTONIC ns, one clock
# for every process of the machine, so the parent can read the worker's times).
ACK = struct.Struct("<qqq")
SYMS = 4  # instruments the events cycle through (each read back on its own)
KILL_WINDOW = (0.25, 0.75)  # the kill falls this fraction of --durability-seconds after the first ack
clock = time.monotonic_ns


# -- in the engine's worker -------------------------------------------------------------------


def open_op(adapter: Engine, msg: dict[str, Any]) -> dict[str, Any]:
    """The worker operation ``durability_open``."""
    return open_store(adapter, Path(msg["store"]), msg["setting"])


def write_op(adapter: Engine, msg: dict[str, Any]) -> dict[str, Any]:
    """The worker operation ``durability_write``."""
    return write_until_killed(adapter, msg["seconds"], msg["writers"], Path(msg["ack_log"]))


def recover_op(adapter: Engine, msg: dict[str, Any]) -> dict[str, Any]:
    """The worker operation ``durability_recover``."""
    return recover(adapter, Path(msg["store"]), msg["setting"], Path(msg["ack_log"]))


def server_pids(adapter: Engine) -> list[int]:
    """The engine's own processes, apart from the worker itself."""
    return [p for p in adapter.memory_pids() if p != os.getpid()]


def open_store(adapter: Engine, store: Path, setting: str) -> dict[str, Any]:
    """A fresh ingest store under ``setting``."""
    ingest = capability(adapter, Ingest)
    shutil.rmtree(store, ignore_errors=True)
    ingest.ingest_open(store, setting)
    return {"pids": server_pids(adapter)}


def write_until_killed(adapter: Engine, seconds: float, writers: int, ack_log: Path) -> dict[str, Any]:
    """Stream one event per write from ``writers`` threads into the open store for
    ``seconds`` after the first acknowledgement, logging each acknowledgement as it returns.
    Returns only if no kill came (or, for a server engine, once the writers saw it)."""
    ingest = capability(adapter, Ingest)
    syms = tick_syms(SYMS)
    fd = os.open(ack_log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    first_ack: list[int] = []
    errors: list[str] = []

    def loop(w: int) -> None:
        try:
            client = ingest.ingest_client()
        except Exception as exc:
            errors.append(f"writer {w}: {type(exc).__name__}: {exc}")
            return
        i = w
        try:
            while not first_ack or clock() < first_ack[0] + seconds * 1e9:
                t0 = clock()
                client.write("trades", [tick_row(i, syms)])
                t1 = clock()
                os.write(fd, ACK.pack(i, t0, t1))  # one write(2) per entry: whole entries only
                if not first_ack:
                    first_ack.append(t1)
                i += writers
        except Exception as exc:  # the kill, as the client sees it
            errors.append(f"writer {w}: {type(exc).__name__}: {exc}"[:500])
        finally:
            with contextlib.suppress(Exception):
                client.close()

    threads = [threading.Thread(target=loop, args=(w,), name=f"durability-writer-{w}") for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    os.close(fd)
    with contextlib.suppress(Exception):  # after a server kill its connections are broken
        ingest.ingest_close()
    return {"errors": errors}


def read_acks(ack_log: Path) -> dict[int, tuple[int, int]]:
    """Event number -> (submitted, acknowledged) from the ack log."""
    raw = ack_log.read_bytes() if ack_log.exists() else b""
    raw = raw[: len(raw) - len(raw) % ACK.size]
    return {i: (t0, t1) for i, t0, t1 in ACK.iter_unpack(raw)}


def recover(adapter: Engine, store: Path, setting: str, ack_log: Path) -> dict[str, Any]:
    """Restart the engine and reopen ``store``: the recovery time runs from the restart to the
    first answered count. Then read every row back and compare with the ack log."""
    ingest = capability(adapter, Ingest)
    with contextlib.suppress(Exception):
        ingest.ingest_close()
    t0 = clock()
    with contextlib.suppress(Exception):  # a killed server leaves only its handles to clean
        adapter.stop()
    adapter.start()
    ingest.ingest_open(store, setting)
    wait_visible(adapter)  # a reopened store's committed rows, once the engine applied them
    counted = ingest.ingest_count("trades")
    recovery_ns = clock() - t0
    try:
        tables = [ingest.ingest_read("trades", sym) for sym in tick_syms(SYMS)]
    finally:
        ingest.ingest_close()
    return {"pids": server_pids(adapter), "recovery_ns": recovery_ns, "counted": counted,
            **compare(read_acks(ack_log), tables)}


def compare(acks: dict[int, tuple[int, int]], tables: list[pa.Table]) -> dict[str, Any]:
    """Acknowledged events missing (lost) or different (changed) in the rows read back, rows
    read more than once, and rows present that were never acknowledged (in flight at the kill)."""
    syms = tick_syms(SYMS)
    seen: Counter[int] = Counter()
    changed: list[int] = []
    for table in tables:
        ts = table.column("ts").cast(pa.int64()).to_pylist()
        cols = [table.column(c).to_pylist() for c in table.column_names[1:]]
        for row in zip(ts, *cols, strict=True):
            i = int(row[-1])
            seen[i] += 1
            if tuple(row) != tick_row(i, syms):
                changed.append(i)
    lost = sorted(i for i in acks if i not in seen)
    return {
        "acknowledged": len(acks), "read": sum(seen.values()), "lost": len(lost), "lost_first": lost[:10],
        "changed": len(changed), "changed_first": sorted(changed)[:10],
        "duplicated": sum(1 for n in seen.values() if n > 1),
        "unacknowledged_present": sum(1 for i in seen if i not in acks),
    }


def kill_delay_s(seed: int, engine: str, setting: str, seconds: float) -> float:
    """The seeded point of the kill, in seconds after the first acknowledgement."""
    lo, hi = KILL_WINDOW
    return random.Random(f"{seed}/durability/{engine}/{setting}").uniform(lo, hi) * seconds
