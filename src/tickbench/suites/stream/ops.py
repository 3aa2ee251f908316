"""The stream suite's work inside the engine's worker: replay the bulk-load day's events at a
target rate through writer processes (:mod:`tickbench.suites.harness`), poll for visibility, time the snapshot
query, measure the harness ceiling on the same writers and the engine's bulk path on the same
rows; every latency goes into an HDR histogram that the parent merges and records.

Order within a cell: the bulk path (a store of its own), the harness ceiling (the loopback and
null sinks), then the stream into a fresh store, with the poller and the snapshot query as
threads of the worker.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tickbench import latency
from tickbench.datasets.paper.calendar import BULK_DAY
from tickbench.engines.base import Engine, Ingest, Server, capability
from tickbench.run.faults import faults_of
from tickbench.run.visibility import wait_visible
from tickbench.suites.harness import Destination, Plan, Run, Sink, Writers, batch_size, row_latencies

perf = time.perf_counter_ns

MAX_REPLAY = 1_000_000  # events in one cell at most
MAX_REPLAY_BYTES = 192 << 20  # Arrow bytes of those events at most (writers copy them, then encode)
TABLE_CODES = ("trades", "book")


def stream_delays(fault: dict[str, str]) -> dict[str, float]:
    """The stream suite's test-only delays (seconds) from the faults injected into the adapter
    (:func:`tickbench.run.faults.faults_of`): ``writer_delay=SECONDS`` before every send of every
    writer, to the engine and to the sinks alike (a slower client); ``ack_delay=SECONDS`` after
    every acknowledgement of the engine (a slower engine; the harness's sinks are not slowed);
    ``stall=SECONDS@N`` delays the engine's acknowledgement of the cell's Nth payload once
    (``stall_s`` on payload ``stall_nth``)."""
    stall_s, _, nth = fault.get("stall", "").partition("@")
    return {"writer_delay": float(fault.get("writer_delay", 0)), "ack_delay": float(fault.get("ack_delay", 0)),
            "stall_s": float(stall_s or 0), "stall_nth": int(nth or 1)}


def stream_op(adapter: Engine, msg: dict[str, Any]) -> dict[str, Any]:
    """The worker operation ``stream``: one cell (:func:`stream_cell`)."""
    return stream_cell(adapter, Path(msg["store"]), msg["rate"], msg["writers"], msg["seconds"],
                       msg["max_batch"], msg.get("linger", 0.01), tuple(msg.get("tables", TABLE_CODES)))


class Replay:
    """The bulk-load day's events of ``tables`` merged in time order, as Arrow (each table's
    first rows: the merge is stable and each table is sorted by ``ts``)."""

    def __init__(self, adapter: Engine, limit: int, tables: tuple[str, ...]) -> None:
        read = {t: pa.concat_tables(pq.read_table(f) for f in adapter.dataset.files(t, [BULK_DAY.isoformat()]))
                .sort_by([("ts", "ascending")]) for t in tables}
        ts = np.concatenate([read[t].column("ts").cast(pa.int64()).to_numpy() for t in tables])
        which = np.concatenate([np.full(read[t].num_rows, c, np.int8) for c, t in enumerate(tables)])
        self.total = len(ts)
        per_event = sum(read[t].nbytes for t in tables) / max(1, self.total)
        limit = min(limit, max(1, int(MAX_REPLAY_BYTES / max(1.0, per_event))))
        order = np.argsort(ts, kind="stable")[:limit]
        self.which = which[order]
        self.tables = {t: read[t].slice(0, int((self.which == c).sum())).combine_chunks()
                       for c, t in enumerate(tables)}
        self.syms = {t: sorted(set(tb.column("sym").to_pylist())) for t, tb in self.tables.items()}

    def __len__(self) -> int:
        return len(self.which)


def stream_cell(adapter: Engine, store: Path, rate: int | None, writers: int, seconds: float,
                max_batch: int, linger: float, tables: tuple[str, ...]) -> dict[str, Any]:
    """One cell: the events of ``tables`` at ``rate`` events/s (``None``: as fast as possible)
    by ``writers`` writers for at most ``seconds``; every row measured from its intended send
    time (``start + i / rate`` for event ``i``), so a stall shows in every event due during it."""
    ingest = capability(adapter, Ingest)
    shutil.rmtree(store, ignore_errors=True)
    limit = MAX_REPLAY if rate is None else min(MAX_REPLAY, max(1, int(rate * seconds)))
    replay = Replay(adapter, limit, tables)
    batch = batch_size(rate, max_batch, linger)
    plan = Plan.build(replay.tables, replay.which, batch, writers)
    delays = stream_delays(faults_of(adapter))
    writer_delay = delays["writer_delay"]
    dest = Destination("engine", writer_delay=writer_delay, ack_delay=delays["ack_delay"],
                       stall_s=delays["stall_s"], stall_nth=int(delays["stall_nth"]))
    errors: list[str] = []
    try:
        bulk = _bulk(adapter, store / "bulk", replay)
        ingest.ingest_open(store / "stream")
        target = ingest.ingest_stream_target()
        ceilings: dict[str, float] = {}
        servers = adapter.memory_pids() if isinstance(adapter, Server) else []
        with Writers(target, plan, servers) as pool, Sink() as sink:
            sink_kinds = ("null",) if target.in_process else ("null", "sink")
            for kind in sink_kinds:
                r = pool.run(Destination(kind, sink.port, writer_delay=writer_delay), None, seconds)
                errors += [f"{kind} sink: {e}" for e in r.errors]
                ceilings[kind] = r.rate(plan)
            out = _engine_run(adapter, pool, dest, plan, replay, rate, seconds, errors)
    finally:
        ingest.ingest_close()
        shutil.rmtree(store, ignore_errors=True)
    setting = ingest.durability_setting(None)
    durable = setting in ingest.ingest_durable
    ceiling_kind = "null" if target.in_process else "sink"
    out.update({
        "batch": batch, "tables": ",".join(tables), "path": target.path, "dataset_events": replay.total,
        "ceiling": ceilings.get(ceiling_kind, 0.0), "ceiling_sink": "null sink (writer threads, no transport)"
        if target.in_process else "loopback HTTP sink (same writer processes and client)",
        "ceiling_null": ceilings.get("null"), "ceiling_loopback": ceilings.get("sink"), **bulk,
        "durability": setting, "durable_hdr": out["latency_hdr"] if durable else "",
        "durable_rate": out["throughput"] if durable else None,
        "durable_note": (f"acknowledged under {setting}, which the engine declares durable (no acknowledged row "
                         "lost when its processes are killed; the durability suite checks it): durable = acknowledged"
                         if durable else f"acknowledged under {setting}, which the engine does not declare durable: "
                         "not measured"),
    })
    out["errors"] = errors
    return out


def _bulk(adapter: Engine, store: Path, replay: Replay) -> dict[str, Any]:
    """The same rows through the engine's bulk path (:meth:`Ingest.ingest_bulk`) into a store of
    their own: rows per second to the acknowledgement, and to visibility."""
    ingest = capability(adapter, Ingest)
    ingest.ingest_open(store)
    try:
        rows = sum(tb.num_rows for tb in replay.tables.values())
        t0 = perf()
        for table, tb in replay.tables.items():
            ingest.ingest_bulk(table, tb)
        acked = perf()
        wait_visible(adapter)
        visible = perf()
        counted = sum(ingest.ingest_count(t) for t in replay.tables)
    finally:
        ingest.ingest_close()
    if counted != rows:
        raise RuntimeError(f"bulk path: {rows} rows acknowledged, {counted} counted")
    return {"bulk_rows": rows, "bulk_seconds": (acked - t0) / 1e9, "bulk_rate": rows / max(1e-9, (acked - t0) / 1e9),
            "bulk_visible_seconds": (visible - t0) / 1e9}


def _engine_run(adapter: Engine, pool: Writers, dest: Destination, plan: Plan, replay: Replay, rate: int | None,
                seconds: float, errors: list[str]) -> dict[str, Any]:
    ingest = capability(adapter, Ingest)
    polls: list[tuple[int, int, int]] = []
    snap_during = latency.new()
    done = threading.Event()
    acked_rows = [-1]  # set once the writers are done: the rows the poller must see

    def poll_loop() -> None:
        # Back-to-back count queries, 1 ms apart, until every acknowledged row is visible.
        try:
            while True:
                finished = done.is_set()  # read before the poll: it then started after every ack
                t0 = perf()
                seen = sum(ingest.ingest_count(t) for t in replay.tables)
                polls.append((t0, perf(), seen))
                if finished and seen >= acked_rows[0]:
                    return
                if finished and perf() - done_at[0] > 60_000_000_000:
                    errors.append(f"poller: {acked_rows[0] - seen} acknowledged rows never became visible")
                    return
                time.sleep(0.001)
        except Exception as exc:
            errors.append(f"poller: {type(exc).__name__}: {exc}")

    def snapshot_loop() -> None:
        try:
            while not done.is_set():
                t0 = perf()
                ingest.ingest_latest()
                latency.record(snap_during, perf() - t0)
                time.sleep(0.1)
        except Exception as exc:
            errors.append(f"snapshot: {type(exc).__name__}: {exc}")

    done_at = [0]
    poller = threading.Thread(target=poll_loop, name="poller")
    snapper = threading.Thread(target=snapshot_loop, name="snapshot")
    poller.start()
    snapper.start()
    try:
        run = pool.run(dest, rate, seconds)
        acked_rows[0] = run.rows(plan)
    finally:
        done_at[0] = perf()
        done.set()
        snapper.join()
        poller.join()
    errors += run.errors
    wait_visible(adapter)
    snap_after = latency.new()
    for _ in range(20):
        t0 = perf()
        ingest.ingest_latest()
        latency.record(snap_after, perf() - t0)
    counted = sum(ingest.ingest_count(t) for t in replay.tables)
    read = {t: sum(ingest.ingest_read(t, sym).num_rows for sym in replay.syms[t]) for t in replay.tables}
    return _figures(plan, run, rate, polls, snap_during, snap_after, counted, read)


def _hist(values_ns: np.ndarray) -> Any:
    """An HDR histogram of ``values_ns``, quantised to whole microseconds first (far finer
    than the histogram's 3 significant digits above 1 ms) so that each distinct value is
    recorded once with its count."""
    h = latency.new()
    if len(values_ns):
        vals, counts = np.unique(np.maximum(values_ns, 1) // 1000 * 1000 + 500, return_counts=True)
        for v, c in zip(vals.tolist(), counts.tolist(), strict=True):
            latency.record(h, v, c)
    return h


def _figures(plan: Plan, run: Run, rate: int | None, polls: list[tuple[int, int, int]], snap_during: Any,
             snap_after: Any, counted: int, read: dict[str, int]) -> dict[str, Any]:
    sent = run.sent
    written = run.rows(plan)
    by_table = {t: 0 for t in plan.tables}
    for k in np.flatnonzero(sent):
        by_table[plan.table[k]] += int(plan.rows[k])
    service = latency.new()
    for k in np.flatnonzero(sent):
        latency.record(service, int(run.ack[k] - run.submit[k]), int(plan.rows[k]))
    acks = sorted((int(run.ack[k]), int(plan.rows[k])) for k in np.flatnonzero(sent))
    visibility, visible_end = _visibility(acks, polls)
    elapsed = max(1, max((a for a, _ in acks), default=run.start) - run.start)
    return {
        "planned": plan.total_rows, "written": written, "read": sum(read.values()), "counted": counted,
        "written_by_table": by_table, "read_by_table": read,
        "seconds": elapsed / 1e9, "throughput": written / (elapsed / 1e9),
        "sent_rate": run.rate(plan, run.submit) if written else 0.0,
        "visible_rate": written / max(1e-9, (visible_end - run.start) / 1e9) if visible_end else None,
        "latency_hdr": latency.encode(_hist(row_latencies(plan, run, rate, run.ack))),
        # As fast as possible every row is due at its own submission: no sent latency to tell.
        "sent_hdr": latency.encode(_hist(row_latencies(plan, run, rate, run.submit))) if rate else "",
        "service_hdr": latency.encode(service), "visibility_hdr": latency.encode(visibility),
        "snapshot_during_hdr": latency.encode(snap_during), "snapshot_after_hdr": latency.encode(snap_after),
        "polls": len(polls), "writer_mode": run.mode, "pinning": run.pinning, "encode_seconds": run.encode_s,
        "encoded_bytes": run.encoded_bytes, "writer_rss_bytes": run.writer_rss, "start_ns": run.start,
    }


def _visibility(acks: list[tuple[int, int]], polls: list[tuple[int, int, int]]) -> tuple[Any, int]:
    """Acknowledged → visible, per row: for the ``j``-th acknowledgement in time order, with
    ``C_j`` rows acknowledged by then, the end of the first count query that started after it
    and saw at least ``C_j`` rows. With several writers a count cannot tell whose rows it saw,
    so this is the time until *as many* rows were visible, not those very rows. Also the end of
    the poll that saw the last row (0 if none did)."""
    h = latency.new()
    k = 0
    cumulative = 0
    last = 0
    for ack, nrows in acks:
        cumulative += nrows
        while k < len(polls) and (polls[k][0] < ack or polls[k][2] < cumulative):
            k += 1
        if k == len(polls):
            return h, 0
        latency.record(h, polls[k][1] - ack, nrows)
        last = polls[k][1]
    return h, last
