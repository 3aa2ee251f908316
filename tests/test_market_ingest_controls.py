"""M-SNAP during ingest with its controls, on real embedded engines at the tiniest scale: every
engine replays the same span of day D, and each cell records the ingest alone and the queries
alone beside it (their during/alone ratios), how its writers and watcher run, and "visible on
commit" for an engine that declares it."""

from __future__ import annotations

import pytest

from tickbench.data.dataset import Dataset
from tickbench.engines.base import MarketIngest
from tickbench.engines.registry import adapter_class, availability
from tickbench.market_params import market_params
from tickbench.results import Record
from tickbench.run.session import Protocol, run
from tickbench.suites.market.during_ingest import VISIBLE_ON_COMMIT, visible_text
from tickbench.suites.market.ingest_ops import ALONE_MIN_QUERIES, MarketReplay
from tickbench.suites.registry import read_results, run_config, suite_options

SEED = 7
MINUTES = 10.0  # D's first 10 minutes: 1,714 events at the tiny scale
RATE = 2_000  # events/s: the span takes about a second, so the users query during it
USERS = 2
BENCH = f"M-SNAP/ingest/rate={RATE}/writers=1"
ENGINES = ("duckdb", "chdb")  # two embedded engines, each its own process rule

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cells(market_tiny: Dataset, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Record]:
    """One during-ingest cell per engine (one run each, the market suite's other cells beside it
    at their smallest)."""
    out: dict[str, Record] = {}
    for engine in ENGINES:
        if not (avail := availability(engine)).available:
            continue
        where = tmp_path_factory.mktemp(f"controls-{engine}") / "run"
        opts = suite_options(users=(1,), ui_users=USERS, ingest_rates=(RATE,), ingest_writers=(1,),
                             ingest_minutes=MINUTES)
        run(run_config(engines=[engine], data=market_tiny.root, out=where, seed=SEED, suite="market", options=opts,
                       protocol=Protocol(repetitions=1, timeout_s=120)))
        out[engine] = next(r for r in read_results(where / "results.json").records if r.benchmark == BENCH)
        assert avail.available
    return out


def _cell(cells: dict[str, Record], engine: str) -> Record:
    if engine not in cells:
        pytest.skip(f"{engine} not available here: {availability(engine).reason}")
    rec = cells[engine]
    assert rec.status == "ok" and rec.verified is True, f"{engine}: {rec.status} {rec.reason}"
    return rec


@pytest.mark.parametrize("engine", ENGINES)
def test_a_cell_records_ingest_alone_and_queries_alone_beside_it(cells: dict[str, Record], engine: str) -> None:
    f = _cell(cells, engine).figures
    # the whole span sent, during the queries and alone
    assert f["written"] == f["planned"] == f["ingest_alone_written"] > 0
    assert f["throughput"] > 0 and f["ingest_alone_events_per_s"] > 0
    assert f["ingest_during_over_alone"] == pytest.approx(f["throughput"] / f["ingest_alone_events_per_s"])
    # queries alone: the same users, at least ALONE_MIN_QUERIES each, beside those during the ingest
    assert f["alone"]["queries"] >= USERS * ALONE_MIN_QUERIES and f["during"]["queries"] > 0
    assert f["query_alone_p50_ms"] == f["alone"]["p50_ms"] > 0
    assert f["query_during_over_alone"] == pytest.approx(f["during"]["p50_ms"] / f["query_alone_p50_ms"])
    assert "after" not in f and "during_over_after" not in f
    # an embedded engine's writers and watcher share its process, and the cell says why
    assert "thread" in f["writers_mode"] and "thread" in f["watcher"]
    assert f["one_process"] and f["one_process"] in (cells[engine].notes or "")


def test_every_engine_replays_the_same_span_of_d(cells: dict[str, Record], market_tiny: Dataset) -> None:
    recs = [_cell(cells, e) for e in ENGINES]
    replay = MarketReplay(market_tiny, market_params(market_tiny, SEED), span_ns=int(MINUTES * 60e9))
    for rec in recs:
        f = rec.figures
        assert f["span_minutes"] == MINUTES
        assert (f["replayed_events"], f["span_start_ns"], f["span_end_ns"]) == (len(replay), replay.open_ns,
                                                                                replay.end_ns)
    # D's first 10 minutes, not a share of the day that depends on the engine's rate
    assert replay.end_ns >= replay.open_ns + int(MINUTES * 60e9) - 1 and len(replay) < replay.total


def test_visible_on_commit_is_recorded_for_an_engine_that_declares_it(cells: dict[str, Record]) -> None:
    for engine in ENGINES:
        f = _cell(cells, engine).figures
        cls = adapter_class(engine)
        declared = issubclass(cls, MarketIngest) and cls.market_ingest_visible_on_commit
        assert f["visible_on_commit"] is declared
        if declared:  # no poll latency: the watcher's own, not the engine's
            assert f["visibility"] is None and visible_text(f) == VISIBLE_ON_COMMIT
        else:
            assert f["visibility"]["count"] > 0 and visible_text(f).endswith(" ms")
    assert cells.get("duckdb") is None or cells["duckdb"].figures["visible_on_commit"] is True


def test_the_span_is_fixed_in_minutes_of_d(market_tiny: Dataset) -> None:
    """MarketReplay's span: every event of D before the open plus the span, and none after."""
    base = market_params(market_tiny, SEED)
    whole = MarketReplay(market_tiny, base)
    for minutes in (1.0, 10.0):
        span = int(minutes * 60e9)
        replay = MarketReplay(market_tiny, base, span_ns=span)
        assert len(replay) == int((whole.event_ts < whole.open_ns + span).sum()) > 0
        assert int(replay.event_ts.max()) < replay.open_ns + span <= replay.end_ns + 1
