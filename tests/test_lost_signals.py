"""A stop signal whose raise Python loses still stops the command, and keeps nothing.

A handler's exception cannot be raised while the main thread runs a weakref callback or a
``__del__``: Python prints it as "Exception ignored in …" and goes on. A Ctrl-C to ``tickbench
import`` once landed in importlib's module-lock callback that way, and the import ran to its end
and kept its dataset (exit 0). Here the signal is sent from inside a ``__del__`` of the test's,
so its raise is lost every time, at a point of the test's choosing: the import, the generation
and the run each stop at their next check, keep nothing half-done, and print no traceback.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.conftest import TINY_SEED
from tests.test_hostile_import import _tardis_trades
from tickbench.cli import app
from tickbench.data.dataset import Dataset, GenerationStopped
from tickbench.datasets import base as datasets_base
from tickbench.run import session
from tickbench.run.cell import Protocol
from tickbench.run.session import RunInterrupted, run
from tickbench.suites.registry import run_config


def _lose(sig: signal.Signals) -> None:
    """Send ``sig`` to this process from inside a ``__del__``: the handler runs there, and its
    raise ends the ``__del__`` and is lost. Fails if the handler did not run there."""
    past: list[bool] = []

    class Trap:
        def __del__(self) -> None:
            os.kill(os.getpid(), sig)
            for _ in range(1000):  # the handler runs at the next check of the interpreter's
                time.sleep(0.001)
            past.append(True)  # reached only if the handler did not raise here

    Trap()  # collected at once
    assert not past, f"the {sig.name} handler did not raise inside __del__"


def _once(action: Callable[[], None]) -> Callable[[], None]:
    done: list[bool] = []

    def run_once() -> None:
        if not done:
            done.append(True)
            action()
    return run_once


def test_a_lost_ctrl_c_still_stops_the_import_and_keeps_nothing(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    src = _tardis_trades(tmp_path / "trades.csv", 20_000)
    out = tmp_path / "ds"
    real = datasets_base.import_dataset
    started: list[bool] = []

    def import_after_a_lost_sigint(*args: Any, **kwargs: Any) -> Any:
        _lose(signal.SIGINT)
        started.append(True)
        return real(*args, **kwargs)

    monkeypatch.setattr(datasets_base, "import_dataset", import_after_a_lost_sigint)
    res = CliRunner().invoke(app, ["import", "tardis", str(src), "--out", str(out)])
    assert started, "the import was not reached"
    assert res.exit_code == 130, res.output
    lines = [x for x in res.output.splitlines() if x.strip() and not x.startswith("import:")]
    assert len(lines) == 1 and "interrupted by SIGINT" in lines[0] and "nothing was kept" in lines[0], res.output
    assert "Traceback" not in res.output and "Exception ignored" not in res.output
    assert not out.exists() and not list(tmp_path.glob(".ds.partial-*"))


def test_a_lost_sigterm_still_stops_the_generation_before_it_publishes(tmp_path: Path) -> None:
    """A single-process generation (no pool: the handler raises at once) whose SIGTERM was lost
    runs to its end, then refuses to publish: nothing is kept."""
    out = tmp_path / "ds"
    trap = _once(lambda: _lose(signal.SIGTERM))
    with pytest.raises(GenerationStopped, match="SIGTERM"):
        datasets_base.generate(out, 0.01, 7, 0, 1, lambda done, total: trap(), dataset="market", universe=20)
    assert not out.exists() and not list(tmp_path.glob(".ds.partial-*"))


@pytest.mark.slow
def test_a_lost_sigterm_still_stops_the_run_at_its_next_record(tiny: Dataset, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The first record written, a SIGTERM is lost (its handler has killed the engine
    processes): the next cell's outcome is not kept as the cell's; that cell and the rest are
    recorded ``interrupted`` (``--resume`` runs them again)."""
    out = tmp_path / "r"
    real = session._write
    trap = _once(lambda: _lose(signal.SIGTERM))

    def write_then_lose(results: Any, *args: Any) -> None:
        real(results, *args)
        if results.records:
            trap()

    monkeypatch.setattr(session, "_write", write_then_lose)
    cfg = run_config(engines=["duckdb"], data=tiny.root, out=out, seed=TINY_SEED,
                     protocol=Protocol(warmup=1, repetitions=1, timeout_s=20.0))
    with pytest.raises(RunInterrupted) as stopped:
        run(cfg)
    assert stopped.value.signame == "SIGTERM" and stopped.value.interrupted > 0
    records = json.loads((out / "results.json").read_text())["records"]
    statuses = [r["status"] for r in records]
    assert statuses[0] != "interrupted" and set(statuses[1:]) == {"interrupted"}, statuses
    assert len(statuses) == 1 + stopped.value.interrupted
