"""A gate across client processes: users warm up, then start their timed queries together.

The runner opens a :class:`WarmGate` (a directory of its own in the cell's working directory,
holding a lock file it locks exclusively) before it sends the clients their work. Each client
process, once all of its users are warm, says so (:func:`wait_at_gate`: a file named after its
pid) and blocks on a shared lock of that file, using no CPU. When every process is warm (or one
has already replied, e.g. a user that failed its warm-up), the runner writes the common start
time (``time.perf_counter_ns``, the same clock in every process on Linux) and releases its lock:
every client wakes, reads that time and waits for it. Without the gate, users whose warm-up is
slow (a server's first query on a new connection) would start their timed queries while others
had finished theirs, and each user's figures would describe a different load.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import time
from pathlib import Path

GO_AFTER_S = 0.05  # the common start is this long after the gate opens: every client is awake by then
LOCK = "gate"
GO = "go"
WARM = "warm-"


class WarmGate:
    """The runner's side of the gate for ``processes`` client processes (a context manager;
    leaving it opens the gate if it is still shut, so no client stays blocked, and removes its
    directory)."""

    def __init__(self, root: Path, processes: int) -> None:
        root.mkdir(parents=True, exist_ok=True)  # the engine's working directory, under the run's own
        self.dir = Path(tempfile.mkdtemp(prefix="warm-gate-", dir=root))
        self.processes = processes
        self._fd = os.open(self.dir / LOCK, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        self.shut = True

    def __enter__(self) -> WarmGate:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.shut:
            self.open()
        os.close(self._fd)
        shutil.rmtree(self.dir, ignore_errors=True)

    def warm(self) -> int:
        """How many client processes have said they are warm."""
        with os.scandir(self.dir) as entries:
            return sum(1 for e in entries if e.name.startswith(WARM))

    def open(self) -> int:
        """Write the common start time and let every waiting client through; the start time."""
        go = time.perf_counter_ns() + int(GO_AFTER_S * 1e9)
        tmp = self.dir / f"{GO}.tmp"
        tmp.write_text(str(go))
        os.replace(tmp, self.dir / GO)  # whole, before any client can read it
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        self.shut = False
        return go


def wait_at_gate(gate: str) -> int:
    """A client process's side (its users all warm): say so, wait until the runner opens the
    gate, and return the common start time (``time.perf_counter_ns``)."""
    where = Path(gate)
    (where / f"{WARM}{os.getpid()}").touch()
    fd = os.open(where / LOCK, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # blocks while the runner holds its exclusive lock
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    return int((where / GO).read_text())
