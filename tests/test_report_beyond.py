"""The suites beyond the paper in report.html: an HTML table per suite (every record a row, a
cell that is not ok with its status and reason) and plotly charts of the ok cells (percentile
spectra from the HDR histograms, throughput and p99 against clients, latency against rows read).

The fast tests use records built by hand around real HDR histograms, for the edge paths (not-ok
cells, a suite with no ok cell, hostile text); the slow ones run the four suites on DuckDB at
tiny sizes, as tests/test_suites_beyond.py does, and draw the page in headless Chromium.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from tests.synthetic import report_markdown as render_beyond
from tests.test_report import CHROMIUM, needs_chromium, render_in_chromium
from tests.test_suites_beyond import _run
from tickbench import latency
from tickbench.data.dataset import Dataset
from tickbench.report import html, markdown
from tickbench.report import widgets as beyond_html
from tickbench.results import DatasetInfo, Environment, Record, Results, Status
from tickbench.suites.durability.report import render_durability
from tickbench.suites.registry import suite_options, suites

HOSTILE = "<b>not html</b> & | pipe"
SUITE_CHARTS = {
    "tick-latency": ["chart-beyond-tick-latency"],
    "stream": ["chart-beyond-stream-latency", "chart-beyond-stream-visibility", "chart-beyond-stream-snapshot"],
    "concurrency": ["chart-beyond-concurrency"],
    "scaling": ["chart-beyond-scaling"],
}

SUITES = suites().values()


# -- helpers ------------------------------------------------------------------------------

def _summary(n: int, median_us: float, seed: int = 1) -> dict[str, Any]:
    rng = random.Random(seed)
    h = latency.new()
    for _ in range(n):
        latency.record(h, int(rng.lognormvariate(0, 0.7) * median_us * 1e3))
    return latency.summary(h)


def _results(records: list[Record]) -> Results:
    return Results(
        run_id="synthetic", created="2025-01-01T00:00:00Z", suite="all", seed=7, repetitions=1, timeout_s=60,
        dataset=DatasetInfo(root="/nowhere", content_hash="0" * 32, scale=0.01, seed=7, symbols=0,
                            source="generated", generator_version="1"),
        params={}, environment=Environment(cpu="cpu", cores=2, memory_bytes=2**30, os="linux", python="3.11",
                                           tickbench_version="0"),
        records=records)


def _tick(engine: str, mode: str = "single", status: Status = "ok", reason: str = "") -> Record:
    figures: dict[str, Any] = {"x": 2, "y": 500, "mode": mode, "batch": 1 if mode == "single" else 100,
                               "events": 1000}
    if status == "ok":
        figures |= {"write_s_mean": 1.0, "write_s_std": 0.1, "read_s_mean": 0.1, "read_s_std": 0.0,
                    "events_per_s": 1000.0, "latency": _summary(1000, 800)}
    return Record(engine=engine, benchmark=f"tick-latency/X=2,Y=500/{mode}", suite="tick-latency",
                  category="tick-latency", status=status, reason=reason, figures=figures)


def _stream(engine: str, rate: str, status: Status = "ok", reason: str = "") -> Record:
    figures: dict[str, Any] = {"rate": rate, "writers": 1}
    if status == "ok":
        figures |= {"written": 4000, "throughput": 1990.0, "latency": _summary(4000, 15_000),
                    "service": _summary(4000, 5_000, 2), "visibility": _summary(3000, 3_000, 3),
                    "snapshot_during": _summary(20, 3_000, 4), "snapshot_after": {"count": 0, "hdr": ""}}
    return Record(engine=engine, benchmark=f"stream/rate={rate}/writers=1", suite="stream", category="stream",
                  status=status, reason=reason, figures=figures)


def _concurrency(engine: str, clients: int, status: Status = "ok", reason: str = "") -> Record:
    figures: dict[str, Any] = {"clients": clients, "model": "threads"}
    if status == "ok":
        figures |= {"qps": 100.0 * clients ** 0.5, "latency": _summary(500, 5_000 * clients, clients)}
    return Record(engine=engine, benchmark=f"concurrency/clients={clients}", suite="concurrency",
                  category="concurrency", status=status,
                  reason=reason, figures=figures)


def _scaling(engine: str, qid: str, status: Status = "ok", reason: str = "") -> Record:
    figures: dict[str, Any] = {}
    if status == "ok":
        points = [{"scale": s, "span": span, "rows_read": rows, "median_ms": rows ** 0.5 / 10}
                  for s, span, rows in ((0.01, "day", 5000), (0.01, "week", 40_000), (0.02, "day", 10_000))]
        figures = {"points": points, "slope": 0.5}
    return Record(engine=engine, benchmark=f"scaling/{qid}", suite="scaling", category="scaling", status=status,
                  reason=reason, figures=figures)


def _charts(page: str) -> dict[str, Any]:
    spec = re.search(r'<script type="application/json" id="chart-data">(.*?)</script>', page, re.S)
    assert spec is not None
    charts: dict[str, Any] = json.loads(spec.group(1).replace("<\\/", "</"))
    return charts


def _table_rows(page: str, suite: str) -> list[str]:
    table = re.search(rf"<table class='beyond' id='table-beyond-{suite}'>(.*?)</table>", page, re.S)
    assert table is not None, f"no table for {suite}"
    return re.findall(r"<tr class='(?:ok|notok)'>(.*?)</tr>", table.group(1), re.S)


# -- fast: synthetic records --------------------------------------------------------------

def test_spectrum_matches_the_histogram() -> None:
    s = _summary(10_000, 1_000)
    spec = beyond_html.spectrum(s["hdr"])
    assert spec is not None
    xs, ys, labels = spec
    h = latency.decode(s["hdr"])
    for nines, pct in ((1, 90.0), (2, 99.0), (3, 99.9)):
        i = round(nines / beyond_html.NINES_STEP)
        assert xs[i] == pytest.approx(nines) and labels[i] == f"{pct:g}"
        assert ys[i] == h.get_value_at_percentile(pct) / 1e6
    assert ys[0] == h.get_min_value() / 1e6 and ys[-1] == h.get_max_value() / 1e6
    assert labels[-1].endswith("(max)") and xs[-1] == pytest.approx(4.0)
    assert ys == sorted(ys)
    assert beyond_html.spectrum("") is None
    assert beyond_html.spectrum(_summary(1, 10)["hdr"]) is not None
    assert [beyond_html.percentile_label(x) for x in (0, 1, 2, 3, 4)] == ["0", "90", "99", "99.9", "99.99"]


def test_every_suite_has_a_table_and_charts_and_not_ok_cells_only_in_the_table() -> None:
    records = [
        _tick("duckdb"), _tick("duckdb", "batch"), _tick("chdb", "single", "error", HOSTILE),
        _stream("duckdb", "2000"), _stream("duckdb", "max", "wrong", "4000 rows acknowledged, 3999 read back"),
        _concurrency("duckdb", 1), _concurrency("duckdb", 2), _concurrency("duckdb", 4, "timeout", "cell timed out"),
        _scaling("duckdb", "T-V1"), _scaling("duckdb", "O-NBBO", "unsupported", "needs an as-of join"),
    ]
    page = html.render(_results(records), SUITES)
    charts = _charts(page)
    for ids in SUITE_CHARTS.values():
        for chart_id in ids:
            assert f'id="{chart_id}"' in page and chart_id in charts, chart_id
    assert '<a href="#beyond">' in page and "<pre class=\"beyond\">" not in page
    assert [len(_table_rows(page, s)) for s in SUITE_CHARTS] == [3, 2, 3, 2]
    # not-ok cells: status and (escaped) reason in their row, nowhere in a chart
    assert "needs an as-of join" in _table_rows(page, "scaling")[1]
    assert "cell timed out" in _table_rows(page, "concurrency")[2] and "timeout" in _table_rows(page, "concurrency")[2]
    assert "&lt;b&gt;not html&lt;/b&gt; &amp; | pipe" in _table_rows(page, "tick-latency")[2]
    assert "<b>not html</b>" not in page
    tick = charts["chart-beyond-tick-latency"]["data"]
    assert [t["name"] for t in tick] == ["duckdb · X=2 Y=500 · one per write", "duckdb · X=2 Y=500 · batch of 100"]
    assert charts["chart-beyond-tick-latency"]["layout"]["yaxis"]["type"] == "log"
    assert charts["chart-beyond-tick-latency"]["layout"]["xaxis"]["ticktext"][:4] == ["0", "90", "99", "99.9"]
    stream = charts["chart-beyond-stream-latency"]["data"]
    assert len(stream) == 2 and all("max" not in t["name"] for t in stream)  # ok cell: latency and service
    assert len(charts["chart-beyond-stream-snapshot"]["data"]) == 1  # an empty histogram draws no line
    conc = charts["chart-beyond-concurrency"]
    qps = [t for t in conc["data"] if t.get("yaxis") != "y2"]
    assert [t["x"] for t in qps] == [[1, 2]] and conc["layout"]["xaxis"]["type"] == "log"
    assert conc["layout"]["xaxis"]["tickvals"] == [1, 2]
    scaling = charts["chart-beyond-scaling"]
    assert [t["name"] for t in scaling["data"] if t.get("showlegend", True)] == ["T-V1 · slope 0.50"]
    fit = next(t for t in scaling["data"] if t["mode"] == "lines")
    assert fit["y"][1] / fit["y"][0] == pytest.approx((fit["x"][1] / fit["x"][0]) ** 0.5)
    assert (scaling["layout"]["xaxis"]["type"], scaling["layout"]["yaxis"]["type"]) == ("log", "log")


def test_suite_without_an_ok_cell_has_its_table_and_no_chart() -> None:
    records = [_tick("duckdb", "single", "unsupported", "no ingest capability implemented"),
               _tick("duckdb", "batch", "unsupported", "no ingest capability implemented"),
               _concurrency("duckdb", 1, "error", "engine did not start or load: boom"),
               _stream("duckdb", "2000")]
    page = html.render(_results(records), SUITES)
    charts = _charts(page)
    assert not [c for c in charts if c.startswith("chart-beyond-tick") or c.startswith("chart-beyond-conc")]
    assert "chart-beyond-stream-latency" in charts
    assert len(_table_rows(page, "tick-latency")) == 2 and len(_table_rows(page, "concurrency")) == 1
    assert page.count("No chart: no cell finished ok") == 2
    assert "engine did not start or load: boom" in page
    assert "table-beyond-scaling" not in page  # a suite that did not run has no section


def test_page_without_beyond_records_has_no_section() -> None:
    page = html.render(_results([Record(engine="duckdb", benchmark="T-V1", suite="published", category="read",
                                        status="unsupported", reason="x")]), SUITES)
    assert 'id="beyond"' not in page and '<a href="#beyond">' not in page


def test_markdown_keeps_its_tables() -> None:
    records = [_tick("duckdb"), _tick("chdb", "single", "error", HOSTILE), _stream("duckdb", "2000"),
               _concurrency("duckdb", 2), _scaling("duckdb", "T-V1")]
    md = render_beyond(_results(records))
    assert "| duckdb | 2 | 500 | one per write | 1.000 ± 0.100 | 0.100 ± 0.000 | 1,000 |" in md
    # a reason keeps the row, literal: no raw HTML, its pipe escaped (report.md as report.html)
    assert "| chdb | 2 | 500 | one per write | error: \\<b>not html\\</b> & \\| pipe |" in md
    assert "| duckdb | 2 | threads | 141.4 |" in md
    assert ("| duckdb | T-V1 | 0.50 | 0.01 day: 5,000 → 7.07; 0.01 week: 40,000 → 20.00; "
            "0.02 day: 10,000 → 10.00 |") in md
    width = 0
    for line in md.splitlines():  # every row as wide as its table's header
        cells = len(re.split(r"(?<!\\)\|", line)) - 2
        if line.startswith("| engine "):
            width = cells
        elif line.startswith("| "):
            assert cells == width, line
    assert "## Streaming ingest" in markdown.render(_results(records), SUITES)


def test_durability_is_converted_to_html() -> None:
    rec = Record(engine="duckdb", benchmark="durability/wal-sync", suite="durability", category="durability",
                 status="ok",
                 figures={"setting": "wal-sync", "durable": True, "killed": "after 1.2 s (seeded)",
                          "acknowledged": 1200, "lost": 3, "changed": 0, "unacknowledged_present": 1,
                          "recovery_s": 0.42, "throughput": 800.0, "latency": _summary(100, 1000),
                          "meaning": "each write <fsynced> | before its ack"})
    lines = render_durability([rec])
    out = beyond_html.markdown_to_html(lines)
    assert out.count("<table") == 1 and "<th>recovery s</th>" in out
    assert "<b>3</b>" in out and "<code>wal-sync</code>" in out
    assert "&lt;fsynced&gt; | before its ack" in out and "<fsynced>" not in out
    page = html.render(_results([rec]), SUITES)
    assert 'id="beyond-durability"' in page and "<i>Lost</i>" in page


# -- slow: the real suites on DuckDB at tiny sizes ----------------------------------------

@pytest.fixture(scope="module")
def beyond_run(tiny: Dataset, tmp_path_factory: pytest.TempPathFactory) -> Results:
    """The four suites on DuckDB at tiny sizes, as one run's records."""
    out = tmp_path_factory.mktemp("beyond-report")
    scaling = suite_options(scaling_factor=2.0, scaling_spans=("day", "week"))
    runs = [_run(tiny, out / "tick", "tick-latency"), _run(tiny, out / "stream", "stream"),
            _run(tiny, out / "concurrency", "concurrency"), _run(tiny, out / "scaling", "scaling", scaling)]
    return runs[0].model_copy(update={"suite": "all", "records": [r for run in runs for r in run.records]})


@pytest.mark.slow
def test_report_of_real_beyond_runs(beyond_run: Results, tmp_path: Path) -> None:
    bad = beyond_run.records[0].model_copy(update={"engine": "chdb", "status": "error", "figures": {},
                                                   "reason": "worker died: " + HOSTILE})
    res = beyond_run.model_copy(update={"records": [*beyond_run.records, bad]})
    assert {r.status for r in beyond_run.records} == {"ok"}, [r.reason for r in beyond_run.records]
    page = html.render(res, SUITES)
    charts = _charts(page)
    counts = {s: sum(r.benchmark.startswith(s + "/") for r in res.records) for s in SUITE_CHARTS}
    for suite, ids in SUITE_CHARTS.items():
        assert len(_table_rows(page, suite)) == counts[suite], suite
        for chart_id in ids:
            assert page.count(f'id="{chart_id}"') == 1 and chart_id in charts, chart_id
    assert counts["tick-latency"] == 3 and counts["concurrency"] == 2 and counts["stream"] == 1
    assert "worker died: &lt;b&gt;not html&lt;/b&gt;" in _table_rows(page, "tick-latency")[-1]
    assert all("chdb" not in json.dumps(c) for c in charts.values())  # the error cell is in no chart
    tick = charts["chart-beyond-tick-latency"]["data"]
    assert len(tick) == 2 and all(len(t["x"]) > 20 for t in tick)  # 2000 events each: p0 … p99.95
    assert len(charts["chart-beyond-scaling"]["data"]) == 2 * counts["scaling"]  # points and fit per query
    assert "Tick latency" in markdown.render(res, SUITES)


@pytest.mark.slow
@needs_chromium
def test_beyond_charts_draw_in_chromium(beyond_run: Results, tmp_path: Path) -> None:
    assert CHROMIUM is not None
    page = tmp_path / "report.html"
    text = html.render(beyond_run, SUITES)
    page.write_text(text)
    dom, log = render_in_chromium(page, tmp_path / "profile")
    assert 'data-charts-done="1"' in dom and 'data-chart-errors="' not in dom
    assert "Uncaught" not in log
    ids = [i for ids in SUITE_CHARTS.values() for i in ids]
    assert set(ids) <= set(_charts(text))
    for chart_id in ids:
        start = dom.index(f'id="{chart_id}"')
        part = dom[start:dom.find('<div class="chart', start + 10)]
        assert 'data-rendered="1"' in part[:400], f"{chart_id} did not render"
        assert 'class="main-svg"' in part, f"{chart_id} has no SVG"
        lines = re.findall(r'<path class="js-line" d="(M[^"]+)"', part)
        points = re.findall(r'<path class="point" [^>]*d="(M[^"]+)"', part)
        assert [d for d in lines if "L" in d] or points, f"{chart_id} drew no line or marker"
