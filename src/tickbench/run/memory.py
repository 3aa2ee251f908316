"""Peak memory of a query: the peak resident set of the engine's processes during the query
minus their resident set before it.

Linux keeps a per-process high-water mark (``VmHWM``) that writing ``5`` to
``/proc/PID/clear_refs`` resets; tickbench resets it before each query and reads it after.
Where the reset is not permitted the figure is not taken (``None``): an unreset high-water
mark would report an earlier query's peak.
"""

from __future__ import annotations

import contextlib
import os
import resource
from pathlib import Path

import psutil

KIND = "process peak RSS delta (VmHWM after - VmRSS before)"


def _status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


class PeakMemory:
    """Measures one query's peak memory over ``pids``."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.before: dict[int, int] = {}
        self.ok = True

    def start(self) -> None:
        self.before = {}
        for pid in self.pids:
            try:
                Path(f"/proc/{pid}/clear_refs").write_text("5")
                self.before[pid] = _status_kb(pid, "VmRSS")
            except (OSError, KeyError):
                self.ok = False

    def delta_bytes(self) -> int | None:
        if not self.ok:
            return None
        total = 0
        for pid, before in self.before.items():
            try:
                total += max(0, _status_kb(pid, "VmHWM") - before)
            except (OSError, KeyError):
                return None
        return total * 1024


# -- the engine's whole footprint, sampled while the parent waits for it ----------------------

BUDGET_ENV = "TICKBENCH_MEMORY_BUDGET_GB"
GIB = 1024**3


def budget_bytes() -> int:
    """The most resident memory one engine (its worker and every server process, with their
    children) may hold: ``$TICKBENCH_MEMORY_BUDGET_GB``, else 16 GiB or 75 % of this machine's
    memory, whichever is smaller; a bad value is refused."""
    raw = os.environ.get(BUDGET_ENV, "").strip()
    if raw:
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
        if not value > 0:
            raise ValueError(f"{BUDGET_ENV}={raw!r}: expected a positive number of GiB")
        return int(value * GIB)
    return int(min(16 * GIB, 0.75 * psutil.virtual_memory().total))


def tree_rss(pids: list[int]) -> int:
    """Resident bytes of ``pids`` and all their children now (processes that are gone count 0)."""
    seen: set[int] = set()
    total = 0
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            procs = [proc, *proc.children(recursive=True)]
        except psutil.Error:
            continue
        for p in procs:
            if p.pid in seen:
                continue
            seen.add(p.pid)
            with contextlib.suppress(psutil.Error):
                total += p.memory_info().rss
    return total


def own_peak_rss() -> int:
    """This process's peak resident bytes so far (the kernel's high-water mark)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
