"""The engine's memory as the runner samples it (:func:`tickbench.run.memory.tree_rss`): every
process of the tree counted, its private pages each, shared memory once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil

from tickbench.run.memory import tree_rss

MIB = 1024**2
# A parent and three children that each touch the same 256 MiB of shared memory, and each hold
# 64 MiB of their own.
TREE = """
import os, sys, time
from multiprocessing import shared_memory
import subprocess
SHARED, OWN = 256 << 20, 64 << 20
if sys.argv[1] == "parent":
    shm = shared_memory.SharedMemory(create=True, size=SHARED)
    shm.buf[:] = b"x" * SHARED
    kids = [subprocess.Popen([sys.executable, "-c", sys.argv[2], "child", shm.name, sys.argv[2]])
            for _ in range(3)]
else:
    shm = shared_memory.SharedMemory(name=sys.argv[2])
    total = 0
    for i in range(0, SHARED, 4096):
        total += shm.buf[i]
own = bytearray(b"y" * OWN)
os.write(1, f"ready {shm.name}\\n".encode())  # one write: the four processes' lines never interleave
time.sleep(60)
"""


def test_shared_memory_is_counted_once_and_private_memory_each_time() -> None:
    parent = subprocess.Popen([sys.executable, "-c", TREE, "parent", TREE], stdout=subprocess.PIPE, text=True)
    name = ""
    try:
        assert parent.stdout is not None
        # the parent and each child say "ready" once they hold all their memory (a condition,
        # not a time: on a loaded machine the children take as long as they take)
        ready = [parent.stdout.readline().split() for _ in range(4)]
        assert all(r and r[0] == "ready" for r in ready), ready
        name = ready[0][1]
        assert len(psutil.Process(parent.pid).children()) >= 3  # and shared_memory's resource tracker
        summed = sum(p.memory_info().rss for p in [psutil.Process(parent.pid), *psutil.Process(parent.pid).children()])
        counted = tree_rss([parent.pid])
        assert summed > 4 * 300 * MIB  # each of the four maps the shared 256 MiB and holds 64 MiB
        # the shared 256 MiB once, four × 64 MiB, and one interpreter's files and heap: only what
        # these four processes hold (the machine's other shared memory does not move it)
        assert 4 * 64 * MIB + 256 * MIB <= counted < 4 * 64 * MIB + 256 * MIB + 4 * 60 * MIB
        assert tree_rss([2**22 + 12345]) == 0  # a process that is gone counts nothing
    finally:
        for p in psutil.Process(parent.pid).children():
            p.kill()
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
        if name:  # killed, the processes leave the segment behind
            (Path("/dev/shm") / name.lstrip("/")).unlink(missing_ok=True)
