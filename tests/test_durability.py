"""The durability suite: the kill lands mid-stream, acknowledged rows are counted against
what the engine holds after recovery, durable settings lose nothing, and a lost row under
a durable setting is caught (not reported as a time)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from tests.conftest import processes_under
from tests.synthetic import report_markdown as render_markdown
from tickbench.data.dataset import Dataset
from tickbench.datasets.paper.schema import rows_to_table
from tickbench.engines.base import EngineUnavailable
from tickbench.engines.registry import adapter_class
from tickbench.report import html
from tickbench.results import Results, read_results
from tickbench.run.cell import Protocol
from tickbench.run.faults import FAULTS_ENV
from tickbench.run.session import run
from tickbench.suites.durability.ops import ACK, SYMS, compare, kill_delay_s, read_acks
from tickbench.suites.ingest import tick_row, tick_syms
from tickbench.suites.registry import run_config, suite_options, suites

OPTS = suite_options(durability_seconds=2.0, durability_writers=2)


def _run(tiny: Dataset, out: Path, engine: str) -> Results:
    return run(run_config(engines=[engine], data=tiny.root, out=out, seed=7, suite="durability",
                         protocol=Protocol(warmup=1, repetitions=1, timeout_s=120, load_timeout_s=300),
                         verify_dataset=False, options=OPTS))


def _rows(ids: list[int]) -> pa.Table:
    syms = tick_syms(SYMS)
    return rows_to_table("trades", [tick_row(i, syms) for i in ids])


def test_compare_counts_lost_changed_duplicated_and_in_flight() -> None:
    acks = {i: (0, 1) for i in range(10)}
    table = _rows([0, 1, 2, 3, 4, 4, 6, 7, 8, 9, 10])  # 5 lost, 4 twice, 10 in flight
    changed = table.set_column(4, "price", pa.array([999.0, *table.column("price").to_pylist()[1:]]))  # row 0
    got = compare(acks, [changed])
    assert (got["acknowledged"], got["lost"], got["lost_first"]) == (10, 1, [5])
    assert (got["changed"], got["changed_first"], got["duplicated"]) == (1, [0], 1)
    assert got["unacknowledged_present"] == 1 and got["read"] == 11
    assert compare(acks, [_rows(list(range(10)))])["lost"] == 0


def test_ack_log_ignores_a_torn_last_entry(tmp_path: Path) -> None:
    log = tmp_path / "acks.bin"
    log.write_bytes(ACK.pack(3, 10, 20) + ACK.pack(4, 30, 40) + b"\x01\x02")
    assert read_acks(log) == {3: (10, 20), 4: (30, 40)}
    assert read_acks(tmp_path / "none.bin") == {}


def test_kill_point_is_seeded_and_inside_the_window() -> None:
    a = kill_delay_s(7, "postgres", "synchronous_commit=on", 10.0)
    assert a == kill_delay_s(7, "postgres", "synchronous_commit=on", 10.0)
    assert a != kill_delay_s(8, "postgres", "synchronous_commit=on", 10.0)
    assert 2.5 <= a <= 7.5


def _check_cells(results: Results, engine: str) -> None:
    cls = adapter_class(engine)
    by_setting = {r.figures["setting"]: r for r in results.records}
    assert set(by_setting) == set(cls.ingest_durability)
    assert cls.ingest_durable, f"{engine} names no setting that promises durability"
    for setting, rec in by_setting.items():
        f = rec.figures
        assert rec.status == "ok", f"{setting}: {rec.status} {rec.reason}"
        assert f["acknowledged"] > 0 and not f["finished_before_kill"], f
        assert f["changed"] == 0 and f["duplicated"] == 0
        # At most one write per writer was in flight when the kill came.
        assert f["unacknowledged_present"] <= OPTS["durability"]["durability_writers"]
        assert f["recovery_s"] > 0 and f["throughput"] > 0 and f["latency"]["count"] == f["acknowledged"]
        if setting in cls.ingest_durable:
            assert f["lost"] == 0, f"{engine} lost {f['lost']} acknowledged rows under {setting}"
            assert rec.verified
    md = render_markdown(results)
    assert "Durability" in md and all(s in md for s in by_setting)
    page = html.render(results, suites().values())
    assert 'id="chart-beyond-durability"' in page and all(s in page for s in by_setting)


@pytest.mark.slow
def test_embedded_engine_writer_killed(tiny: Dataset, tmp_path: Path) -> None:
    results = _run(tiny, tmp_path / "r", "duckdb")
    _check_cells(results, "duckdb")
    assert results.records[0].figures["killed"].startswith("writer process")
    assert read_results(tmp_path / "r" / "results.json").records == results.records


@pytest.mark.slow
def test_lost_row_under_a_durable_setting_is_wrong(tiny: Dataset, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # Every third write lost: caught even when a loaded machine makes few writes before the kill.
    monkeypatch.setenv(FAULTS_ENV, "duckdb:lose=3")
    rec = _run(tiny, tmp_path / "r", "duckdb").records[0]
    assert rec.status == "wrong" and rec.verified is False
    assert "acknowledged rows lost under default" in rec.reason
    assert rec.figures["lost"] >= 1


@pytest.mark.server
@pytest.mark.parametrize("engine", ["postgres", "timescaledb", "questdb"])
def test_server_killed_and_recovered(engine: str, tiny: Dataset, server_tmp: Path) -> None:
    try:
        adapter_class(engine).probe()
    except EngineUnavailable as exc:
        pytest.skip(f"{engine} is not installed here ({exc}); `tickbench install {engine}`")
    results = _run(tiny, server_tmp / "r", engine)
    _check_cells(results, engine)
    for rec in results.records:
        # The writers saw their server die (a connection error), not a clean end.
        assert rec.figures["killed"].startswith("server processes") and rec.figures["processes_killed"] >= 1
        assert rec.figures["writer_saw"] != "no error"
    left = processes_under(server_tmp)
    assert not left, f"processes left running: {left}"
