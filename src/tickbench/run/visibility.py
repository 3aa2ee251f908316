"""Waiting, with the runner's clock, until an engine's acknowledged writes are visible and
its background work on the store is done.

Adapters never poll or sleep: an engine that applies writes asynchronously (QuestDB's WAL)
answers :meth:`~tickbench.engines.base.Engine.pending_visibility` at once, one that compacts
its store after a load (InfluxDB) answers :meth:`~tickbench.engines.base.Engine.pending_settle`
at once, and the runner waits here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

#: The longest wait for acknowledged writes to become visible before the cell fails.
VISIBILITY_TIMEOUT_S = 600.0
#: The longest wait for an engine's background work (compaction) to finish before the cell fails.
SETTLE_TIMEOUT_S = 3600.0
POLL_S = 0.005
SETTLE_POLL_S = 0.2  # settling takes seconds at least; each look lists the store's files


class Visible(Protocol):
    def pending_visibility(self) -> bool: ...


class Settling(Protocol):
    def pending_settle(self) -> bool: ...


class NotVisible(RuntimeError):
    """Acknowledged writes did not become visible in time."""


class NotSettled(RuntimeError):
    """The engine's background work on its store did not finish in time."""


def _wait(pending: Callable[[], bool], timeout_s: float, poll_s: float, failure: RuntimeError) -> None:
    deadline = time.monotonic() + timeout_s
    while pending():
        if time.monotonic() > deadline:
            raise failure
        time.sleep(poll_s)


def wait_visible(target: Visible, timeout_s: float = VISIBILITY_TIMEOUT_S) -> None:
    """Return once ``target`` (an engine or an ingest client) has no acknowledged write that
    a new query cannot see; raise :class:`NotVisible` after ``timeout_s`` seconds (an error
    the engine reports, e.g. a suspended table, propagates as it is)."""
    _wait(target.pending_visibility, timeout_s, POLL_S, NotVisible(
        f"acknowledged writes were still not visible to queries after {timeout_s:g} s"))


def wait_settled(target: Settling, timeout_s: float = SETTLE_TIMEOUT_S) -> None:
    """Return once the engine ``target`` has no background work left on its store (see
    :meth:`~tickbench.engines.base.Engine.pending_settle`); raise :class:`NotSettled` after
    ``timeout_s`` seconds."""
    _wait(target.pending_settle, timeout_s, SETTLE_POLL_S, NotSettled(
        f"the engine was still working on its store (compaction) after {timeout_s:g} s"))
