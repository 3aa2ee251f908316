"""Exclusive locks on a directory tickbench writes (a run's ``--out``, a dataset being generated
or imported), naming the process that holds one.

The lock is a regular file tickbench creates, opened with ``O_NOFOLLOW``: a symbolic link (or a
directory, a FIFO …) planted where the lock goes is refused, never followed or written. It is
removed while still held, when the holder is done; a process that opened the old file just
before then finds it unlinked and takes a fresh one (so two never hold the lock at once)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Iterator
from pathlib import Path


class LockBusy(Exception):
    """The lock is held by another process: ``holder`` says which (``"pid N, what"``)."""

    def __init__(self, path: Path, holder: str) -> None:
        super().__init__(f"{path}: held by {holder}")
        self.path, self.holder = path, holder


class LockRefused(Exception):
    """What is at the lock's place is not a lock tickbench made (a link, a directory …)."""


def _open(path: Path) -> int:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            raise LockRefused(f"{path} is not a regular file (a symbolic link, a directory or a device): "
                              "tickbench's lock is a file it creates itself; remove it") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO opened without blocking, say
        os.close(fd)
        raise LockRefused(f"{path} is not a regular file: tickbench's lock is a file it creates itself; remove it")
    return fd


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return " ".join(text.split()) or "another process"


@contextlib.contextmanager
def exclusive(path: Path, holder: str, wait: bool = False) -> Iterator[None]:
    """Hold an exclusive lock at ``path`` (created, a regular file) for the block, with
    ``holder`` written in it for a second process's message. When another process holds it,
    :class:`LockBusy` (or, with ``wait``, wait for it). :class:`LockRefused` when ``path`` is a
    symbolic link or not a regular file; ``OSError`` when it cannot be created (a read-only or
    full disk: the caller names it)."""
    while True:
        fd = _open(path)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not wait:
                    raise LockBusy(path, _holder(fd)) from None
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:  # the file may have been removed by the holder just before we locked it
                same = os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
        except BaseException:
            os.close(fd)
            raise
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        try:  # who holds it, for a second process's message; the lock itself needs no byte on disk
            os.pwrite(fd, holder.encode(), 0)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
        try:
            yield
        finally:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # while still held: nothing else can have it
    finally:
        os.close(fd)  # the lock goes with the descriptor
