"""What machine a run ran on (recorded with every result)."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import psutil

from tickbench import __version__
from tickbench.results import Environment


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return f"{line.split('=', 1)[1].strip(chr(34))} ({platform.release()})"
    except OSError:
        pass
    return platform.platform()


def capture() -> Environment:
    return Environment(
        cpu=_cpu_model(),
        cores=os.cpu_count() or 1,
        memory_bytes=psutil.virtual_memory().total,
        os=_os_name(),
        python=platform.python_version(),
        tickbench_version=__version__,
    )


def drop_page_cache() -> bool:
    """Drop the OS page cache if this process may (root on Linux); True if it did."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False
