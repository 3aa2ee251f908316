"""Waiting, with the runner's clock, until an engine's acknowledged writes are visible.

Adapters never poll or sleep: an engine that applies writes asynchronously (QuestDB's WAL)
answers :meth:`~tickbench.engines.base.Engine.pending_visibility` at once, and the runner
waits here.
"""

from __future__ import annotations

import time
from typing import Protocol

#: The longest wait for acknowledged writes to become visible before the cell fails.
VISIBILITY_TIMEOUT_S = 600.0
POLL_S = 0.005


class Visible(Protocol):
    def pending_visibility(self) -> bool: ...


class NotVisible(RuntimeError):
    """Acknowledged writes did not become visible in time."""


def wait_visible(target: Visible, timeout_s: float = VISIBILITY_TIMEOUT_S) -> None:
    """Return once ``target`` (an engine or an ingest client) has no acknowledged write that
    a new query cannot see; raise :class:`NotVisible` after ``timeout_s`` seconds (an error
    the engine reports, e.g. a suspended table, propagates as it is)."""
    deadline = time.monotonic() + timeout_s
    while target.pending_visibility():
        if time.monotonic() > deadline:
            raise NotVisible(f"acknowledged writes were still not visible to queries after {timeout_s:g} s")
        time.sleep(POLL_S)
