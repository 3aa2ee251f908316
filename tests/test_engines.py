"""Every engine × every benchmark against the reference, through the real runner, at tiny
scale. An engine that is not installed here is skipped with the reason and the command that
installs it (CI installs every installable engine first, so there nothing is skipped but
engines that need a licence)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.conftest import TINY_SEED
from tickbench.data.dataset import Dataset
from tickbench.datasets.paper import reference
from tickbench.datasets.paper.params import query_params
from tickbench.engines.base import EngineTime
from tickbench.engines.registry import adapter_class, availability, engine_infos
from tickbench.results import read_results
from tickbench.run.cell import Protocol
from tickbench.run.session import run
from tickbench.suites import market
from tickbench.suites.cells import missing
from tickbench.suites.market import QUERY_IDS as MARKET_IDS
from tickbench.suites.published import BY_ID, QUERIES, QUERY_IDS
from tickbench.suites.registry import run_config, suites


def _engine_params() -> list[object]:
    out = []
    for name, info in engine_infos().items():
        marks = [pytest.mark.slow]
        if info.kind == "server":
            marks.append(pytest.mark.server)
        out.append(pytest.param(name, marks=marks, id=name))
    return out


@pytest.mark.parametrize("engine", _engine_params())
def test_published_suite_verifies(engine: str, tiny: Dataset, tmp_path: Path) -> None:
    avail = availability(engine)
    if not avail.available:
        pytest.skip(f"{engine} not available here: {avail.reason}")
    info = engine_infos()[engine]
    out = tmp_path / "run"
    cfg = run_config(engines=[engine], data=tiny.root, out=out, seed=TINY_SEED,
                    protocol=Protocol(warmup=1, repetitions=2, timeout_s=120, save_answers=out / "answers"))
    run(cfg)
    results = read_results(out / "results.json")  # also validates the schema
    assert results.dataset.content_hash == tiny.manifest.content_hash
    params = query_params(tiny.params, TINY_SEED)
    by_id = {r.benchmark: r for r in results.records}
    assert set(by_id) == set(BY_ID)
    for q in QUERIES:
        rec = by_id[q.id]
        if q.id in info.unsupported:
            assert rec.status == "unsupported" and rec.reason
            continue
        assert rec.status == "ok", f"{q.id}: {rec.status} {rec.reason}"
        assert rec.verified is True
        assert rec.stats is not None and len(rec.samples_ns) == 2 and min(rec.samples_ns) > 0
        if issubclass(adapter_class(engine), EngineTime):  # its own time of each repetition, within the client's
            assert len(rec.server_samples_ns) == 2, f"{q.id}: server times {rec.server_samples_ns}"
            assert all(0 < s <= c for s, c in zip(rec.server_samples_ns, rec.samples_ns, strict=True)), q.id
        assert rec.query is not None and rec.query.text.strip()
        if info.plan_word:  # the engine's own plan of this query, taken outside the clock
            assert info.plan_word in rec.plan and "&nbsp;" not in rec.plan and "&gt;" not in rec.plan, \
                f"{q.id}: plan {rec.plan[:300]!r}"
        saved = pl.read_parquet(out / "answers" / engine / f"{q.id}.parquet")
        expected = reference.answer(q.id, tiny, params)
        assert saved.columns == list(q.columns)
        assert saved.height == expected.height
    for bench in ("W", "SE"):
        rec = by_id[bench]
        if bench in info.unsupported:
            assert rec.status == "not_applicable" and rec.reason
        else:
            assert rec.status == "ok", f"{bench}: {rec.status} {rec.reason}"
    if "W" not in info.unsupported:
        w = by_id["W"].figures
        assert w["clock_stops"] == info.w_clock  # the engine's statement of where W's clock stopped
        rows = sum(v["rows"] for v in tiny.manifest.csv.values())
        for fmt in ("csv", "parquet"):
            assert w[fmt]["rows"] == rows and w[fmt]["seconds"] > 0 and w[fmt]["baseline_seconds"] > 0
            if issubclass(adapter_class(engine), EngineTime):  # these engines' W states its durability setting
                assert w[fmt]["detail"].get("durability"), w[fmt]["detail"]
    if "SE" not in info.unsupported:
        se = by_id["SE"].figures
        assert se["engine_bytes"] > 0 and 0 < se["pct_of_csv"] < 1000
        # the same split on every engine: data and index make the figure, the log is beside it
        assert se["data_bytes"] > 0 and se["engine_bytes"] == se["data_bytes"] + se["index_bytes"]
        assert se["log_bytes"] >= 0


def test_every_engine_with_w_states_where_its_clock_stops() -> None:
    """SPEC §2.1: W stops at committed and queryable for every engine; each says what that is on
    it and what it still does after (engine.toml's w_clock, in the README's generated table)."""
    for name, info in engine_infos().items():
        if missing(adapter_class(name), info, "W") is None:
            assert len(info.w_clock) > 40 and "after" in info.w_clock, f"{name}: w_clock {info.w_clock!r}"


def test_unsupported_entries_name_real_benchmarks() -> None:
    for name, info in engine_infos().items():
        for bench, reason in info.unsupported.items():
            known = bench in BY_ID or bench in suites() or bench.split("/")[0] in (*MARKET_IDS, *market.LOADS)
            assert known, f"{name}: [unsupported] names unknown benchmark {bench}"
            assert reason.strip(), f"{name}: {bench} unsupported without a reason"
        for qid in QUERY_IDS:
            if qid not in info.unsupported:
                assert info.query_file(qid).is_file(), f"{name}: no query file for {qid}"
