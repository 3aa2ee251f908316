"""The durability suite's cells, in the parent: start the writers in the engine's worker, kill
the engine at the seeded point, have it recover, and record what was lost (the protocol is in
:mod:`tickbench.run.durability` and METHODOLOGY.md)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tickbench.engines.registry import adapter_class
from tickbench.results import Record
from tickbench.run import latency
from tickbench.run.durability import ACK, clock, kill_delay_s, read_acks
from tickbench.run.worker import CellTimeout, EngineError, EngineProcess, WorkerDied
from tickbench.suites.beyond import durability_id

if TYPE_CHECKING:
    from tickbench.run.beyond import BeyondRun

WRITER_GRACE_S = 120.0  # how long writers may take to notice a dead server (client retries)
Failure = (CellTimeout, WorkerDied, EngineError)




def slug(setting: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", setting)


def run_suite(run: BeyondRun, todo: list[str]) -> None:
    """Record every durability cell of ``todo`` for the run's engine, setting by setting."""
    cls = adapter_class(run.info.name)
    proc = run._ingest_process("durability", "durability", todo)
    if proc is None:
        return
    try:
        for setting in cls.ingest_durability:
            bench = durability_id(setting)
            if bench in todo:
                run.on_record(_cell(run, proc, bench, setting))
    finally:
        proc.close()


def _wait_first_ack(proc: EngineProcess, ack_log: Path, timeout: float) -> int:
    """When the first acknowledgement is in the log; an early reply from the writer (it
    failed before any) is raised as the engine's error."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ack_log.exists() and ack_log.stat().st_size >= ACK.size:
            return clock()
        assert proc.conn is not None
        if proc.conn.poll(0):
            reply = proc.receive(0)
            raise EngineError("the writers stopped before any acknowledgement: " + "; ".join(reply["errors"]))
        time.sleep(0.005)
    proc.kill()
    raise CellTimeout(f"no write acknowledged within {timeout:g} s")


def _cell(run: BeyondRun, proc: EngineProcess, bench: str, setting: str) -> Record:
    cls = adapter_class(run.info.name)
    o = run.opts
    server = run.info.kind == "server"
    work = run.workdir / "durability" / slug(setting)
    work.mkdir(parents=True, exist_ok=True)
    store, ack_log = work / "store", work / "acks.bin"
    delay = kill_delay_s(run.seed, run.info.name, setting, o.durability_seconds)
    figures: dict[str, Any] = {
        "setting": setting, "meaning": cls.ingest_durability[setting], "durable": setting in cls.ingest_durable,
        "writers": o.durability_writers, "seconds_cap": o.durability_seconds, "kill_after_s": round(delay, 3),
        "killed": "server processes (SIGKILL)" if server else "writer process (SIGKILL)",
    }
    timeout = run.protocol.load_timeout_s
    try:
        proc.call(timeout, op="durability_open", store=str(store), setting=setting)
        proc.send(op="durability_write", seconds=o.durability_seconds, writers=o.durability_writers,
                  ack_log=str(ack_log))
        first = _wait_first_ack(proc, ack_log, timeout)
        time.sleep(max(0.0, first + delay * 1e9 - clock()) / 1e9)
        # Did the writers finish before the kill came? (then it did not hit mid-stream)
        assert proc.conn is not None
        figures["finished_before_kill"] = bool(proc.conn.poll(0))
        if server:
            figures["processes_killed"] = proc.kill_servers()
            wrote = proc.receive(o.durability_seconds + WRITER_GRACE_S)
        else:
            proc.kill()
            wrote = {"errors": []}
        figures["writer_saw"] = (wrote["errors"] or ["no error"])[0]
        r = proc.call(timeout, op="durability_recover", store=str(store), setting=setting, ack_log=str(ack_log))
    except Failure as exc:
        proc.kill()
        run._restart(proc)
        status = "timeout" if isinstance(exc, CellTimeout) else "error"
        return run._record("durability", bench, status, str(exc)[:2000], figures=figures)
    acks = read_acks(ack_log)
    h = latency.new()
    for t0, t1 in acks.values():
        latency.record(h, t1 - t0)
    span = max(t1 for _, t1 in acks.values()) - min(t0 for t0, _ in acks.values()) if acks else 0
    figures.update({k: r[k] for k in ("acknowledged", "read", "counted", "lost", "lost_first", "changed",
                                      "changed_first", "duplicated", "unacknowledged_present")})
    figures.update(recovery_s=r["recovery_ns"] / 1e9, throughput=len(acks) / (span / 1e9) if span else 0.0,
                   latency=latency.summary(h))
    problems = []
    if r["changed"]:
        problems.append(f"{r['changed']} acknowledged rows read back changed (first: {r['changed_first']})")
    if r["duplicated"]:
        problems.append(f"{r['duplicated']} rows read back more than once")
    if r["lost"] and figures["durable"]:
        problems.append(f"{r['lost']} acknowledged rows lost under {setting}, a setting that promises none "
                        f"(first: {r['lost_first']})")
    if problems:
        return run._record("durability", bench, "wrong", "; ".join(problems), verified=False, figures=figures,
                           samples_ns=[r["recovery_ns"]], rows=r["acknowledged"])
    notes = f"{r['lost']} acknowledged rows lost (not a durable setting)" if r["lost"] else ""
    return run._record("durability", bench, "ok", verified=True, figures=figures, samples_ns=[r["recovery_ns"]],
                       rows=r["acknowledged"], notes=notes)
