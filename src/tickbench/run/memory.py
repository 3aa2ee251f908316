"""Peak memory of a query: the peak resident set of the engine's processes during the query
minus their resident set before it.

Linux keeps a per-process high-water mark (``VmHWM``) that writing ``5`` to
``/proc/PID/clear_refs`` resets; tickbench resets it before each query and reads it after.
Where the reset is not permitted the figure is not taken (``None``): an unreset high-water
mark would report an earlier query's peak.
"""

from __future__ import annotations

from pathlib import Path

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
