"""Where InfluxDB's binaries are installed, and the bytes of its files on disk (shared by the
adapter and the market module)."""

from __future__ import annotations

import os
from pathlib import Path

from tickbench.engines.server import tools_dir

VERSION = "1.13.2"  # the newest 1.x release on the Go module proxy (engines/influxdb/README.md)


def bin_dir() -> Path:
    """Where ``influxd`` and ``influx`` of :data:`VERSION` are installed: another version's
    binaries are not this one (a version change installs anew)."""
    return tools_dir() / "influxdb" / VERSION


def du(path: Path, apparent: bool = False) -> int:
    """Bytes under ``path``: allocated on disk (as ``du``), or the files' apparent sizes."""
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            total += st.st_size if apparent else st.st_blocks * 512
    return total
