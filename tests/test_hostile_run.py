"""Dying and interrupted runs, with real signals to real runs: Ctrl-C, SIGTERM and SIGHUP stop a
run cleanly (exit 130, one line, results.json valid, the unfinished cells recorded as
interrupted and run again by ``--resume``); a runner killed outright leaves no engine process
or server behind, and ``--resume`` starts cleanly after it; two runs into one ``--out`` are
refused; a leftover server of a killed run is stopped before its directory is reused; a disk
that fills up is recorded, never a traceback. Each test judges only its own processes: the
runner's descendants (taken while it runs) and those whose command line names its ``--out``;
and each checks that nothing beside ``--out`` changed."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.conftest import processes_under
from tickbench.engines.registry import availability
from tickbench.run.faults import FAULTS_ENV

pytestmark = pytest.mark.slow


def _start(out: Path, data: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``tickbench run`` in a session of its own (so a signal to its group reaches it and its engine
    processes, as Ctrl-C at a terminal does)."""
    return subprocess.Popen([sys.executable, "-m", "tickbench.cli", "run", "--data", str(data), "--out", str(out),
                             "--repetitions", "2", *args], env={**os.environ, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _records(out: Path) -> list[dict[str, object]]:
    try:
        return list(json.loads((out / "results.json").read_text())["records"])
    except (OSError, ValueError):
        return []


def _wait_for(what: object, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if what():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _tree(proc: subprocess.Popen[str]) -> list[psutil.Process]:
    """The runner's processes now: its descendants (engine processes, by a command line that
    does not name ``--out``, and the servers they started)."""
    try:
        return psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        return []


def _gone(out: Path, timeout: float = 30.0, also: list[psutil.Process] | None = None) -> list[psutil.Process]:
    """The processes still running for ``out`` (and of ``also``, the runner's descendants seen
    while it ran) once ``timeout`` has passed (none, hopefully)."""
    def left() -> list[psutil.Process]:
        return processes_under(out) + [p for p in also or [] if _alive(p)]

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and left():
        time.sleep(0.5)
    return left()


def _beside(around: Path, out: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under ``around`` but ``out`` and the directories holding it
    (size, mtime): what a run into ``out`` must leave as it was."""
    return {str(p.relative_to(around)): (p.lstat().st_size if p.is_file() else 0, p.lstat().st_mtime_ns)
            for p in sorted(around.rglob("*")) if p != out and out not in p.parents and p not in out.parents}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_stops_the_run_and_resume_finishes_it(sig: signal.Signals, tiny_dir: Path, tmp_path: Path) -> None:
    """The run stops at the first signal: the engine under way is stopped and its unfinished cells
    recorded as interrupted, the engines after it do not start (a Ctrl-C once became the engine's
    failure, and the run went on to the next engine), and ``--resume`` runs the rest."""
    out = tmp_path / "run"
    before = _beside(tmp_path, out)
    # Every query a second slower, so the signal lands in the middle of the engine's cells.
    proc = _start(out, tiny_dir, "--engines", "duckdb,polars", env={FAULTS_ENV: "duckdb:slow=1"})
    _wait_for(lambda: len(_records(out)) >= 2)
    engine_processes = _tree(proc)
    assert engine_processes, "the run's engine process was not found"
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)  # Ctrl-C: the whole foreground group
    else:
        proc.send_signal(sig)  # a service manager: the runner alone
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert f"interrupted by {sig.name}" in lines[-1] and "Traceback" not in stderr
    records = _records(out)
    assert {r["engine"] for r in records} == {"duckdb"}, "the run went on to the next engine"
    statuses = {r["benchmark"]: r["status"] for r in records}
    assert "interrupted" in statuses.values() and len(statuses) == 16
    assert not list(out.glob(".results-*.json")) and not (out / "work").exists()
    assert not _gone(out, also=engine_processes)
    assert _beside(tmp_path, out) == before
    again = subprocess.run([sys.executable, "-m", "tickbench.cli", "run", "--resume", str(out)],
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    finished = {(r["engine"], r["benchmark"]): r["status"] for r in _records(out)}
    assert len(finished) == 32 and "interrupted" not in finished.values()
    assert all(finished["duckdb", b] == "ok" for b, status in statuses.items() if status == "interrupted")
    assert {finished["polars", b] for b in statuses} <= {"ok", "not_applicable"}
    assert _beside(tmp_path, out) == before


def test_a_second_run_into_the_same_out_is_refused(tiny_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    before = _beside(tmp_path, out)
    first = _start(out, tiny_dir, "--engines", "duckdb", env={FAULTS_ENV: "duckdb:slow=0.5"})
    engine_processes: list[psutil.Process] = []
    try:
        _wait_for(lambda: len(_records(out)) >= 1)
        engine_processes = _tree(first)
        second = subprocess.run([sys.executable, "-m", "tickbench.cli", "run", "--resume", str(out)],
                                capture_output=True, text=True, timeout=120)
        assert second.returncode == 2
        message = " ".join(second.stderr.split())
        assert f"--out {out}: another tickbench run (pid {first.pid})" in message and "Traceback" not in message
    finally:
        first.communicate(timeout=600)
    assert first.returncode == 0
    assert all(r["status"] == "ok" for r in _records(out)) and len(_records(out)) == 16
    assert not _gone(out, also=engine_processes)
    assert _beside(tmp_path, out) == before


@pytest.mark.server
def test_a_runner_killed_outright_leaves_no_server_and_resume_starts_cleanly(tiny_dir: Path, server_tmp: Path) -> None:
    if not (avail := availability("postgres")).available:
        pytest.skip(f"postgres not available here: {avail.reason}")
    out = server_tmp / "run"
    proc = _start(out, tiny_dir, "--engines", "postgres", env={FAULTS_ENV: "postgres:slow=1"})
    _wait_for(lambda: len(_records(out)) >= 1)
    servers = [p for p in processes_under(out) if "postgres" in p.name()]
    assert servers, "the run's PostgreSQL server was not found"
    engine_processes = _tree(proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    # The engine process dies with the runner, and the server with the engine process.
    assert not _gone(out, also=engine_processes), "processes left running after the runner was killed"
    again = subprocess.run([sys.executable, "-m", "tickbench.cli", "run", "--resume", str(out)],
                           capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr
    assert {r["status"] for r in _records(out)} == {"ok"}
    assert not _gone(out)


@pytest.mark.server
def test_a_signal_stops_the_runs_server_too(tiny_dir: Path, server_tmp: Path) -> None:
    """SIGTERM to a run of PostgreSQL (which once left its server running, parented to init,
    and a ``--resume`` then found the port taken): exit 130 with one line, the server stopped
    with the engine, the cells under way recorded as interrupted, and ``--resume`` runs them."""
    if not (avail := availability("postgres")).available:
        pytest.skip(f"postgres not available here: {avail.reason}")
    out = server_tmp / "run"
    before = _beside(server_tmp, out)
    proc = _start(out, tiny_dir, "--engines", "postgres", env={FAULTS_ENV: "postgres:slow=1"})
    _wait_for(lambda: len(_records(out)) >= 1)
    assert [p for p in processes_under(out) if "postgres" in p.name()], "the run's PostgreSQL server was not found"
    engine_processes = _tree(proc)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 130, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "interrupted by SIGTERM" in lines[-1] and "Traceback" not in stderr
    assert not _gone(out, also=engine_processes), "the server outlived the interrupted run"
    statuses = {r["benchmark"]: r["status"] for r in _records(out)}
    assert "interrupted" in statuses.values() and len(statuses) == 16
    assert not list(out.glob(".results-*.json")) and not (out / "work").exists()
    assert _beside(server_tmp, out) == before
    again = subprocess.run([sys.executable, "-m", "tickbench.cli", "run", "--resume", str(out)],
                           capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr
    assert {r["status"] for r in _records(out)} == {"ok"}
    assert not _gone(out) and _beside(server_tmp, out) == before


def _sleeper(cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """A process in a session of its own, as tickbench starts its servers (in ``cwd``)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True, cwd=cwd)


def test_a_leftover_server_is_stopped_before_its_directory_is_reused(tiny_dir: Path, tmp_path: Path) -> None:
    """A runner killed outright whose server outlived it (its parent-death signal lost): the
    server's pid and start time, recorded beside its log in the working directory, let
    ``--resume`` stop it before the directory is reused (it works there, as tickbench starts
    its servers); a recorded pid that now names another process (another start time) is left
    alone."""
    out = tmp_path / "run"
    before = _beside(tmp_path, out)
    proc = _start(out, tiny_dir, "--engines", "duckdb", env={FAULTS_ENV: "duckdb:slow=1"})
    _wait_for(lambda: len(_records(out)) >= 1)
    engine_processes = _tree(proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert not _gone(out, also=engine_processes)
    work = out / "work" / "duckdb"
    assert work.is_dir(), "the killed run left no working directory"
    leftover, stranger = _sleeper(cwd=work), _sleeper()
    try:
        started = psutil.Process(leftover.pid).create_time()
        (work / "server.log.server-pid").write_text(f"{leftover.pid} {started!r}\n")
        (work / "other.log.server-pid").write_text(f"{stranger.pid} {started - 1000.0!r}\n")
        again = subprocess.run([sys.executable, "-m", "tickbench.cli", "run", "--resume", str(out)],
                               capture_output=True, text=True, timeout=600)
        assert again.returncode == 0, again.stderr
        assert leftover.poll() is not None, "the leftover server still runs"
        assert stranger.poll() is None, "a process tickbench did not start was stopped"
        assert {r["status"] for r in _records(out)} == {"ok"} and len(_records(out)) == 16
        assert not (out / "work").exists()
        assert _beside(tmp_path, out) == before
    finally:
        for p in (leftover, stranger):
            if p.poll() is None:
                p.kill()
            p.wait()



@contextlib.contextmanager
def small_tmpfs(mount: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``mount`` for the block (a disk that fills up), unmounted
    after it; the test is skipped where mounting needs a root this run does not have."""
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        pytest.skip("needs root to mount a small tmpfs (CI runs as root)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_disk_that_fills_up_is_recorded_not_a_traceback(tiny_dir: Path, tmp_path: Path) -> None:
    """--out on a 24 MB filesystem: DuckDB's database does not fit; the cells say so, the
    engine's working directory is removed, results.json stays valid, no temporary file is left."""
    with small_tmpfs(tmp_path / "small", "24m") as mount:
        out = mount / "run"
        before = _beside(tmp_path, out)
        done = subprocess.run([sys.executable, "-m", "tickbench.cli", "run", "--engines", "duckdb", "--data",
                               str(tiny_dir), "--out", str(out), "--repetitions", "1"],
                              capture_output=True, text=True, timeout=600)
        assert not _gone(out) and _beside(tmp_path, out) == before
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode in (0, 1, 2), done.stderr
        if done.returncode == 2:
            assert "full" in done.stderr and str(out) in " ".join(done.stderr.split())
        records = _records(out)
        assert records, "results.json unreadable"
        assert any("filled up" in str(r.get("reason", "")) for r in records)
        assert not list(out.glob(".results-*.json")) and not (out / "work").exists()


def test_a_disk_too_full_for_results_json_stops_the_run_naming_it(tiny_dir: Path, tmp_path: Path) -> None:
    """--out on a filesystem already full (another program filled it): results.json cannot be
    written even with no engine's working directory left to remove, so the run stops at once,
    exit 2, one line naming the directory and its free space; no half-written file is left."""
    with small_tmpfs(tmp_path / "full", "1m") as mount:
        filler = mount / "filler"
        with filler.open("wb") as f, contextlib.suppress(OSError):  # until the disk is full (ENOSPC)
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        out = mount / "run"
        before = _beside(tmp_path, out)
        done = subprocess.run([sys.executable, "-m", "tickbench.cli", "run", "--engines", "duckdb", "--data",
                               str(tiny_dir), "--out", str(out), "--repetitions", "1"],
                              capture_output=True, text=True, env={**os.environ, "COLUMNS": "250"}, timeout=600)
        assert done.returncode == 2, done.stdout + done.stderr
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
        assert f"the disk under {out} is full (0.0 GB free" in errors[0], errors[0]
        assert f"`tickbench run --resume {out}`" in errors[0], errors[0]
        assert not list(out.glob(".results-*.json")) and not (out / "results.json").exists()
        assert not (out / "work").exists() and not _gone(out)
        assert _beside(tmp_path, out) == before


def test_a_default_tick_latency_run_is_bounded_by_the_cell_budget(tiny_dir: Path, tmp_path: Path) -> None:
    """The default tick-latency matrix (up to 100 × 100,000 single writes a cell) on DuckDB with a
    3 s budget: every cell ends, the large ones stopped at the budget with what they measured
    (events written and read back, rate, latency), and the run goes on to the end."""
    out = tmp_path / "tick"
    done = subprocess.run([sys.executable, "-m", "tickbench.cli", "run", "--engines", "duckdb", "--suite",
                           "tick-latency", "--data", str(tiny_dir), "--out", str(out), "--cell-budget", "3"],
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr
    records = _records(out)
    assert len(records) == 12 and all(r["status"] == "ok" for r in records)
    stopped = [r for r in records if r["figures"]["stopped_at_budget"]]  # type: ignore[index]
    assert stopped, "no cell reached a 3 s budget"
    for r in stopped:
        f = r["figures"]
        assert 0 < f["written"] < 3 * f["events"]  # type: ignore[index,operator]  # 3 repetitions asked
        assert f["events_per_s"] > 0 and f["latency"]["count"] > 0  # type: ignore[index,operator]
        assert "stopped at the cell budget of 3 s" in str(r["notes"])


def test_every_cell_is_bounded_by_default() -> None:
    """The budget that bounds the test above is on by default: a run given no --cell-budget gives
    every cell 60 s beyond its warm-up (the CLI's default and the runner's agree)."""
    from tickbench.run.cell import Protocol

    done = subprocess.run([sys.executable, "-m", "tickbench.cli", "run", "--help"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if "--cell-budget" in x)
    assert "[default: 60.0]" in line
    assert Protocol().cell_budget_s == 60.0


@pytest.mark.server
def test_a_run_under_a_private_directory_runs_its_servers(tiny_dir: Path, tmp_path: Path) -> None:
    """--out under a 0700 directory (as `mktemp -d` makes): the server engine's user cannot enter
    it, so its working directory goes to a directory of the run's own that it can, removed at
    the end; every cell verifies."""
    if os.geteuid() != 0:
        pytest.skip("servers run as tickbench's service user only when tickbench runs as root")
    if not (avail := availability("postgres")).available:
        pytest.skip(f"postgres not available here: {avail.reason}")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    out = private / "run"
    done = subprocess.run([sys.executable, "-m", "tickbench.cli", "run", "--engines", "postgres", "--data",
                           str(tiny_dir), "--out", str(out), "--repetitions", "1"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert "private" in done.stderr and "/var/tmp/tickbench-work-" in done.stderr
    assert {r["status"] for r in _records(out)} == {"ok"}
    moved = done.stderr.split("/var/tmp/tickbench-work-", 1)[1].split(",")[0].split()[0]
    assert not Path("/var/tmp/tickbench-work-" + moved).exists() and not (out / ".work-root").exists()
