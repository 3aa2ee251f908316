"""Generation on a Dask cluster (``tickbench generate --cluster``): the same dataset, byte for
byte, as on one machine; clear errors and nothing written when the cluster cannot be used."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import TINY_HASH
from tickbench.cli import app
from tickbench.data.dataset import DatasetError
from tickbench.datasets.paper import calendar as cal
from tickbench.datasets.paper.kind import gen_task

runner = CliRunner()


def _invoke(*args: str) -> tuple[int, str]:
    res = runner.invoke(app, list(args))
    return res.exit_code, res.output


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_local_cluster_writes_the_same_dataset_as_jobs(tiny_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("distributed", reason="the cluster extra (pip install 'tickbench[cluster]') is not installed")
    out = tmp_path / "data"
    code, text = _invoke("generate", "--scale", "0.01", "--seed", "7", "--cluster", "local:2", "--out", str(out))
    assert code == 0, text
    assert text.strip().splitlines()[-1] == TINY_HASH  # the tiny fixture is generated with jobs=2
    assert _files(out) == _files(tiny_dir)  # every Parquet file, the CSVs and the manifest
    assert [p.name for p in tmp_path.iterdir()] == ["data"]  # no staging directory left


@pytest.mark.slow
def test_local_cluster_hash_equals_jobs_at_scale_0_05(tmp_path: Path) -> None:
    pytest.importorskip("distributed", reason="the cluster extra (pip install 'tickbench[cluster]') is not installed")
    code, by_jobs = _invoke("generate", "--scale", "0.05", "--jobs", "2", "--out", str(tmp_path / "jobs"))
    assert code == 0, by_jobs
    code, by_cluster = _invoke("generate", "--scale", "0.05", "--cluster", "local:2", "--out", str(tmp_path / "cl"))
    assert code == 0, by_cluster
    assert by_cluster.strip().splitlines()[-1] == by_jobs.strip().splitlines()[-1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_scheduler_is_named_and_nothing_is_written(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("distributed", reason="the cluster extra (pip install 'tickbench[cluster]') is not installed")
    monkeypatch.setenv("TICKBENCH_CLUSTER_TIMEOUT", "2")
    address = f"tcp://127.0.0.1:{_free_port()}"  # nothing listens there
    code, text = _invoke("generate", "--scale", "0.01", "--cluster", address, "--out", str(tmp_path / "d"))
    assert code == 2
    assert address in text and "dask scheduler" in text and "local:N" in text
    assert list(tmp_path.iterdir()) == []


def test_missing_dask_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    code, text = _invoke("generate", "--scale", "0.01", "--cluster", "local:2", "--out", str(tmp_path / "d"))
    assert code == 2
    assert "Dask distributed, which is not installed" in text and "tickbench[cluster]" in text
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("address", ["local:0", "local:-1", "local"])
def test_bad_local_cluster_is_refused(tmp_path: Path, address: str) -> None:
    code, text = _invoke("generate", "--scale", "0.01", "--cluster", address, "--out", str(tmp_path / "d"))
    assert code == 2 and f"--cluster {address}" in text and "local:N" in text
    assert list(tmp_path.iterdir()) == []


def test_jobs_and_cluster_together_are_refused(tmp_path: Path) -> None:
    code, text = _invoke("generate", "--scale", "0.01", "--jobs", "2", "--cluster", "local:2",
                         "--out", str(tmp_path / "d"))
    assert code == 2 and "--jobs 2" in text and "--cluster local:2" in text
    assert list(tmp_path.iterdir()) == []


def test_a_worker_that_cannot_see_the_output_says_so(tmp_path: Path) -> None:
    part = cal.partitions(0.001)[0]
    with pytest.raises(DatasetError, match=r"cannot see the output directory .*same path"):
        gen_task((7, part, 0, str(tmp_path / "not-mounted-here")))
    assert list(tmp_path.iterdir()) == []


def test_a_scheduler_on_localhost_is_not_a_local_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("distributed", reason="the cluster extra (pip install 'tickbench[cluster]') is not installed")
    monkeypatch.setenv("TICKBENCH_CLUSTER_TIMEOUT", "2")
    address = f"localhost:{_free_port()}"
    code, text = _invoke("generate", "--scale", "0.01", "--cluster", address, "--out", str(tmp_path / "d"))
    assert code == 2 and "cannot be reached" in text and "not a local cluster" not in text
    assert list(tmp_path.iterdir()) == []
