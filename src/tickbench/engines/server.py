"""Running a real database server for a benchmark: its own user, data directory, log file,
loopback address and port, and a stop that ends exactly the process tickbench started.

Server engines use :class:`ServerProcess` from their adapters; tickbench never stops a
process it did not start, and never listens on anything but 127.0.0.1.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import psutil

from tickbench.engines.base import EngineUnavailable

SERVICE_USER = "tickbench"
LOOPBACK = "127.0.0.1"
# Seconds a server may take to answer after it is started, for every server engine (a slow
# disk or a loaded machine); when unset, each adapter's own limit applies.
START_TIMEOUT_ENV = "TICKBENCH_START_TIMEOUT"


def tools_dir() -> Path:
    """Where installed engines are cached: ``$TICKBENCH_TOOLS`` or ``<repo>/tools``."""
    env = os.environ.get("TICKBENCH_TOOLS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "tools"


def port_in_use(port: int, host: str = LOOPBACK) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def start_timeout(default: float) -> float:
    """``$TICKBENCH_START_TIMEOUT`` seconds when set, else ``default``; a bad value is refused."""
    raw = os.environ.get(START_TIMEOUT_ENV, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise EngineUnavailable(f"{START_TIMEOUT_ENV}={raw!r}: expected a positive number of seconds")
    return value


def remove_stale_pid_file(path: Path) -> bool:
    """Remove a server's lock file whose process is gone or a zombie (a server killed with
    SIGKILL leaves it; a killed server whose parent died too can stay a zombie where nothing
    reaps orphans, and its pid then still looks alive to the server's own check)."""
    try:
        pid = int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    try:
        if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
            return False
    except psutil.NoSuchProcess:
        pass
    path.unlink(missing_ok=True)
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def ensure_service_user() -> str | None:
    """The unprivileged user servers run as when tickbench runs as root (servers such as
    PostgreSQL refuse root); ``None`` when not root (run as the current user)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SERVICE_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVICE_USER],
            check=True, capture_output=True,
        )
    return SERVICE_USER


def chown_tree(path: Path, user: str | None) -> None:
    if user is None:
        return
    entry = pwd.getpwnam(user)
    for root, dirs, files in os.walk(path):
        os.chown(root, entry.pw_uid, entry.pw_gid)
        for name in dirs + files:
            os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid, follow_symlinks=False)


class ServerProcess:
    """One server process started by tickbench, logging to ``log``."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log: Path,
        user: str | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log = log
        self.user = user
        self.env = env
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        argv = self.argv
        if self.user is not None:
            if shutil.which("setpriv") is None:
                raise EngineUnavailable("setpriv (util-linux) is needed to run servers as non-root")
            entry = pwd.getpwnam(self.user)
            argv = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}",
                    "--init-groups", "--", *argv]
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            # Own session: a signal to tickbench's terminal does not reach the server, and
            # the server is stopped explicitly by its pid.
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **(self.env or {})}, cwd=self.cwd, start_new_session=True,
            )

    def wait_ready(self, ready: Callable[[], bool], timeout: float) -> None:
        """Poll ``ready`` until it answers True; raise with the log's tail if the server
        exits or does not answer within ``timeout`` seconds (``$TICKBENCH_START_TIMEOUT``
        when set); a server that does not answer in time is stopped."""
        timeout = start_timeout(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise EngineUnavailable(
                    f"{self.name} exited with status {self.proc.returncode} while starting; "
                    f"log {self.log}:\n{self.log_tail()}")
            try:
                if ready():
                    return
            except Exception:  # not up yet: any client error means "not ready"
                pass
            time.sleep(0.2)
        self.stop()
        raise EngineUnavailable(
            f"{self.name} did not answer within {timeout:g} s of starting and was stopped; if it is only slow "
            f"here, allow it longer with {START_TIMEOUT_ENV}=SECONDS; log {self.log}:\n{self.log_tail()}")

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; only the process tickbench started."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = None
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def kill(self) -> None:
        """SIGKILL now (the durability suite's crash)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None
