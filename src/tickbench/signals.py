"""What the commands that stop on a signal (run, generate, import) share.

Each installs a handler that records the signal and raises its own exception where the main
thread is. Python cannot raise it when the main thread is running a weakref callback or a
``__del__`` at that moment: it prints the exception as "Exception ignored in …" and goes on. The
command then stops at its next check of the recorded signal, and :func:`unprinted_when_lost`
keeps that traceback off the user's terminal.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def unprinted_when_lost(stop: type[BaseException]) -> Iterator[None]:
    """While the block runs, an exception of type ``stop`` that Python could not raise is not
    printed (the caller has recorded its signal and acts on it); every other one is, as before."""
    previous = sys.unraisablehook

    def hook(unraisable: sys.UnraisableHookArgs) -> None:
        if not isinstance(unraisable.exc_value, stop):
            previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous
