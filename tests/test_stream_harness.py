"""The stream suite's harness: the sink offers far more than the tests' writer configurations
need, and the client-bound mark tells a slow engine from a slow client."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from tests.synthetic import report_markdown as render_beyond
from tickbench.data.dataset import Dataset
from tickbench.results import read_results
from tickbench.run.cell import Protocol
from tickbench.run.faults import FAULTS_ENV
from tickbench.run.session import run
from tickbench.suites.harness import Destination, Plan, Sink, SinkTarget, batch_size, bound, run_writers
from tickbench.suites.registry import run_config, suite_options

#: The stream cells the tests run (tests/test_suites_beyond.py and below): (rate, writers).
TEST_CELLS = ((2000, 1), (200, 1), (400, 1))
MAX_BATCH, LINGER = 1000, 0.01


def _plan(events: int, batch: int, writers: int) -> Plan:
    book = pa.table({"ts": pa.array(np.arange(events), pa.int64()), "price": pa.array(np.linspace(1, 2, events))})
    return Plan.build({"book": book}, np.zeros(events, np.int8), batch, writers)


@pytest.mark.slow
def test_sink_offers_ten_times_what_the_tests_need() -> None:
    # Each configuration's batch size and writer count, as fast as possible into the loopback
    # sink through writer processes: the offered rate must be ≥ 10× the cell's target rate.
    with Sink() as sink:
        target = SinkTarget(sink.port)
        for rate, writers in TEST_CELLS:
            batch = batch_size(rate, MAX_BATCH, LINGER)
            plan = _plan(20 * rate, batch, writers)
            result = run_writers(target, Destination("sink", sink.port), plan, None, 10.0)
            assert not result.errors, result.errors
            assert result.rows(plan) == plan.total_rows
            offered = result.rate(plan)
            assert offered >= 10 * rate, (rate, batch, offered)


@pytest.mark.slow
def test_slow_sink_is_the_engines_limit_and_slow_writer_is_client_bound() -> None:
    plan = _plan(400, 2, 1)
    with Sink() as fast, Sink(delay=0.005) as slow:
        # The slowed sink plays the engine: far below the ceiling of the same writers.
        ceiling = run_writers(SinkTarget(fast.port), Destination("sink", fast.port), plan, None, 10.0).rate(plan)
        engine = run_writers(SinkTarget(slow.port), Destination("engine"), plan, None, 10.0).rate(plan)
        assert engine < ceiling / 4 and not bound(engine, ceiling), (engine, ceiling)
        # A slowed writer slows the ceiling as much as the engine: client-bound.
        dest = Destination("sink", fast.port, writer_delay=0.005)
        ceiling = run_writers(SinkTarget(fast.port), dest, plan, None, 10.0).rate(plan)
        engine = run_writers(SinkTarget(fast.port), Destination("engine", writer_delay=0.005), plan, None,
                             10.0).rate(plan)
        assert bound(engine, ceiling), (engine, ceiling)


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "client_bound"), [("ack_delay=0.05", False), ("writer_delay=0.05", True)])
def test_stream_cell_marks_client_bound(tiny: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        fault: str, client_bound: bool) -> None:
    # Writes of 4 events as fast as possible for 1 s. A 50 ms delay per
    # acknowledgement (a slower engine) or per send (a slower client) caps the cell near 80
    # events/s either way; only the slow client slows the harness ceiling too.
    monkeypatch.setenv(FAULTS_ENV, f"duckdb:{fault}")
    out = tmp_path / "r"
    run(run_config(engines=["duckdb"], data=tiny.root, out=out, seed=7, suite="stream",
                  protocol=Protocol(warmup=1, repetitions=1, timeout_s=120, load_timeout_s=300), verify_dataset=False,
                  options=suite_options(stream_rates=(None,), stream_writers=(1,), stream_seconds=1.0,
                                        stream_max_batch=4)))
    saved = read_results(out / "results.json")
    rec = saved.records[0]
    f = rec.figures
    assert rec.status == "ok", rec.reason
    assert f["ceiling"] > 0 and f["bulk_rate"] > 0 and f["pct_of_bulk"] is not None
    assert f["client_bound"] is client_bound, (f["throughput"], f["ceiling"])
    assert ("client-bound" in rec.notes) is client_bound
    assert ("(client-bound)" in render_beyond(saved)) is client_bound


@pytest.mark.slow
@pytest.mark.parametrize(("engine", "path"), [("chdb", "FORMAT ArrowStream"), ("arcticdb", "Library.append"),
                                            pytest.param("influxdb", "POST /write", marks=pytest.mark.server),
                                            pytest.param("postgres", "binary COPY", marks=pytest.mark.server)])
def test_engines_stream_on_their_own_path(tiny: Dataset, tmp_path: Path, engine: str, path: str) -> None:
    """chDB streams Arrow IPC inserts, ArcticDB per-instrument frame appends, InfluxDB line
    protocol POSTs and PostgreSQL binary COPYs, each payload made before the clock (not row tuples through the generic
    ingest client); every row sent is read back, from two writers at once (InfluxDB: trades tied
    on a timestamp from both writers all survive as points)."""
    from tickbench.engines.registry import availability

    if not availability(engine).available:
        pytest.skip(f"{engine} not available here: {availability(engine).reason}")
    out = tmp_path / "r"
    run(run_config(engines=[engine], data=tiny.root, out=out, seed=7, suite="stream",
                  protocol=Protocol(warmup=1, repetitions=1, timeout_s=120, load_timeout_s=300), verify_dataset=False,
                  options=suite_options(stream_rates=(2000, None), stream_writers=(2,), stream_seconds=1.0)))
    for rec in read_results(out / "results.json").records:
        f = rec.figures
        assert rec.status == "ok", (rec.benchmark, rec.reason)
        assert path in f["path"], f["path"]
        assert f["written"] == f["read"] == f["counted"] > 0 and f["read_by_table"] == f["written_by_table"]


def test_a_plan_keeps_the_events_of_one_key_in_one_payload_per_table() -> None:
    # Two tables interleaved in time; several events share a ts, across the batch edges.
    ts = np.array([1, 2, 2, 2, 3, 4, 4, 5, 6, 6, 6, 6, 7], np.int64)
    which = np.array([0, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 1, 0], np.int8)
    tables = {name: pa.table({"ts": pa.array(ts[which == c])}) for c, name in enumerate(("quotes", "trades"))}
    plan = Plan.build(tables, which, 2, 2, together=ts)
    assert plan.total_rows == len(ts) and sorted(int(e) for ev in plan.events for e in ev) == list(range(len(ts)))
    for t in tables:
        owner: dict[int, int] = {}
        for k in range(len(plan)):
            if plan.table[k] != t:
                continue
            for v in tables[t].column("ts").to_pylist()[int(plan.offset[k]):int(plan.offset[k] + plan.rows[k])]:
                assert owner.setdefault(v, k) == k, f"{t}: ts {v} split across payloads"
    # Without the key the same batches cut ts 2 and ts 6 apart: the check above would fail.
    loose = Plan.build(tables, which, 2, 2)
    assert len({int(loose.last[k]) for k in range(len(loose))}) > len({int(plan.last[k]) for k in range(len(plan))})
