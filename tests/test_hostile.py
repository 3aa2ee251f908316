"""Hostile conditions: a disk that fills up mid-generation leaves nothing behind."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tickbench.cli import app


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
