"""Server engines: a real database server per run, on 127.0.0.1, as tickbench's own user.

:class:`ServerEngine` is the base of every server engine's ``Adapter``. It holds the lifecycle
every server shares, so that an adapter keeps only what is its engine's own:

=====================================  ===========================================================
the base (this module)                 the adapter (``engines/<name>/adapter.py``)
=====================================  ===========================================================
``install()``: staging directory,      :meth:`~ServerEngine.installed`,
error tails; ``require_installed()``   :meth:`~ServerEngine.install_steps`,
                                       :meth:`~ServerEngine.install_staged`, ``probe()``
``start()``: service user, reachable   :meth:`~ServerEngine.prepare`: its config file and argv;
working directory, free ports, start,  :meth:`~ServerEngine.ready`: its readiness check;
ready, port file                       :meth:`~ServerEngine.connect`: its client connection
``stop()``, :meth:`memory_pids`        :attr:`~ServerEngine.stop_signal`, :meth:`disconnect`
``start_shared()``: attach through     :meth:`~ServerEngine.connect` (answers, or raises)
the port file
:meth:`restart_with`: stop, change a   the setting's attribute (read by :meth:`prepare`)
server-wide setting, start
ingest-store marker, reader pool       ``ingest_*``: its schema, writes and reads
=====================================  ===========================================================

Readiness is polled here, by :meth:`ServerProcess.wait_ready`: lifecycle machinery on the
runner's side (like the runner's clock), not an adapter's I/O; adapters never call it (a store
that settles after a load says so through ``pending_settle()``, and the runner waits).
tickbench never stops a process it did not start, and never listens on anything but 127.0.0.1.

**External endpoints.** An adapter that sets ``external_endpoint`` (the engine contract's flag)
also runs against a server the user runs, given as :attr:`Engine.endpoint`. Then ``start()``
starts nothing: it takes the endpoint's port as the first of :attr:`port_names`, checks once
that the server answers (:meth:`ready`; a message naming the engine and the endpoint if not),
connects (:meth:`connect`), and refuses tables of tickbench's names that tickbench did not create
(:meth:`check_endpoint`). ``stop()`` drops tickbench's own tables (:meth:`drop_own`) unless the
endpoint keeps them, and ends no process; :meth:`memory_pids` is empty (the server's memory is
not ours to sample); :meth:`restart_with` is refused (a server-wide setting). The adapter adds:

* :attr:`namespace_default`, :attr:`namespace_kind`: where its tables go (schema, prefix, database);
* :meth:`foreign_tables`: the tables of its names there that lack tickbench's marker;
* :meth:`drop_own`: drop what carries the marker; :meth:`server_version`: the server's own word;
* :attr:`host` (instead of 127.0.0.1) and the endpoint's user and password in its connections.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import functools
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import psutil

from tickbench.engines.base import Endpoint, Engine, EngineUnavailable, Server, SharedReaders

SERVICE_USER = "tickbench"
LOOPBACK = "127.0.0.1"
# Seconds a server may take to answer after it is started, for every server engine (a slow
# disk or a loaded machine); when unset, each adapter's own limit applies.
START_TIMEOUT_ENV = "TICKBENCH_START_TIMEOUT"
PORTS_FILE = "server.ports"  # in the working directory: the running server's ports, for start_shared
# Seconds an external endpoint has for its first answer (the connection and the readiness check):
# a port of another service, or one that accepts and says nothing, fails then, naming the
# endpoint, instead of hanging the run.
ENDPOINT_TIMEOUT_S = 10.0


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


def free_ports(names: Sequence[str], env: str | None = None) -> dict[str, int]:
    """A distinct free port for each of ``names``; the first is ``$env`` instead when that is
    set (refused, naming it, when it is not a port or something listens on it)."""
    ports: dict[str, int] = {}
    raw = os.environ.get(env, "").strip() if env else ""
    if raw:
        if not raw.isdigit() or not 0 < int(raw) < 65536:
            raise EngineUnavailable(f"{env}={raw!r} is not a TCP port number (1-65535)")
        if port_in_use(int(raw)):
            raise EngineUnavailable(f"port {raw} on {LOOPBACK} ({env}) is already in use by another "
                                    f"program; stop it, choose another port, or unset {env} for a free one")
        ports[names[0]] = int(raw)
    for name in names[len(ports):]:
        port = free_port()
        while port in ports.values():
            port = free_port()
        ports[name] = port
    return ports


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
    """Give ``path`` (a file, or a directory and everything below it) to ``user``."""
    if user is None:
        return
    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid, follow_symlinks=False)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid, follow_symlinks=False)


def as_user(argv: Sequence[str], user: str | None, death_signal: str = "KILL") -> list[str]:
    """``argv`` run as ``user`` through setpriv (servers, and tools such as initdb, refuse root)."""
    if user is None:
        return list(argv)
    if shutil.which("setpriv") is None:
        raise EngineUnavailable("setpriv (util-linux) is needed to run servers as non-root")
    entry = pwd.getpwnam(user)
    # --pdeathsig after the change of user (which clears it): the server dies with its parent,
    # the engine process, which dies with the runner (run/engine_process.py).
    return ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--init-groups",
            "--pdeathsig", death_signal, "--", *argv]


def check_reachable(path: Path, user: str | None, server: str = "the server") -> None:
    """Raise if ``user`` (the server's) cannot reach ``path``: every directory above it must be
    searchable by others (``chmod o+x``) or belong to that user."""
    parent = unreachable(path, user)
    if parent is not None:
        raise EngineUnavailable(
            f"{server} runs as {user!r}, which cannot enter {parent} (mode "
            f"{stat.S_IMODE(parent.stat().st_mode):o}) to reach {path}; use a working directory it can reach")


SHARED_TMP = "/var/tmp"  # every user can enter it (mode 1777), and it outlives a reboot's /tmp cleaning


def unreachable(path: Path, user: str | None) -> Path | None:
    """The first directory above ``path`` that ``user`` cannot enter (neither searchable by
    others nor its own), or ``None`` when ``user`` reaches ``path`` (or there is no such user)."""
    if user is None:
        return None
    uid = pwd.getpwnam(user).pw_uid
    for parent in path.resolve().parents:
        st = parent.stat()
        if st.st_uid != uid and not st.st_mode & stat.S_IXOTH:
            return parent
    return None


def reachable_work_root(wanted: Path) -> tuple[Path, str]:
    """Where a run's engine working directories go: ``wanted`` when the servers' user reaches it
    (and always when tickbench is not root), else a directory of the run's own under the
    machine's shared temporary directory (``/var/tmp``), which every user can enter: a run whose
    ``--out`` lies under a private directory (``mktemp -d``) still runs its server engines there.
    Returns the root and a note for the run's record ("" for ``wanted``)."""
    user = ensure_service_user()
    blocked = unreachable(wanted, user)
    if blocked is None:
        return wanted, ""
    root = Path(tempfile.mkdtemp(prefix="tickbench-work-", dir=SHARED_TMP))
    root.chmod(0o711)  # the servers' user enters it; it lists nothing in it
    return root, (f"{blocked} is private (the servers' user {user!r} cannot enter it), so the engines' working "
                  f"directories were in {root}, removed when done")


def run_tool(argv: Sequence[str], env: dict[str, str] | None = None, what: str | None = None) -> str:
    """Run ``argv`` to completion; its stdout, or :class:`EngineUnavailable` with the tails of
    its output when it fails (an install step, ``initdb``, …)."""
    done = subprocess.run(list(argv), capture_output=True, text=True,
                          env={**os.environ, **env} if env else None)
    if done.returncode != 0:
        raise EngineUnavailable(f"`{what or ' '.join(argv)}` failed (status {done.returncode}):\n"
                                f"{done.stdout[-1000:]}{done.stderr[-2000:]}")
    return done.stdout


@dataclass(frozen=True)
class InstallStep:
    """One command of an engine's install: what it shows as progress, and its environment."""

    argv: list[str]
    label: str = ""
    env: dict[str, str] = field(default_factory=dict)


def apt_steps(*packages: str) -> list[InstallStep]:
    """The steps that install Debian ``packages``: one ``apt-get update`` first only if the
    package lists do not know one of them yet. Needs root and apt-get."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise EngineUnavailable(f"installing needs root and apt-get: apt-get install -y {' '.join(packages)}")
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    known = all(subprocess.run(["apt-cache", "show", p], capture_output=True, env={**os.environ, **env}).returncode == 0
                for p in packages)
    update = [] if known else [InstallStep(["apt-get", "update"], env=env)]
    return [*update, InstallStep(["apt-get", "install", "-y", "--no-install-recommends", *packages], env=env)]


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
        shm_files: str | None = None,
        death_signal: int = signal.SIGKILL,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log = log
        self.user = user
        self.env = env
        self.cwd = cwd
        self.shm_files = shm_files  # the server's own files in /dev/shm (a glob), removed after a SIGKILL
        self.proc: subprocess.Popen[bytes] | None = None
        self.created = 0.0  # the server's start time (with its pid: which process is it)
        self.death_signal = death_signal  # what the server gets when the process that started it ends

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def pid_file(self) -> Path:
        """Where the running server's pid and start time are kept (:func:`stop_leftovers`)."""
        return self.log.with_name(self.log.name + PID_SUFFIX)

    def start(self) -> None:
        argv = as_user(self.argv, self.user, signal.Signals(self.death_signal).name.removeprefix("SIG"))
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            # Own session: a signal to tickbench's terminal does not reach the server, and
            # the server is stopped explicitly by its pid. It dies with the process that
            # started it (setpriv's --pdeathsig when it runs as the service user, else prctl).
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **(self.env or {})}, cwd=self.cwd, start_new_session=True,
                preexec_fn=None if self.user else functools.partial(_die_with_parent, self.death_signal),
            )
        self.created = psutil.Process(self.proc.pid).create_time()
        self.pid_file.write_text(f"{self.proc.pid} {self.created!r}\n")

    def wait_ready(self, ready: Callable[[], bool], timeout: float) -> None:
        """Poll ``ready`` until it answers True; raise with the log's tail if the server
        exits or does not answer within ``timeout`` seconds (``$TICKBENCH_START_TIMEOUT``
        when set); a server that does not answer in time is stopped.

        Lifecycle machinery on the runner's side (like the runner's clock), called by
        :meth:`ServerEngine.start` only, never from an adapter."""
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

    def stop(self, timeout: float = 30.0, sig: int = signal.SIGTERM) -> None:
        """``sig`` (SIGTERM) to the server, then SIGKILL to it and every process it forked
        (:func:`kill_tree`) after ``timeout``; only what tickbench started."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = None
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            kill_tree(self.proc.pid, self.created, self.shm_files)
            self.proc.wait(10)
        self.proc = None
        self.pid_file.unlink(missing_ok=True)

    def kill(self) -> None:
        """SIGKILL now to the server and every process it forked (the durability suite's
        crash): a backend spared would outlive its postmaster, re-parented to init."""
        if self.proc is not None and self.proc.poll() is None:
            kill_tree(self.proc.pid, self.created, self.shm_files)
            self.proc.wait(10)
        self.proc = None


def where_password(endpoint: Endpoint, client_vars: Sequence[str] = ()) -> str:
    """Where the password for ``endpoint`` comes from, for messages: the variable it names, or
    the engine client's own variables (``client_vars``), or nowhere."""
    if endpoint.password_env:
        return f"password from ${endpoint.password_env}"
    if client_vars:
        return f"password from {' or '.join('$' + v for v in client_vars)}, as the client reads it, or none"
    return "no password sent: name the variable that holds one with password_env in a --config file"


PID_SUFFIX = ".server-pid"  # beside a server's log: "pid create_time" of the server tickbench started


def _die_with_parent(sig: int = signal.SIGKILL) -> None:
    """In the child, before exec: ``sig`` (SIGKILL) when the process that started it ends."""
    ctypes.CDLL(None, use_errno=True).prctl(1, sig, 0, 0, 0)  # PR_SET_PDEATHSIG


SHM = Path("/dev/shm")


def server_leaders(pids: Sequence[int]) -> dict[int, float]:
    """Of ``pids``, the servers tickbench started (each leads a session of its own), with their
    start times: what :func:`kill_tree` is given."""
    out = {}
    for pid in pids:
        with contextlib.suppress(OSError, psutil.Error):
            if os.getsid(pid) == pid:
                out[pid] = psutil.Process(pid).create_time()
    return out


def _shm_held(procs: Sequence[psutil.Process], pattern: str) -> set[Path]:
    """The files of /dev/shm matching ``pattern`` that ``procs`` map or hold open (PostgreSQL
    opens a segment, sizes it, then maps it)."""
    found: set[Path] = set()
    for proc in procs:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{proc.pid}/maps").read_text().splitlines():
                found.update(Path(w) for w in line.split()[5:6])
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{proc.pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    found.add(Path(os.readlink(fd)))
    return {f for f in found if f.parent == SHM and f.match(pattern)}


def kill_tree(pid: int, created: float, shm_files: str | None = None) -> list[int]:
    """SIGKILL a server tickbench started and every process it forked. PostgreSQL's backends each
    lead a session of their own (setsid), so neither a signal to the server's process group nor
    the server's death reaches them: one ran on 5.5 minutes after its postmaster was SIGKILLed,
    re-parented to init. So the server is stopped first (SIGSTOP: it forks nothing more), then
    its descendants as they are now, and all of them are killed. Only the server recorded
    (``pid`` and its start time ``created``). With ``shm_files`` (a glob), the files of /dev/shm
    matching it that these processes map or hold open are removed once they are dead (a
    SIGKILLed PostgreSQL leaves its dynamic shared memory segments there, ``PostgreSQL.<random>``;
    they are looked for while everything is stopped, so none is made between the look and the
    kill). Returns the pids killed."""
    try:
        leader = psutil.Process(pid)
        if leader.create_time() != created:
            return []  # the pid names another process now
        leader.suspend()
    except psutil.Error:
        return []
    tree = [leader]
    for _ in range(2):  # again once all are stopped: a child forked before its parent's stop took
        with contextlib.suppress(psutil.Error):
            tree += [c for c in leader.children(recursive=True) if c not in tree]
        for proc in tree[1:]:
            with contextlib.suppress(psutil.Error):
                proc.suspend()
        _wait_status(tree, (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE), 5.0)
    shm = _shm_held(tree, shm_files) if shm_files else set()
    for proc in tree:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    _wait_status(tree, (psutil.STATUS_ZOMBIE,), 10.0)
    for path in shm:
        path.unlink(missing_ok=True)
    return [p.pid for p in tree]


def _wait_status(procs: Sequence[psutil.Process], done: tuple[str, ...], timeout: float) -> None:
    """Wait until every one of ``procs`` is gone or in one of the states ``done`` (a zombie: dead,
    its memory and mappings released, its parent not having reaped it yet)."""
    deadline = time.monotonic() + timeout
    left = list(procs)
    while left and time.monotonic() < deadline:
        alive = []
        for proc in left:
            with contextlib.suppress(psutil.Error):
                if proc.status() not in done:
                    alive.append(proc)
        left = alive
        if left:
            time.sleep(0.02)


def _pid_records(root: Path) -> list[Path]:
    """The server pid records under ``root``: regular files only, found without following a
    symbolic link (a link planted in a working directory leads nowhere)."""
    if root.is_symlink() or not root.is_dir():
        return []
    found = []
    for here, _, files in os.walk(root, followlinks=False):
        found += [Path(here) / f for f in files if f.endswith(PID_SUFFIX) and (Path(here) / f).is_file()
                  and not (Path(here) / f).is_symlink()]
    return sorted(found)


def _runs_inside(proc: psutil.Process, root: Path) -> bool:
    """Whether ``proc`` works inside ``root``: tickbench starts every server in its working
    directory (PostgreSQL moves into its data directory there), so a process elsewhere is not one
    it started, whatever a record says."""
    try:
        return Path(proc.cwd()).resolve().is_relative_to(root.resolve())
    except (psutil.Error, OSError):
        return False


def stop_leftovers(root: Path) -> list[int]:
    """Stop every server tickbench started under ``root`` that still runs (its runner died
    before it could stop it), before ``root`` is reused or removed: only a process whose pid
    and start time match what was recorded and that works inside ``root``, with its process
    group. Returns their pids."""
    stopped = []
    for record in _pid_records(root):
        try:
            pid_text, created = record.read_text().split()
            proc = psutil.Process(int(pid_text))
            if proc.create_time() != float(created) or not _runs_inside(proc, root):
                continue  # the pid now names another process, or never named one of tickbench's
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except psutil.TimeoutExpired:
                kill_tree(proc.pid, float(created))
                proc.wait(10)
            stopped.append(proc.pid)
        except (OSError, ValueError, psutil.Error):
            pass
        finally:
            record.unlink(missing_ok=True)
    return stopped


class _Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)


class ReaderPool(Generic[C]):
    """One read connection per thread, made on first use by ``connect`` (the stream suite polls
    counts and snapshots from two threads while writers write: one shared connection would
    serialise them, and a new one per read would add its setup to every measured read).

    A connection idle longer than ``idle_s`` is replaced before its next use (a server that
    closes idle connections would otherwise fail the next read)."""

    def __init__(self, connect: Callable[[], C], idle_s: float | None = None) -> None:
        self._connect = connect
        self._idle_s = idle_s
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list[C] = []

    def get(self) -> C:
        """This thread's connection."""
        conn: C | None = getattr(self._local, "conn", None)
        now = time.monotonic()
        if conn is not None and self._idle_s is not None and now - self._local.used > self._idle_s:
            self.discard()
            conn = None
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        self._local.used = now
        return conn

    def discard(self) -> None:
        """Close and forget this thread's connection (the server closed it, or an answer was
        not read whole); the next :meth:`get` makes a new one."""
        conn: C | None = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def close(self) -> None:
        """Close every connection (after a crash they are broken, and closing is all there is)."""
        with self._lock:
            conns, self._all = self._all, []
        for conn in conns:
            with contextlib.suppress(Exception):
                conn.close()
        self._local = threading.local()


class ServerEngine(Engine, SharedReaders, Server):
    """The base of a server engine's adapter (see the module docstring for who does what).

    ``start()`` runs: ``probe()``; the service user, and a check that it reaches the working
    directory and :meth:`reachable`; free ports named by :attr:`port_names`; :meth:`prepare`
    (the adapter writes its config and returns the server's argv, with the random password of
    :attr:`secret_user` when it names one, :meth:`secret`); the data directory :attr:`root`
    made private (mode 0700) and given to the service user; the server started and polled with :meth:`ready`;
    the ports written to the port file; :meth:`connect`. ``start_shared()`` reads the port file
    of the server another worker started over the same working directory and only
    :meth:`connect`\\ s; ``stop()`` then ends nothing.
    """

    #: The server's name in messages, its process name and its log (``<workdir>/<name>.log``).
    server_name: ClassVar[str] = "server"
    #: The data directory under the working directory (:attr:`root`), given to the service user.
    data_dir: ClassVar[str] = "data"
    #: The ports each start picks, free and distinct, by name (``ports[name]``).
    port_names: ClassVar[tuple[str, ...]] = ("main",)
    #: An environment variable naming a fixed port for the first of :attr:`port_names`.
    port_env: ClassVar[str | None] = None
    #: Seconds start() waits for the server to answer (``$TICKBENCH_START_TIMEOUT`` overrides).
    start_timeout: ClassVar[float] = 120.0
    #: How stop() asks the server to end, and how long it waits before SIGKILL.
    stop_signal: ClassVar[int] = signal.SIGTERM
    stop_timeout_s: ClassVar[float] = 30.0
    #: Whether :meth:`memory_pids` includes the server's child processes (a process per session).
    memory_children: ClassVar[bool] = False
    #: The server's own files in /dev/shm (a glob), which a SIGKILL leaves there: those its
    #: processes map are removed after its process group is killed.
    shm_files: ClassVar[str | None] = None
    #: What the server gets when the engine process that started it ends (PR_SET_PDEATHSIG):
    #: SIGKILL, or a signal on which the server itself ends every process it forked.
    death_signal: ClassVar[int] = signal.SIGKILL
    #: The file in an ingest store's directory that says which tables of this server are its own.
    ingest_marker: ClassVar[str] = "server-ingest.json"
    #: The user a server tickbench starts is made to require, with a random password per working
    #: directory (:meth:`secret`); ``None``: the adapter secures its server otherwise (PostgreSQL).
    secret_user: ClassVar[str | None] = None
    #: External endpoints: where tickbench's tables go by default, and what kind of namespace
    #: that is (for messages: "schema", "table prefix", "database").
    namespace_default: ClassVar[str] = "tickbench"
    namespace_kind: ClassVar[str] = "namespace"
    #: The environment variables the engine's client library reads a password from by itself
    #: (libpq's ``PGPASSWORD``), for messages about an endpoint's credentials.
    client_password_vars: ClassVar[tuple[str, ...]] = ()

    server: ServerProcess | None = None
    #: True while attached to a server another worker started (start_shared), owning no process.
    attached: bool = False
    #: The ingest store's read connections, per thread; ``None`` while no store is open.
    readers: ReaderPool[Any] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ports: dict[str, int] = {}

    # -- installation ----------------------------------------------------------------------

    @classmethod
    def installed(cls) -> bool:
        """Whether the engine's binaries are in place (then install() does nothing)."""
        raise NotImplementedError

    @classmethod
    def require_installed(cls) -> None:
        """Raise :class:`EngineUnavailable`, naming the install command, when not :meth:`installed`
        (the first check of every server engine's ``probe()``)."""
        if not cls.installed():
            raise EngineUnavailable(f"not installed; run `tickbench install {cls.engine_name()}`")

    @classmethod
    def install_steps(cls, stage: Path) -> list[InstallStep]:
        """The commands that install the engine, writing into ``stage`` (an empty directory)
        where they write files of their own."""
        raise NotImplementedError

    @classmethod
    def install_staged(cls, stage: Path) -> None:
        """Move what :meth:`install_steps` left in ``stage`` into place (a rename, so that an
        interrupted install leaves nothing half-made behind)."""

    @classmethod
    def install(cls, progress: Callable[[str], None] | None = None) -> str:
        """Run :meth:`install_steps` in a staging directory under the tools directory, then
        :meth:`install_staged`; a no-op when :meth:`installed`. A failed step raises with the
        tails of its output."""
        if not cls.installed():
            tools_dir().mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(prefix=f".{cls.server_name}-", dir=tools_dir()) as stage:
                for step in cls.install_steps(Path(stage)):
                    if progress:
                        progress(step.label or " ".join(step.argv))
                    run_tool(step.argv, step.env)
                cls.install_staged(Path(stage))
        return cls.probe()

    # -- what the adapter provides ----------------------------------------------------------

    @property
    def root(self) -> Path:
        """The server's data directory."""
        return self.workdir / self.data_dir

    def reachable(self) -> list[Path]:
        """Paths outside the working directory the server's user must reach (e.g. a jar)."""
        return []

    def prepare(self, user: str | None) -> list[str]:
        """Make :attr:`root` ready for a start on :attr:`ports` (config file, first-time
        initialisation) and return the server's argv."""
        raise NotImplementedError

    def ready(self) -> bool:
        """Whether the server answers (polled after the start; an exception means not yet)."""
        raise NotImplementedError

    def connect(self) -> None:
        """Open the client side on a server that answers (after start, or to attach)."""

    # -- external endpoints: what the adapter provides -----------------------------------------

    @property
    def external(self) -> Endpoint | None:
        """The user's server this adapter runs against, or ``None`` (tickbench's own)."""
        return self.endpoint

    @property
    def host(self) -> str:
        """Where the server listens: the endpoint's host, else 127.0.0.1."""
        return self.endpoint.host if self.endpoint else LOOPBACK

    @property
    def namespace(self) -> str:
        """Where tickbench's own tables go on an external endpoint."""
        return (self.endpoint.namespace if self.endpoint else None) or self.namespace_default

    def foreign_tables(self) -> list[str]:
        """On an external endpoint: the tables (qualified names) of tickbench's names in its
        namespace that tickbench did not create (no marker); tickbench refuses to touch them."""
        raise NotImplementedError

    def drop_own(self) -> None:
        """On an external endpoint: drop every table that carries tickbench's marker in its
        namespace (and the namespace itself where tickbench created it and it is empty)."""
        raise NotImplementedError

    def server_version(self) -> str:
        """The version the running server reports (a query), for an external endpoint."""
        raise NotImplementedError

    @property
    def secret_file(self) -> Path:
        """The password of :attr:`secret_user`, in the working directory (mode 0600): read by
        every client of this server, those of other processes (``start_shared``) too."""
        return self.workdir / f"{self.server_name}.secret"

    def secret(self) -> str:
        """The password a server tickbench started requires of :attr:`secret_user`."""
        return self.secret_file.read_text()

    def _make_secret(self) -> None:
        """A random password for :attr:`secret_user`, kept for the working directory's life: a
        restart over the same data (a server-wide setting, the durability suite's recovery)
        keeps the user the server stored."""
        if self.secret_user is None or self.secret_file.exists():
            return
        fd = os.open(self.secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(24))

    def credentials(self) -> tuple[str, str] | None:
        """The user and password this adapter's clients send: the endpoint's (the password from
        the environment variable it names), or the secret of a server tickbench started."""
        endpoint = self.endpoint
        if endpoint is not None:
            return None if endpoint.user is None else (endpoint.user, endpoint.password() or "")
        return None if self.secret_user is None else (self.secret_user, self.secret())

    def http_auth(self) -> dict[str, str]:
        """HTTP basic authentication with :meth:`credentials`; no header without them."""
        creds = self.credentials()
        if creds is None:
            return {}
        token = base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode()
        return {"Authorization": f"Basic {token}"}

    def disconnect(self) -> None:
        """Close what :meth:`connect` opened (stop() calls it first)."""

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def log_file(self) -> Path:
        return self.workdir / f"{self.server_name}.log"

    @property
    def running(self) -> bool:
        """Whether this adapter started a server or is attached to one."""
        return self.server is not None or self.attached

    def require_running(self) -> None:
        if not self.running:
            raise RuntimeError(f"{self.server_name} is not started")

    def start(self) -> None:
        if self.endpoint is not None:
            self._start_external(self.endpoint)
            return
        self.probe()
        self.workdir.mkdir(parents=True, exist_ok=True)
        user = ensure_service_user()
        if user is not None:  # the server's user enters the working directory, lists nothing in it
            self.workdir.chmod(self.workdir.stat().st_mode | stat.S_IXOTH)
        for path in (self.workdir, *self.reachable()):
            check_reachable(path, user, self.server_name)
        timeout = start_timeout(self.start_timeout)  # a bad $TICKBENCH_START_TIMEOUT before any start
        self.ports = free_ports(self.port_names, self.port_env)
        self._make_secret()
        if self.secret_user is not None:  # private before prepare() writes the secret into its config
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.root.chmod(0o700)
        argv = self.prepare(user)
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o700)  # the data, and the server's config with its secret, are the server's alone
        chown_tree(self.root, user)
        server = self.server = ServerProcess(self.server_name, argv, log=self.log_file, user=user, cwd=self.root,
                                             shm_files=self.shm_files, death_signal=self.death_signal)
        server.start()
        try:
            server.wait_ready(self.ready, timeout=timeout)
        except BaseException as exc:
            server.stop(self.stop_timeout_s, self.stop_signal)
            self.server = None
            # A port taken between the choice and the bind:
            if isinstance(exc, EngineUnavailable) and "already in use" in str(exc):
                raise EngineUnavailable(f"port {', '.join(map(str, self.ports.values()))} on {LOOPBACK} "
                                        f"is already in use: {exc}") from exc
            raise
        (self.workdir / PORTS_FILE).write_text(json.dumps(self.ports))
        self.connect()

    def _start_external(self, endpoint: Endpoint) -> None:
        """Use the user's server as it is: one readiness check, connect, refuse foreign tables."""
        self.ports = {self.port_names[0]: endpoint.port}
        self.attached = True
        try:
            if not self.ready():
                raise EngineUnavailable("it does not answer")
        except Exception as exc:
            self.attached = False
            reason = " ".join(str(exc).split())  # one line: a client library's message may hold line breaks
            raise EngineUnavailable(f"{endpoint.describe()} cannot be used: {type(exc).__name__}: {reason}; "
                                    f"check the host, the port and the credentials "
                                    f"({where_password(endpoint, self.client_password_vars)})") from exc
        try:
            self.connect()
            self.check_endpoint()
        except BaseException:
            self.disconnect()
            self.attached = False
            raise

    def check_endpoint(self) -> None:
        """Refuse an external endpoint whose namespace holds tables of tickbench's names that
        tickbench did not create, naming them and what to do (tickbench never writes to or
        drops a table it did not create)."""
        endpoint = self.endpoint
        if endpoint is None:
            return
        foreign = self.foreign_tables()
        if foreign:
            raise EngineUnavailable(
                f"{endpoint.describe()} already holds {', '.join(foreign)}, which tickbench did not create "
                f"(it carries no tickbench marker), so tickbench will not write to or drop it: rename or drop "
                f"it yourself, or give tickbench another {self.namespace_kind} with namespace = \"...\" under "
                f"[endpoints.{endpoint.engine}] in the --config file")

    def check_endpoint_only(self) -> None:
        if self.endpoint is None:
            return
        self._start_external(self.endpoint)
        self.disconnect()
        self.attached = False

    def start_shared(self) -> None:
        """Attach to the server another worker started over the same working directory (a
        concurrency client in a process of its own), through its port file. No process is
        started, and stop() ends none."""
        if self.endpoint is not None:
            self._start_external(self.endpoint)
            self.shared_client = True
            return
        try:
            self.ports = {str(k): int(v) for k, v in json.loads((self.workdir / PORTS_FILE).read_text()).items()}
        except (OSError, ValueError, AttributeError) as exc:
            raise EngineUnavailable(f"no {self.server_name} server to attach to over {self.workdir}: {exc}") from exc
        self.attached = True
        try:
            if not self.ready():
                raise EngineUnavailable("it does not answer")
            self.connect()
        except Exception as exc:
            self.attached = False
            raise EngineUnavailable(f"the {self.server_name} server on {LOOPBACK} ports "
                                    f"{self.ports} does not answer: {exc}") from exc

    #: A concurrency client attached to an external endpoint: its stop() drops nothing.
    shared_client: bool = False

    def stop(self) -> None:
        """Close the client side, then end the server this adapter started (if any). On an
        external endpoint: drop tickbench's own tables unless the endpoint keeps them; the
        server is left running."""
        if self.endpoint is not None and self.attached and not self.endpoint.keep and not self.shared_client:
            self.drop_own()
        self.disconnect()
        self.attached = False
        if self.server is not None:
            (self.workdir / PORTS_FILE).unlink(missing_ok=True)
            self.server.stop(self.stop_timeout_s, self.stop_signal)
            self.server = None

    def memory_pids(self) -> list[int]:
        """The server's pid (and its children's, with :attr:`memory_children`); none when
        attached to another worker's server, which must not be killed from here."""
        pid = self.server.pid if self.server else None
        if pid is None:  # attached, or an external endpoint (not ours to sample or kill)
            return []
        if not self.memory_children:
            return [pid]
        try:
            return [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]
        except psutil.NoSuchProcess:
            return []

    def restart_with(self, **settings: Any) -> None:
        """Set server-wide settings read only at startup (attributes :meth:`prepare` reads):
        when any differs from what the server runs with, stop it, change them, start it again
        over the same data (its pid and ports change). Refused on an external endpoint."""
        self.require_running()
        if self.endpoint is not None:
            if all(getattr(self, k) == v for k, v in settings.items()):
                return
            raise EngineUnavailable(f"{self.endpoint.describe()}: tickbench changes no server-wide setting "
                                    f"({', '.join(f'{k}={v}' for k, v in settings.items())}) of a server it "
                                    "does not run")
        if all(getattr(self, k) == v for k, v in settings.items()):
            return
        self.stop()
        for key, value in settings.items():
            setattr(self, key, value)
        self.start()

    def version(self) -> str:
        return self.server_version() if self.endpoint is not None else self.probe()

    def endpoint_info(self) -> dict[str, Any] | None:
        endpoint = self.endpoint
        if endpoint is None:
            return None
        return {"external": True, "address": endpoint.address, "server_version": self.server_version(),
                "database": endpoint.database, self.namespace_kind: self.namespace, "kept": endpoint.keep}

    # -- ingest store: marker and readers ------------------------------------------------------

    def read_marker(self, store: Path) -> Any:
        """What :meth:`write_marker` recorded in ``store`` (``None`` for a new store)."""
        try:
            return json.loads((store / self.ingest_marker).read_text())
        except (OSError, ValueError):
            return None

    def write_marker(self, store: Path, identity: dict[str, Any]) -> None:
        """Record in ``store`` (created) which tables of which server hold it."""
        store.mkdir(parents=True, exist_ok=True)
        (store / self.ingest_marker).write_text(json.dumps({"root": str(self.root.resolve()), **identity}))

    def marker_names(self, store: Path, identity: dict[str, Any]) -> bool:
        """Whether ``store``'s marker names ``identity`` on this server's data directory."""
        return bool(self.read_marker(store) == {"root": str(self.root.resolve()), **identity})

    def open_readers(self, connect: Callable[[], C], idle_s: float | None = None) -> None:
        self.close_readers()
        self.readers = ReaderPool(connect, idle_s)

    def reader(self) -> Any:
        """This thread's read connection to the open ingest store."""
        if self.readers is None:
            raise RuntimeError("the ingest store is not open")
        return self.readers.get()

    def close_readers(self) -> None:
        if self.readers is not None:
            self.readers.close()
            self.readers = None


