"""The stream suite's work inside the engine's worker: replay the bulk-load day at a target
rate with writer threads, poll for visibility, time the snapshot query; every latency goes into
an HDR histogram that the parent merges and records.

Writer, poller and query clients are threads of the worker: embedded engines allow one
writing process per store (DuckDB locks its file, chDB one path per process), and the engines'
Python clients release the GIL while the engine works, so threads do run concurrently there.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tickbench import latency
from tickbench.data.calendar import BULK_DAY
from tickbench.engines.base import Engine
from tickbench.run.faults import open_client
from tickbench.run.visibility import wait_visible

perf = time.perf_counter_ns


def stream_op(adapter: Engine, msg: dict[str, Any], fault: dict[str, str]) -> dict[str, Any]:
    """The worker operation ``stream``: one cell (:func:`stream_cell`)."""
    return stream_cell(adapter, Path(msg["store"]), msg["rate"], msg["writers"], msg["seconds"],
                       msg["max_batch"], fault)


MAX_REPLAY = 1_000_000  # events held in memory for one cell (a book row is ~1.5 kB as Python)


class Replay:
    """The bulk-load day's events (book snapshots and trades) merged in time order, as rows."""

    def __init__(self, adapter: Engine, limit: int) -> None:
        tables = {t: pa.concat_tables(pq.read_table(f) for f in adapter.dataset.files(t, [BULK_DAY.isoformat()]))
                  for t in ("trades", "book")}
        tables = {t: tb.sort_by([("ts", "ascending")]) for t, tb in tables.items()}
        ts = np.concatenate([tables[t].column("ts").cast(pa.int64()).to_numpy() for t in ("trades", "book")])
        which = np.concatenate([np.zeros(tables["trades"].num_rows, np.int8),
                                np.ones(tables["book"].num_rows, np.int8)])
        order = np.argsort(ts, kind="stable")[:limit]
        self.total = len(ts)
        self.table_of = which[order]  # 0 trades, 1 book, per event
        counts = {"trades": int((self.table_of == 0).sum()), "book": int((self.table_of == 1).sum())}
        # Each table is sorted by ts and the merge is stable, so the first N events take a
        # prefix of each table; the k-th event of a table is its k-th row.
        self.rank = np.empty(len(order), np.int64)
        for code in (0, 1):
            mask = self.table_of == code
            self.rank[mask] = np.arange(int(mask.sum()))
        self.rows = {t: _as_rows(tables[t].slice(0, counts[t])) for t in ("trades", "book")}
        self.syms = {t: sorted(set(tables[t].slice(0, counts[t]).column("sym").to_pylist())) for t in self.rows}

    def __len__(self) -> int:
        return len(self.table_of)

    def runs(self, events: Sequence[int]) -> list[tuple[str, list[tuple[Any, ...]], list[int]]]:
        """``events`` as at most one write per table: (table, rows, event indices), each table's
        rows in time order. A writer that is behind sends its backlog as two batches, not as
        the many short runs of the interleaved feed (each would be a commit of its own)."""
        out: dict[str, tuple[str, list[tuple[Any, ...]], list[int]]] = {}
        for i in events:
            table = "book" if self.table_of[i] else "trades"
            run = out.setdefault(table, (table, [], []))
            run[1].append(self.rows[table][self.rank[i]])
            run[2].append(i)
        return sorted(out.values(), key=lambda r: r[2][0])


def _as_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    cols = [table.column("ts").cast(pa.int64()).to_pylist()] + [table.column(i).to_pylist()
                                                              for i in range(1, table.num_columns)]
    return list(zip(*cols, strict=True))


def stream_cell(adapter: Engine, store: Path, rate: int | None, writers: int, seconds: float,
                max_batch: int, fault: dict[str, str]) -> dict[str, Any]:
    """Replay the day at ``rate`` events/s (``None``: as fast as possible) with ``writers``
    writer threads for at most ``seconds``; measure every event from its intended send time.

    Event ``i`` is due at ``start + i / rate`` and belongs to writer ``i mod writers``. Each
    loop a writer sends every one of its events already due (up to ``max_batch`` per write):
    one event per write while it keeps up, a batch when it is behind. An event's latency is
    its acknowledgement time minus its intended send time, so a stall delays, and shows in,
    every event due during it (no coordinated omission). As fast as possible, every event is
    due at once: batches of ``max_batch`` and latency from the write's submission.
    """
    shutil.rmtree(store, ignore_errors=True)
    limit = MAX_REPLAY if rate is None else min(MAX_REPLAY, max(1, int(rate * seconds)))
    replay = Replay(adapter, limit)
    n = len(replay)
    adapter.ingest_open(store)
    try:
        clients = [open_client(adapter, fault) for _ in range(writers)]
        lat = [latency.new() for _ in range(writers)]
        service = [latency.new() for _ in range(writers)]
        acks: list[list[tuple[int, int]]] = [[] for _ in range(writers)]
        sent = [0] * writers
        done = threading.Event()
        polls: list[tuple[int, int, int]] = []
        snap_during = latency.new()
        errors: list[str] = []
        start = perf() + 50_000_000  # 50 ms for every thread to be waiting on the clock
        # Fixed rates may overrun while behind; the hard stop bounds a cell that cannot keep up.
        stop_at = start + int(seconds * 1e9) if rate is None else start + int((3 * seconds + 10) * 1e9)
        step = 0.0 if rate is None else 1e9 / rate

        def write_loop(w: int) -> None:
            mine = range(w, n, writers)
            pos = 0
            h, s, log, client = lat[w], service[w], acks[w], clients[w]
            try:
                while pos < len(mine):
                    now = perf()
                    if now >= stop_at:
                        return
                    if rate is None:
                        end = min(len(mine), pos + max_batch)
                    else:
                        last_due = int((now - start) / step) if now >= start else -1
                        due = 0 if last_due < w else (last_due - w) // writers + 1
                        if due <= pos:
                            time.sleep(max(0.0, (start + mine[pos] * step - now) / 1e9))
                            continue
                        end = min(due, len(mine), pos + max_batch)
                    submitted = perf()
                    for table, rows, idx in replay.runs(mine[pos:end]):
                        t0 = perf()
                        client.write(table, rows)
                        ack = perf()
                        latency.record(s, ack - t0, len(rows))
                        log.append((ack, len(rows)))
                        if rate is None:
                            latency.record(h, ack - submitted, len(rows))
                        else:
                            for i in idx:
                                latency.record(h, ack - (start + int(i * step)))
                    sent[w] += end - pos
                    pos = end
            except Exception as exc:  # recorded for the cell; the other threads go on
                errors.append(f"writer {w}: {type(exc).__name__}: {exc}")

        def poll_loop() -> None:
            # Back-to-back count queries, 1 ms apart, until every event sent is visible.
            try:
                while True:
                    finished = done.is_set()  # read before the poll: it then started after every ack
                    t0 = perf()
                    seen = adapter.ingest_count("trades") + adapter.ingest_count("book")
                    polls.append((t0, perf(), seen))
                    if finished and seen >= sum(sent):
                        return
                    if done.is_set() and perf() > stop_at + 30_000_000_000:
                        errors.append(f"poller: {sum(sent) - seen} acknowledged rows never became visible")
                        return
                    time.sleep(0.001)
            except Exception as exc:
                errors.append(f"poller: {type(exc).__name__}: {exc}")

        def snapshot_loop() -> None:
            try:
                while not done.is_set():
                    t0 = perf()
                    adapter.ingest_latest()
                    latency.record(snap_during, perf() - t0)
                    time.sleep(0.1)
            except Exception as exc:
                errors.append(f"snapshot: {type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=write_loop, args=(w,), name=f"writer-{w}") for w in range(writers)]
        poller = threading.Thread(target=poll_loop, name="poller")
        snapper = threading.Thread(target=snapshot_loop, name="snapshot")
        for t in (*threads, poller, snapper):
            t.start()
        for t in threads:
            t.join()
        end_ns = max((log[-1][0] for log in acks if log), default=start)
        done.set()
        snapper.join()
        poller.join()
        for c in clients:
            c.close()
            wait_visible(c)
            wait_visible(c)
        snap_after = latency.new()
        for _ in range(20):
            t0 = perf()
            adapter.ingest_latest()
            latency.record(snap_after, perf() - t0)
        visibility = _visibility(acks, polls)
        counted = adapter.ingest_count("trades") + adapter.ingest_count("book")
        read = {t: sum(adapter.ingest_read(t, sym).num_rows for sym in replay.syms[t]) for t in ("trades", "book")}
    finally:
        adapter.ingest_close()
        shutil.rmtree(store, ignore_errors=True)
    total_sent = sum(sent)
    sent_by_table = {"trades": 0, "book": 0}
    for w in range(writers):
        for i in range(w, n, writers)[: sent[w]]:
            sent_by_table["book" if replay.table_of[i] else "trades"] += 1
    elapsed = max(1, end_ns - start)
    return {
        "planned": n, "written": total_sent, "read": sum(read.values()), "counted": counted,
        "written_by_table": sent_by_table, "read_by_table": read, "dataset_events": replay.total,
        "seconds": elapsed / 1e9, "throughput": total_sent / (elapsed / 1e9), "errors": errors,
        "latency_hdr": latency.encode(_merged(lat)), "service_hdr": latency.encode(_merged(service)),
        "visibility_hdr": latency.encode(visibility), "snapshot_during_hdr": latency.encode(snap_during),
        "snapshot_after_hdr": latency.encode(snap_after), "polls": len(polls),
    }


def _merged(hs: list[Any]) -> Any:
    out = latency.new()
    for h in hs:
        out.add(h)
    return out


def _visibility(acks: list[list[tuple[int, int]]], polls: list[tuple[int, int, int]]) -> Any:
    """Acknowledged → visible, per event: for the ``j``-th acknowledgement in time order, with
    ``C_j`` rows acknowledged by then, the end of the first count query that started after it
    and saw at least ``C_j`` rows. With several writers a count cannot tell whose rows it saw,
    so this is the time until *as many* rows were visible, not those very rows."""
    h = latency.new()
    log = sorted(a for per in acks for a in per)
    k = 0
    cumulative = 0
    for ack, nrows in log:
        cumulative += nrows
        while k < len(polls) and (polls[k][0] < ack or polls[k][2] < cumulative):
            k += 1
        if k == len(polls):
            break
        latency.record(h, polls[k][1] - ack, nrows)
    return h
