"""The tick-latency suite's work inside the engine's worker: one repetition of a cell, timed
there with ``perf_counter_ns`` around each write and read."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tickbench import latency
from tickbench.engines.base import Engine, Ingest, capability
from tickbench.run.visibility import wait_visible
from tickbench.suites.ingest import TICK_BASE_NS, TICK_STEP_NS, tick_row, tick_syms

perf = time.perf_counter_ns


def tick_op(adapter: Engine, msg: dict[str, Any]) -> dict[str, Any]:
    """The worker operation ``tick``: one repetition (:func:`tick_rep`)."""
    return tick_rep(adapter, Path(msg["store"]), msg["x"], msg["y"], msg["batch"], msg.get("seconds"))


def tick_rep(adapter: Engine, store: Path, x: int, y: int, batch: int, seconds: float | None = None) -> dict[str, Any]:
    """One repetition of a tick-latency cell in a fresh store: write ``x*y`` events one per
    write (``batch`` 1) or ``batch`` per write, then read each ticker back in time order and
    check every row. With ``seconds``, the writes stop once that long has passed (the cell's
    budget), and what was written is read back and checked. Returns seconds, histograms, the
    rows written and read, and whether it stopped early."""
    ingest = capability(adapter, Ingest)
    shutil.rmtree(store, ignore_errors=True)
    syms = tick_syms(x)
    n = x * y
    write_h, read_h = latency.new(), latency.new()
    ingest.ingest_open(store)
    try:
        client = ingest.ingest_client()
        engine_ns = 0
        t_start = perf()
        deadline = t_start + int(seconds * 1e9) if seconds is not None else None
        written = 0
        for lo in range(0, n, batch):
            if deadline is not None and perf() >= deadline:
                break
            rows = [tick_row(i, syms) for i in range(lo, min(n, lo + batch))]
            t0 = perf()
            client.write("trades", rows)
            dt = perf() - t0
            engine_ns += dt
            # In a batch, every event waits for its batch's acknowledgement.
            latency.record(write_h, dt, len(rows))
            written += len(rows)
        write_ns = perf() - t_start
        client.close()
        wait_visible(client)
        read_rows = 0
        wrong = ""
        t_start = perf()
        for k, sym in enumerate(syms):
            t0 = perf()
            table = ingest.ingest_read("trades", sym)
            latency.record(read_h, perf() - t0)
            read_rows += table.num_rows
            wrong = wrong or _check_ticker(table, k, x, written)
        read_ns = perf() - t_start
    finally:
        ingest.ingest_close()
        shutil.rmtree(store, ignore_errors=True)
    return {"written": written, "read": read_rows, "wrong": wrong, "write_ns": write_ns, "engine_write_ns": engine_ns,
            "read_ns": read_ns, "write_hdr": latency.encode(write_h), "read_hdr": latency.encode(read_h),
            "stopped": written < n}


def _check_ticker(table: pa.Table, k: int, x: int, written: int) -> str:
    """"" when ``table`` holds exactly ticker ``k``'s events among the first ``written`` (the
    tickers interleave round-robin), in time order, else why not."""
    want = np.arange(k, written, x, dtype=np.int64)
    if table.num_rows != len(want):
        return f"ticker {k}: {table.num_rows} rows read back, {len(want)} written"
    ts = table.column("ts").cast(pa.int64()).to_numpy()
    ids = table.column("trade_id").cast(pa.int64()).to_numpy()
    if not np.array_equal(ids, want):
        return f"ticker {k}: rows differ from those written, or not in time order"
    if not np.array_equal(ts, TICK_BASE_NS + want * TICK_STEP_NS):
        return f"ticker {k}: timestamps differ from those written"
    return ""
