"""report.html and report.md: drawn in a real browser, self-contained, every status and the paper.

The browser tests render the page of a real tiny-scale duckdb run (and of five engines derived
from it, to meet every cell status) in headless Chromium with the network blocked, and check
that every chart has drawn marks and no script raised. They skip only when no Chromium is
installed (Debian: ``apt-get install -y chromium``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.synthetic import many_engines
from tickbench.cli import app
from tickbench.report import html, markdown
from tickbench.report.summary import merge
from tickbench.results import Results, read_results
from tickbench.suites.published import BENCHMARKS, QUERY_IDS, paper
from tickbench.suites.published import report as published_report
from tickbench.suites.published.summary import standings
from tickbench.suites.registry import suites

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (apt-get install -y chromium)")

SUITES = suites().values()


@pytest.fixture(scope="module")
def real(tiny_run: Results) -> Results:
    return tiny_run.model_copy(deep=True)


def render_in_chromium(page: Path, profile: Path) -> tuple[str, str]:
    """(DOM after the scripts ran, Chromium's log) for ``page``, with every host unresolvable."""
    assert CHROMIUM is not None
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND", "--enable-logging=stderr",
           "--v=0", "--virtual-time-budget=30000", "--dump-dom", page.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, proc.stderr


def assert_all_charts_drawn(page_html: str, dom: str, log: str) -> int:
    """Every chart in the page's chart data has an SVG with marks; no script error anywhere."""
    spec = re.search(r'<script type="application/json" id="chart-data">(.*?)</script>', page_html, re.S)
    assert spec is not None
    ids = list(json.loads(spec.group(1).replace("<\\/", "</")))
    assert ids, "the page has no chart"
    assert 'data-charts-done="1"' in dom, "the chart script did not finish"
    assert 'data-chart-errors="' not in dom, re.findall(r'data-chart-errors="[^"]*"', dom)
    assert "Uncaught" not in log, [line for line in log.splitlines() if "Uncaught" in line]
    assert not [line for line in log.splitlines() if ":CONSOLE" in line and "rror" in line]
    starts = sorted((dom.index(f'id="{i}"'), i) for i in ids)
    for n, (pos, chart_id) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(dom)
        part = dom[pos:end]
        assert 'data-rendered="1"' in part[:400], f"{chart_id} did not render"
        assert 'class="main-svg"' in part, f"{chart_id} has no SVG"
        marks = re.findall(r'<g class="point"><path d="(M[^"]+)"', part)
        assert any(d != "M0,0Z" for d in marks), f"{chart_id} drew no bar"
    return len(ids)


@pytest.mark.slow
@needs_chromium
def test_report_of_a_real_run_draws_every_chart(real: Results, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    text = html.render(real, SUITES)
    page.write_text(text)
    dom, log = render_in_chromium(page, tmp_path / "profile")
    # one chart per query, W, SE and memory
    assert assert_all_charts_drawn(text, dom, log) == len(QUERY_IDS) + 3
    assert real.dataset.content_hash in dom and "duckdb" in dom
    assert dom.count("<details>") >= len(QUERY_IDS)  # the native query text of every cell


@pytest.mark.slow
@needs_chromium
def test_report_with_every_status_and_the_paper_draws_every_chart(real: Results, tmp_path: Path) -> None:
    many = many_engines(real)
    page = tmp_path / "report.html"
    text = html.render(many, SUITES)
    page.write_text(text)
    dom, log = render_in_chromium(page, tmp_path / "profile")
    assert_all_charts_drawn(text, dom, log)
    for label in ("✘ wrong answer", "⏱ timeout", "not supported", "not applicable", "engine unavailable",
                  "needs an as-of join", paper.PAPER_LABEL, "kdb+ on-disk (≙ kdb)"):
        assert label in dom, label
    assert "<b>not html</b>" not in dom  # reasons are escaped


def test_page_is_self_contained(real: Results) -> None:
    text = html.render(real, SUITES)
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", text)
    assert "<script>" in text and "Plotly" in text


def test_log_scale_only_when_the_spread_needs_it(real: Results) -> None:
    page = html.render(many_engines(real), SUITES)
    charts = json.loads(re.search(r'id="chart-data">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
    # the paper's T-VWAP spans 26 .. 12,716 ms: log; ours spans kdb 0.3x .. timescaledb 5x, min to max
    assert charts["chart-T-VWAP"]["layout"]["yaxis2"]["type"] == "log"
    assert published_report.axis_type([1.0, 2.0, 19.0]) == "linear" and published_report.axis_type([1.0, 21.0]) == "log"
    # the paper's series is on its own axes, never in our trace
    for spec in charts.values():
        for trace in spec["data"]:
            assert (trace.get("name") == paper.PAPER_LABEL) == (trace.get("xaxis") == "x2")


def test_markdown_has_summary_paper_and_rank_tables(real: Results) -> None:
    md = markdown.render(many_engines(real), SUITES)
    assert "## Who is fastest, per category" in md
    assert "- read: **kdb** fastest in 4 of 5" in md
    assert "### Rank order, paper vs ours" in md
    # T-V1: paper kdb 81 < InfluxDB 93 < ClickHouse 272 < TimescaleDB 469; ours influxdb is wrong there
    assert "| T-V1 | kdb < chdb < timescaledb | kdb < chdb < timescaledb | same | 3/3 |" in md
    # T-VWAP: paper kdb 75 < ClickHouse 202 < TimescaleDB 334 < InfluxDB 12,716; ours influxdb is 2nd
    assert ("| T-VWAP | kdb < chdb < timescaledb < influxdb | kdb < influxdb < chdb < timescaledb | differs | 4/6 |"
            in md)
    assert "| W | s (CSV) |" not in md and "| W | ms | 5 |" in md
    assert "```" in md and real.dataset.content_hash in md


def test_fastest_per_category(real: Results) -> None:
    st = standings(many_engines(real))
    assert [s.engine for s in st["complex"]][:2] == ["kdb", "influxdb"]
    assert st["write/storage"][0].engine == "influxdb"
    kdb = next(s for s in st["write/storage"] if s.engine == "kdb")
    assert (kdb.covered, kdb.geomean_vs_best) == (0, None)


def test_paper_figures_are_transcribed() -> None:
    p = paper.load()
    assert set(p.values) == {b.id for b in BENCHMARKS}
    assert p.values["W"]["kdb+ on-disk"] == 33889 and p.values["W"]["ClickHouse"] == 765000
    assert p.values["SE"]["InfluxDB"] == 83.73
    assert p.values["O-S"]["InfluxDB"] == 623732 and p.values["T-V1"]["kdb+ in-memory"] == 57
    assert "kdb+ in-memory" not in p.values["C-VO2"]
    assert p.table_of["O-NBBO"] == "6" and p.table_of["O-V2"] == "7" and p.table_of["C-R"] == "8"
    assert {p.engine_of[s] for s in p.systems} == {"", "kdb", "influxdb", "timescaledb", "chdb"}
    assert "i7-1065G7" in p.machine and p.memory_mb["O-S"]["kdb+ on-disk"] == 588


def test_several_runs_side_by_side(real: Results, tmp_path: Path) -> None:
    other = real.model_copy(update={"run_id": "second"})
    m = merge([real, other])
    assert m.results.engines() == [f"duckdb@{real.run_id}", "duckdb@second"]
    assert not m.warnings
    foreign = other.model_copy(update={"dataset": other.dataset.model_copy(update={"content_hash": "f" * 32})})
    assert "different datasets" in merge([real, foreign]).warnings[0]
    # A run of another suite on another dataset shares no table with it (e.g. a scaling run
    # from SF 0.5 beside the published run at SF 1): no warning.
    scaling = foreign.model_copy(update={"suite": "scaling", "records": [
        rec.model_copy(update={"suite": "scaling", "benchmark": f"scaling/{rec.benchmark}"})
        for rec in foreign.records]})
    assert not merge([real, scaling]).warnings
    a, b = tmp_path / "a" / "results.json", tmp_path / "b" / "results.json"
    real.write(a)
    other.write(b)
    res = CliRunner().invoke(app, ["report", str(a), str(b), "--out", str(tmp_path / "both")])
    assert res.exit_code == 0, res.output
    page = (tmp_path / "both" / "report.html").read_text()
    assert f"duckdb@{real.run_id}" in page and "duckdb@second" in page
    assert "duckdb@second" in (tmp_path / "both" / "report.md").read_text()
    assert read_results(a).run_id == real.run_id


def test_the_market_section_keeps_the_in_memory_reference_apart_and_unavailable_engines_out(
        tmp_path: Path) -> None:
    """The market reference run (kdb+ unavailable, Polars in memory): Polars' column comes last,
    labelled the in-memory reference, and kdb+ is a line under the table, not a column."""
    kept = Path(__file__).parent.parent / "docs" / "results" / "market-2026-11-26" / "market-sf1.json"
    results = read_results(kept)
    assert "kdb" in results.unavailable() and "polars" in results.engines()
    md = markdown.render(results, SUITES)
    market = md.split("## The market suite")[1]
    header = next(line for line in market.splitlines() if line.startswith("| query |"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert columns[-1] == "polars (in-memory reference)", columns
    assert "kdb" not in columns and "Not available here: kdb" in market
    assert "polars: the in-memory reference, shown apart and never ranked" in market
    page = html.render(results, SUITES)
    head = page.split("<table id='table-market'>")[1].split("</tr>")[0]
    assert head.endswith("<th>polars (in-memory reference)</th>") and "<th>kdb</th>" not in head, head
