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


def _status_fields(pid: int, keys: tuple[str, ...]) -> dict[str, int]:
    """The ``keys`` of ``/proc/PID/status`` (kB values) as bytes; missing keys count 0."""
    out = dict.fromkeys(keys, 0)
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in out:
            out[key] = int(rest.split()[0]) * 1024
    return out


def _shmem_total() -> int:
    """The machine's shared memory in use (``Shmem`` of ``/proc/meminfo``), in bytes."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Shmem:"):
            return int(line.split()[1]) * 1024
    return 0


def _shared_extent(pids: set[int]) -> int:
    """The bytes of the distinct shared mappings of ``pids`` (``/proc/PID/maps``: each object,
    by device and inode, once, at the largest extent any of them maps): the most shared memory
    these processes can hold between them, whatever else the machine holds."""
    extent: dict[tuple[str, str], int] = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
                parts = line.split(maxsplit=5)
                if len(parts) < 5 or parts[1][3:4] != "s" or parts[4] == "0":
                    continue
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                key = (parts[3], parts[4])
                extent[key] = max(extent.get(key, 0), int(parts[2], 16) + hi - lo)
    return sum(extent.values())


def tree_rss(pids: list[int]) -> int:
    """Resident bytes of ``pids`` and all their children now (processes that are gone count 0),
    each page counted once: every process's anonymous pages (``RssAnon``), their shared memory
    (``RssShmem``) at most once (the sum, capped by the size of the distinct shared mappings they
    map and by the machine's shared memory in use: a server's processes each map its shared
    buffers, and a summed RSS counted those pages once per process, 16.4 GiB for PostgreSQL's
    backends at 100 users), and file-backed pages (``RssFile``: program text, mapped files) of
    the process with the most (the processes of one server share theirs). A cheap upper bound of
    the pages only these processes hold, read from ``/proc/PID/status`` (and ``maps`` when more
    than one of them holds shared memory), so other work on the machine does not change it; the
    exact figure (PSS from ``smaps_rollup``) takes up to 0.1 s per process."""
    seen: set[int] = set()
    sharing: set[int] = set()
    anon = shmem = files = 0
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
            with contextlib.suppress(OSError, ValueError, IndexError):
                f = _status_fields(p.pid, ("RssAnon", "RssShmem", "RssFile"))
                anon += f["RssAnon"]
                shmem += f["RssShmem"]
                files = max(files, f["RssFile"])
                if f["RssShmem"]:
                    sharing.add(p.pid)
    if len(sharing) > 1:  # the same pages may be counted in several: at most the mappings' size
        shmem = min(shmem, _shmem_total(), _shared_extent(sharing))
    return anon + shmem + files


def own_peak_rss() -> int:
    """This process's peak resident bytes so far (the kernel's high-water mark)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
