"""README's headline is generated from a run's results: every cell, where each engine's time
went, and the paper beside it by rank order and ratio (never by value)."""

from __future__ import annotations

import re

import pytest

from tests.synthetic import many_engines, report_markdown, scaled
from tickbench.docs import replace_block
from tickbench.report import html
from tickbench.report.cells import transport_bound
from tickbench.results import Record, Results, Stats
from tickbench.suites.published import BENCHMARKS, QUERY_IDS, headline, paper
from tickbench.suites.published.summary import standings
from tickbench.suites.registry import suites


@pytest.fixture(scope="module")
def real(tiny_run: Results) -> Results:
    return tiny_run.model_copy(deep=True)


def test_the_runner_records_where_each_engine_time_went(real: Results) -> None:
    phases = real.environment.engines["duckdb"]["phase_seconds"]
    assert {"start", "load", "W", "SE", *QUERY_IDS} <= set(phases)
    assert all(v >= 0 for v in phases.values())
    assert phases["load"] > 0


def test_headline_has_every_cell_every_engine_and_the_paper_by_rank(real: Results) -> None:
    many = many_engines(real)
    text = headline.render(many, "make run-paper", "nothing else running")
    for b in BENCHMARKS:
        assert re.search(rf"^\| {re.escape(b.id)} \|", text, re.M), b.id
    for e in many.engines():
        assert f"| {e} |" in text
    assert "✘ wrong" in text and "⏱ timeout" in text  # failures show as failures, not times
    # each side ranks its own figures; ours are duckdb's × 0.3 (kdb), 0.5 (influxdb), 2 (chdb), 5
    # (timescaledb), so their ratios to the fastest are fixed whatever duckdb measured
    rows = [line for line in text.splitlines() if line.startswith("| T-V2 |")]
    assert len(rows) == 2  # the cell row and the beside-the-paper row
    beside = rows[1]
    ours = beside.split(" | ")[3]
    assert ours == "kdb 1× < influxdb 1.67× < chdb 6.67× < timescaledb 16.7×", ours
    assert paper.PAPER_LABEL in text and "make run-paper" in text and "nothing else running" in text
    assert not re.search(r"^All \d+ engines: ", text, re.M)  # one engine with phases: no sum
    # two engines with phases: the whole reference run's time, summed over the engines' totals
    phases = real.environment.engines["duckdb"]["phase_seconds"]
    engines = {**many.environment.engines, "chdb": {"phase_seconds": {k: 2 * v for k, v in phases.items()}}}
    two = many.model_copy(update={"environment": many.environment.model_copy(update={"engines": engines})})
    total = headline._minutes(3 * sum(phases.values()))
    assert f"All 2 engines: {total} in all" in headline.render(two, "make run-paper", "quiet")


def test_an_engine_not_available_here_is_a_line_not_a_column(real: Results) -> None:
    why = ("not available: kdb+ needs a licence from KX (pykx is not installed); to enable: get a licence from KX, "
           "`pip install pykx` …")
    gone = [r.model_copy(update={"engine": "kdb", "status": "unavailable", "reason": why, "stats": None,
                                 "samples_ns": [], "figures": {}, "verified": None}) for r in real.records]
    both = real.model_copy(update={"records": [*real.records, *gone]})
    text = headline.render(both, "make run-paper", "quiet")
    header = next(line for line in text.splitlines() if line.startswith("| benchmark |"))
    assert header == "| benchmark | duckdb |"
    assert "| kdb |" not in text
    assert ("Not available here, so not run: kdb (kdb+ needs a licence from KX (pykx is not installed); "
            "how to enable it: `tickbench engines`).") in text


def test_headline_replaces_only_its_block() -> None:
    text = f"intro\n{headline.START}\nold\n{headline.END}\nrest\n"
    out = replace_block(text, headline.START, headline.END, "new")
    assert out == f"intro\n{headline.START}\nnew\n{headline.END}\nrest\n"
    with pytest.raises(ValueError, match="markers"):
        replace_block("no markers", headline.START, headline.END, "new")


def test_engine_readme_plans_come_from_the_run_records(real: Results) -> None:
    """Each verified query keeps the engine's own plan; an engine README's plans block is
    rendered from those records (the run, its dataset and the query's median named)."""
    from tickbench.report import plans

    rec = real.record("duckdb", "O-T")
    assert rec is not None and rec.status == "ok" and "TABLE_SCAN" in rec.plan
    text = plans.render(real, "duckdb", ["O-T", "C-VO1"], "make run-paper")
    assert text is not None
    assert "**O-T**" in text and "**C-VO1**" in text and real.run_id in text
    assert rec.plan.strip().splitlines()[0] in text
    assert plans.render(real, "duckdb", ["no-such-query"], "x") is None  # the README block stays
    long = "\n".join(f"line {i}" for i in range(plans.MAX_LINES + 7))
    assert plans.clip(long).endswith("(7 more lines in results.json)")


def test_every_engine_with_plans_has_the_readme_block() -> None:
    """`python -m tickbench.docs --plans` can write every engine that explains its queries."""
    from tickbench.engines.base import Engine
    from tickbench.engines.registry import adapter_class, engine_infos
    from tickbench.report import plans

    explaining = [n for n in engine_infos() if adapter_class(n).explain is not Engine.explain]
    assert {"duckdb", "chdb", "postgres", "questdb"} <= set(explaining)
    for name in explaining:
        text = (engine_infos()[name].folder / "README.md").read_text()
        assert plans.START in text and plans.END in text, name
        # and the market suite's block (--market-plans), each pair once and in order
        assert text.count(plans.MARKET_START) == 1 and text.count(plans.MARKET_END) == 1, name
        assert text.index(plans.MARKET_START) < text.index(plans.MARKET_END), name


def test_headline_shows_point_lookups_from_a_scaling_run_of_the_same_engine(real: Results) -> None:
    """A published run and a scaling run of one engine merge under the engine's own name (they
    hold different benchmarks), and the headline gains the lookups' slopes against history."""
    from tickbench.report.summary import merge
    from tickbench.results import Record

    points = [{"scale": 1.0, "span": span, "days": days, "rows_read": rows, "rows": 10, "samples_ns": [ms * 10**6],
               "median_ms": float(ms)} for span, days, rows, ms in
              (("day", 1, 10**6, 40), ("week", 7, 7 * 10**6, 41), ("month", 30, 30 * 10**6, 45))]
    flat = [{**p, "rows_read": 10**6} for p in points]
    scaling = real.model_copy(update={"run_id": "scaling-run", "suite": "scaling", "records": [
        Record(engine="duckdb", benchmark="scaling/O-T", suite="scaling", category="read", status="ok",
               verified=True, figures={"points": points, "slope": 0.03, "slope_by_scale": {"1": 0.03}}),
        Record(engine="duckdb", benchmark="scaling/O-NBBO", suite="scaling", category="read", status="ok",
               verified=True, figures={"points": flat, "slope": None, "slope_by_scale": {"1": None}}),
    ]})
    env = real.environment
    scaling.environment = env.model_copy(update={"engines": {"duckdb": {"phase_seconds": {"scaling/O-T": 1.0}}}})
    merged = merge([scaling, real])
    assert merged.results.engines() == ["duckdb"] and not merged.warnings
    # the published run's figures describe the engine, whichever run came first
    assert merged.results.environment.engines["duckdb"] == env.engines["duckdb"]
    text = headline.render(merged.results, "make run-paper", "quiet")
    row = next(line for line in text.splitlines() if line.startswith("| duckdb | 0.03"))
    assert "0.03 ✔" in row and "1: 40.0 → 41.0 → 45.0" in row and "| – |" in row
    assert "scaling suite at SF 1:" in text and "only a second scale factor gives its slope" in text

    # A second scale factor: O-NBBO gets a slope across scales, and each cell groups its points by scale.
    half = [{**p, "scale": 0.5, "rows_read": 5 * 10**5, "median_ms": 39.0} for p in flat]
    two = scaling.model_copy(update={"records": [
        scaling.records[0],
        scaling.records[1].model_copy(update={"figures": {"points": half + flat, "slope": 0.04,
                                                          "slope_by_scale": {"0.5": None, "1": None}}}),
    ]})
    text = headline.render(merge([two, real]).results, "make run-paper", "quiet")
    row = next(line for line in text.splitlines() if line.startswith("| duckdb | 0.03"))
    assert "| 0.04 ✔ | 0.5: 39.0 → 39.0 → 39.0 · 1: 40.0 → 41.0 → 45.0 |" in row, row
    assert "scaling suite at SF 0.5 and 1:" in text and "differ by scale factor only" in text


def _with_server_time(rec: Record, client_ms: float, server_ms: float) -> Record:
    samples = [int(client_ms * 1e6)] * 3
    return rec.model_copy(update={"samples_ns": samples, "stats": Stats.of(samples),
                                  "server_samples_ns": [int(server_ms * 1e6)] * 3})


def test_transport_bound_cells_are_marked_with_their_gap(real: Results) -> None:
    """A cell whose client time exceeds the engine's own by more than max(20 %, 5 ms) is marked,
    with the gap, in the README headline and both reports; one within either bound is not."""
    by_id = {r.benchmark: r for r in real.records}
    crafted = [_with_server_time(by_id["O-S"], 100.0, 70.0),  # 30 ms, 30 %: marked
               _with_server_time(by_id["T-V1"], 100.0, 85.0),  # 15 ms but 15 %: not
               _with_server_time(by_id["O-T"], 10.0, 6.0)]  # 40 % but 4 ms: not
    records = [next((c for c in crafted if c.benchmark == r.benchmark), r) for r in real.records]
    results = real.model_copy(update={"records": records})
    assert [transport_bound(r) for r in crafted] == [True, False, False]
    text = headline.render(results, "make run-paper", "quiet")
    row = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert "⚠ transport-bound (+30.0 ms)" in row["O-S"]
    assert "transport-bound" not in row["T-V1"] and "transport-bound" not in row["O-T"]
    md = report_markdown(results)
    assert md.count("⚠ transport-bound (+30.0 ms)") >= 1 and "(+15.0 ms)" not in md
    assert "⚠ transport-bound (+30.0 ms)" in html.render(results, suites().values())


def test_an_in_memory_engine_is_ranked_apart(real: Results) -> None:
    """Polars (kind in-memory) faster than every database on every query is shown as the
    in-memory reference and never ranked among the fastest."""
    many = many_engines(real)
    fast = [scaled(r, 0.01, "polars") for r in real.records if r.engine == "duckdb"]
    engines = {**many.environment.engines, "polars": {"available": True, "kind": "in-memory"}}
    results = many.model_copy(update={"records": [*many.records, *fast],
                                      "environment": many.environment.model_copy(update={"engines": engines})})
    assert all("polars" not in [s.engine for s in rows] for rows in standings(results).values())
    text = headline.render(results, "make run-paper", "quiet")
    assert "polars (in-memory reference)" in text.splitlines()[2] and "never ranked" in text
    md = report_markdown(results)
    assert "polars (in-memory reference)" in md and "Ranked apart as the in-memory reference: polars" in md
