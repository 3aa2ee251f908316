"""M-SNAP during ingest's fixed span, and the lifetime of its writer and sink processes. (Each market engine's
during-ingest record and its controls are checked in tests/test_market_suite.py, through
tests/market_ingest_checks.py's ``check_ingest_record``; the toy engine's in
tests/test_market_users.py.)"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import psutil

from tickbench.data.dataset import Dataset
from tickbench.datasets.market.params import market_params
from tickbench.suites.market.ingest_ops import MarketReplay

SEED = 7


def test_the_span_is_fixed_in_minutes_of_d(market_tiny: Dataset) -> None:
    """MarketReplay's span: every event of D before the open plus the span and none after,
    whatever rate it is replayed at; each table's rows a prefix of its own order."""
    base = market_params(market_tiny, SEED)
    whole = MarketReplay(market_tiny, base)
    assert len(whole) == whole.total
    for minutes in (1.0, 10.0):
        span = int(minutes * 60e9)
        replay = MarketReplay(market_tiny, base, span_ns=span)
        assert len(replay) == int((whole.event_ts < whole.open_ns + span).sum()) > 0
        assert int(replay.event_ts.max()) < replay.open_ns + span <= replay.end_ns + 1
        assert replay.span_ns == span and len(replay) < replay.total
        for t, rows in replay.tables.items():
            assert rows.equals(whole.tables[t].slice(0, rows.num_rows))


# -- the writers' and the sink's lifetime ----------------------------------------------------
# A during-ingest cell's writer processes and its loopback sink are children of the engine's
# worker; a run killed outright (the worker SIGKILLed with it) must leave none of them behind.

KILLED_MID_RUN = """
import numpy as np, pyarrow as pa
from tickbench.suites.harness import Destination, Plan, Sink, SinkTarget, Writers
rows = pa.table({"x": pa.array(range(20_000), pa.int64())})
plan = Plan.build({"t": rows}, np.zeros(rows.num_rows, np.int8), 10, 2)
with Sink() as sink, Writers(SinkTarget(sink.port), plan) as pool:
    print(*(h.proc.pid for h in pool.handles), sink.process.proc.pid, flush=True)
    pool.run(Destination("engine"), 100, 600.0)  # 200 s at 100 events/s: killed long before
"""


def _ours(pid: int) -> psutil.Process | None:
    """The live process ``pid`` if it is still one the test's run started (a harness child)."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE or "tickbench.suites.harness" not in " ".join(proc.cmdline()):
            return None
        return proc
    except psutil.NoSuchProcess:
        return None


def _left_behind(pids: list[int], within_s: float = 30.0) -> list[int]:
    deadline = time.monotonic() + within_s
    while (alive := [p for p in pids if _ours(p) is not None]) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in alive:  # end what the test's run left, then fail
        with contextlib.suppress(psutil.Error, AttributeError):
            _ours(pid).kill()  # type: ignore[union-attr]
    return alive


def _killed_run(code: str) -> list[int]:
    """Start ``code`` in a process of its own (the run), read the harness children's pids it
    prints, SIGKILL it if it is still running, and return the pids."""
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))) as run:
        try:
            assert run.stdout is not None
            pids = [int(x) for x in run.stdout.readline().split()]
            assert pids, "the run printed no child pid"
        finally:
            with contextlib.suppress(ProcessLookupError):
                run.send_signal(signal.SIGKILL)
            run.wait(60)
    return pids


def test_writers_and_sink_of_a_run_killed_mid_replay_do_not_outlive_it() -> None:
    pids = _killed_run(KILLED_MID_RUN)
    assert len(pids) == 3  # two writers and the sink
    assert _left_behind(pids) == []
