"""Hostile conditions: a disk that fills up mid-generation, or a generation killed outright,
leaves nothing behind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from tests.conftest import TINY_SCALE, TINY_SEED
from tickbench.cli import app
from tickbench.data.dataset import STAGE_GRACE_S, STAGE_OWNER
from tickbench.datasets.base import generate


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs: a real filesystem that runs out of space."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {res.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_disk_full_during_generation(small_disk: Path) -> None:
    res = CliRunner().invoke(app, ["generate", "--scale", "0.01", "--out", str(small_disk / "data"), "--jobs", "2"])
    assert res.exit_code == 2
    assert "disk filled up" in res.output and "nothing was kept" in res.output
    assert list(small_disk.iterdir()) == []


def test_a_killed_generation_is_cleaned_up_by_the_next(tmp_path: Path) -> None:
    """SIGKILL (the OOM killer, a closed session) leaves the staging directory behind; the next
    generation into the same place removes it, and leaves a live generation's alone."""
    out = tmp_path / "data"
    code = f"from tickbench.datasets.base import generate; generate({str(out)!r}, 0.05, 1, jobs=1)"
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob(f".data.partial-*/{STAGE_OWNER}")):
            assert child.poll() is None, "the generation ended before it could be killed"
            assert time.monotonic() < deadline, "no staging directory appeared"
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    [killed] = tmp_path.glob(".data.partial-*")

    live = tmp_path / ".data.partial-live"  # a generation that still runs: this process
    live.mkdir()
    (live / STAGE_OWNER).write_text(f"{socket.gethostname()} {os.getpid()} {psutil.Process().create_time()!r}\n")
    remote = tmp_path / ".data.partial-remote"  # another machine's, on a shared filesystem
    remote.mkdir()
    (remote / STAGE_OWNER).write_text("another-host 1 0.0\n")
    young = tmp_path / ".data.partial-young"  # just made, its owner file not yet written
    young.mkdir()
    old = tmp_path / ".data.partial-old"  # ownerless and old: abandoned
    old.mkdir()
    then = time.time() - 2 * STAGE_GRACE_S
    os.utime(old, (then, then))

    manifest = generate(out, TINY_SCALE, TINY_SEED, jobs=1)
    assert not killed.exists() and not old.exists()
    assert live.exists() and young.exists() and remote.exists()
    assert not (out / STAGE_OWNER).exists()  # the marker is not part of the dataset
    assert manifest.scale == TINY_SCALE


def test_a_full_disk_in_an_engine_says_where_and_how_to_run_it_again(tmp_path: Path) -> None:
    from tickbench.run.cell import disk_full_hint

    work = tmp_path / "out" / "work" / "timescaledb" / "published"  # not made yet: free space of its parent
    pg = 'DiskFull: could not extend file "base/4864060/5957469": No space left on device'
    hint = disk_full_hint(work, "timescaledb", pg)
    assert f"the disk under {work} filled up (" in hint and "GB free now" in hint
    assert "`tickbench run --resume DIR --redo timescaledb`" in hint
    assert "runs timescaledb again" in hint
    assert disk_full_hint(work, "chdb", "Code: 243. DB::Exception: NOT_ENOUGH_SPACE: Cannot reserve 1 MiB")
    assert disk_full_hint(work, "duckdb", "syntax error at or near FROM") == ""


def test_a_disk_too_small_for_the_server_engines_is_said_before_the_run(
    tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from tickbench.run.session import WORKDIR_PER_DATASET, disk_shortfall
    from tickbench.suites.registry import run_config

    data_bytes = sum(p.stat().st_size for p in tiny_dir.rglob("*") if p.is_file())
    out = tmp_path / "results" / "r"  # not made yet
    cfg = run_config(engines=["duckdb", "postgres"], data=tiny_dir, out=out, seed=TINY_SEED)
    usage = shutil.disk_usage(tmp_path)

    def free(n: float) -> None:
        monkeypatch.setattr(shutil, "disk_usage", lambda _p: usage._replace(free=int(n)))

    free(WORKDIR_PER_DATASET * data_bytes * 0.9)
    note = disk_shortfall(cfg)
    assert note is not None and f"under {out}" in note and "postgres may run out of disk" in note
    assert f"`tickbench run --resume {out} --redo ENGINE`" in note
    free(WORKDIR_PER_DATASET * data_bytes * 1.1)
    assert disk_shortfall(cfg) is None
    free(0)
    cfg.engines = ["duckdb"]  # the estimate is of server engines (PostgreSQL measured)
    assert disk_shortfall(cfg) is None
