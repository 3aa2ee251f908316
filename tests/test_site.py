"""The results site (``tickbench site``), driven in headless Chromium over the DevTools pipe
(:mod:`tests.browser`): built once for the module from the reference runs under
``docs/results/``, opened from ``file://``, clicked, filtered, and given a reader's own
results file through its file input. Skips only when no Chromium is installed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.browser import CHROMIUM, Browser
from tests.synthetic import scaled
from tickbench.cli import app
from tickbench.results import Results, read_results

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = sorted((ROOT / "docs" / "results").glob("*/*.json"))
V1_FILE = ROOT / "tests" / "fixtures" / "results-v1.json"
PAPER = ROOT / "docs" / "results" / "headline-2026-11-26" / "paper-sf1.json"

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (apt-get install -y chromium)")


@pytest.fixture(scope="module")
def site_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    res = CliRunner().invoke(app, ["site", *map(str, REFERENCE), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    b = Browser(tmp_path_factory.mktemp("profile"))
    try:
        yield b
    finally:
        b.close()


def open_site(browser: Browser, site_dir: Path, fragment: str = "") -> None:
    browser.errors.clear()
    browser.open((site_dir / "index.html").as_uri() + (f"#{fragment}" if fragment else ""))
    # a reload, so that a new fragment is read and a file chosen before is forgotten
    browser.call("Page.reload", ignoreCache=True)
    browser.wait("document.readyState === 'complete' && document.body.dataset.ready")


def cells(browser: Browser, selector: str = "td[data-cell]") -> list[dict[str, str]]:
    return list(browser.js(f"""Array.from(document.querySelectorAll({json.dumps(selector)}))
        .map(td => ({{key: td.dataset.cell, text: td.textContent, ratio: td.querySelector('.ratio').textContent,
                      visible: td.offsetParent !== null || !td.closest('[hidden]')}}))"""))


def choose(browser: Browser, path: Path) -> str:
    browser.js("document.getElementById('own-message').textContent = ''")
    browser.choose_file("#own-file", path)
    return str(browser.wait("document.getElementById('own-message').textContent"))


def test_site_files_and_no_network(site_dir: Path) -> None:
    assert sorted(p.name for p in site_dir.iterdir()) == ["data.js", "index.html", "plotly.min.js"]
    page = (site_dir / "index.html").read_text()
    # everything it loads is beside it: no address of any host
    assert re.findall(r'src="([^"]+)"', page) == ["plotly.min.js", "data.js"]
    assert "http://" not in page and "https://" not in page


def test_every_verified_reference_cell_is_present(browser: Browser, site_dir: Path) -> None:
    latest: dict[tuple[str, str, str, str], tuple[str, Results]] = {}
    for f in REFERENCE:
        r = read_results(f)
        for rec in r.records:
            if rec.status == "ok" and rec.verified:
                key = (rec.suite, r.dataset.content_hash, rec.benchmark, rec.engine)
                if key not in latest or r.created >= latest[key][0]:
                    latest[key] = (r.created, r)
    assert len(latest) > 300
    open_site(browser, site_dir)
    shown = {tuple(c["key"].split("|")[:4]): c for c in cells(browser)}
    missing = sorted(set(latest) - set(shown))
    assert not missing, missing[:10]
    assert all("✔" in shown[k]["text"] for k in latest)
    assert not browser.errors


def test_in_memory_reference_is_apart_and_never_ranked(browser: Browser, site_dir: Path) -> None:
    open_site(browser, site_dir, "suite=published&bench=O-T")
    polars = [c for c in cells(browser) if c["key"].split("|")[3] == "polars"]
    assert polars and all("not ranked" in c["ratio"] for c in polars)
    heads = browser.js("Array.from(document.querySelectorAll('th.ref')).map(t => t.textContent)")
    assert heads and set(heads) == {"polars (in-memory reference)"}
    # its column stands after every ranked engine's
    order = browser.js("Array.from(document.querySelector('section[data-suite=published] table tr').children)"
                       ".map(t => t.textContent)")
    assert order[-1] == "polars (in-memory reference)"


def test_filter_by_engine_hides_the_others_and_stays_in_the_url(browser: Browser, site_dir: Path) -> None:
    open_site(browser, site_dir, "suite=market&engines=duckdb")
    shown = cells(browser)
    assert shown and {c["key"].split("|")[3] for c in shown} == {"duckdb"}
    # unticking an engine in the page hides its cells and writes the choice into the URL
    open_site(browser, site_dir, "suite=published")
    before = {c["key"].split("|")[3] for c in cells(browser)}
    assert {"chdb", "duckdb"} <= before
    browser.js("document.querySelector('input[data-engine=chdb]').click()")
    after = {c["key"].split("|")[3] for c in cells(browser)}
    assert after == before - {"chdb"}
    fragment = browser.js("location.hash")
    assert "engines=" in fragment and "chdb" not in fragment.split("engines=")[1].split("&")[0]
    open_site(browser, site_dir, fragment.lstrip("#"))  # the shared address shows the same view
    assert {c["key"].split("|")[3] for c in cells(browser)} == after
    # the scale filter: at 0.5 only the scaling runs' cells are left
    open_site(browser, site_dir, "suite=scaling&scale=0.5")
    assert {c["key"].split("|")[0] for c in cells(browser)} == {"scaling"}


def test_click_shows_query_plan_repetitions_and_server_time(browser: Browser, site_dir: Path) -> None:
    r = read_results(PAPER)
    rec = r.record("chdb", "O-T")
    assert rec is not None and rec.query is not None and rec.server_samples_ns
    open_site(browser, site_dir)
    key = f"published|{r.dataset.content_hash}|O-T|chdb|"
    browser.js(f"document.querySelector('td[data-cell^=\"{key}\"]').click()")
    assert browser.js("document.getElementById('detail-query').textContent") == rec.query.text
    plan = browser.js("document.getElementById('detail-plan').textContent")
    assert plan.splitlines()[0] == rec.plan.splitlines()[0]
    facts = browser.js("document.getElementById('detail').textContent")
    assert f"{rec.samples_ns[0] / 1e6:.1f}" in facts
    assert "server time (median)" in facts and "not reported" not in facts.split("server time (median)")[1][:30]


def test_own_run_on_the_reference_dataset_is_beside_it_as_ratios(browser: Browser, site_dir: Path,
                                                                   tmp_path: Path) -> None:
    ref = read_results(PAPER)
    # duckdb run again on the reference's dataset, every timing twice the reference's
    mine = ref.model_copy(update={"run_id": "mine", "records": [
        scaled(r, 2.0) for r in ref.records if r.engine == "duckdb"]})
    mine.write(tmp_path / "results.json")
    open_site(browser, site_dir, "suite=published")
    message = choose(browser, tmp_path / "results.json")
    assert "beside the reference" in message
    own = {c["key"].split("|")[2]: c for c in cells(browser, "td[data-cell^='own|']")}
    timed = [r for r in mine.records if r.status == "ok" and r.stats is not None]
    assert timed and set(own) >= {r.benchmark for r in timed}
    for rec in timed:
        assert rec.stats is not None
        best = min(r.stats.median_ms for r in ref.records if r.benchmark == rec.benchmark and r.stats
                   and r.status == "ok" and r.engine != "polars")
        shown = own[rec.benchmark]
        assert "the fastest" in shown["ratio"], shown
        ratio = float(shown["ratio"].split("×")[0])
        assert ratio == pytest.approx(rec.stats.median_ms / best, rel=0.01), rec.benchmark
    assert browser.js("document.getElementById('own-alone').textContent") == ""
    assert not browser.errors


@pytest.fixture(scope="module")
def make_run(tiny_run: Results, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real duckdb run at the tiny scale, as ``make run`` writes one (another scale than the reference)."""
    path = tmp_path_factory.mktemp("site-run") / "results.json"
    tiny_run.write(path)
    return path


def test_own_run_of_another_scale_is_alone_with_what_differs(browser: Browser, site_dir: Path,
                                                             make_run: Path) -> None:
    mine = read_results(make_run)
    open_site(browser, site_dir)
    message = choose(browser, make_run)
    assert "shown alone" in message
    assert f"scale {mine.dataset.scale:g} (reference: 1)" in message
    differs = browser.js("document.getElementById('own-message').dataset.differs").split(",")
    assert "scale" in differs and "content_hash" in differs and "seed" not in differs
    alone = cells(browser, "#own-alone td[data-cell]")
    ok = {r.benchmark for r in mine.records if r.status == "ok"}
    assert {c["key"].split("|")[2] for c in alone} >= ok
    assert not cells(browser, "#views td[data-cell^='own|']")  # never mixed into the reference's tables
    assert not browser.errors


@pytest.mark.parametrize(("content", "expected"), [
    (V1_FILE.read_text(), "results schema version 1; this site reads version 2"),
    ('{"schema_version": 99, "records": [], "dataset": {}}', "results schema version 99"),
    ("[1, 2, 3]", "not a tickbench results file"),
    ("name,price\nBTC,1\n", "not a tickbench results file (not JSON"),
    ('{"schema_version": 2, "records": [], "dataset": 5}', "not a valid results file"),
])
def test_a_file_of_another_schema_or_kind_gets_a_clear_message(browser: Browser, site_dir: Path, tmp_path: Path,
                                                                content: str, expected: str) -> None:
    f = tmp_path / "results.json"
    f.write_text(content)
    open_site(browser, site_dir)
    message = choose(browser, f)
    assert expected in message
    assert browser.js("document.getElementById('own-message').className") == "msg-error"
    assert not cells(browser, "td[data-cell^='own|']")
    assert not browser.errors


def test_history_plots_a_cell_held_by_several_runs(browser: Browser, site_dir: Path) -> None:
    open_site(browser, site_dir, "suite=history&bench=O-NBBO&engines=duckdb")
    option = browser.js("document.getElementById('history-pick').value")
    assert option.split("|")[2:] == ["O-NBBO", "duckdb"]
    browser.wait("document.getElementById('history-chart').dataset.rendered")
    assert browser.js("document.querySelectorAll('#history-chart .main-svg .point').length") == 2
    assert not browser.errors


def test_site_refuses_a_bad_file_and_an_out_that_is_a_file(tmp_path: Path) -> None:
    bad = tmp_path / "results.json"
    bad.write_text('{"schema_version": 99}')
    res = CliRunner().invoke(app, ["site", str(bad), "--out", str(tmp_path / "s")])
    assert res.exit_code == 2 and "schema version 99" in res.output and "Traceback" not in res.output
    taken = tmp_path / "taken"
    taken.write_text("mine")
    res = CliRunner().invoke(app, ["site", str(PAPER), "--out", str(taken)])
    assert res.exit_code == 2 and "not a directory" in res.output
    assert taken.read_text() == "mine"


def test_hostile_names_and_conditions_stay_text(browser: Browser, tmp_path: Path) -> None:
    ref = read_results(PAPER)
    name = '</script><img src=x onerror="document.body.dataset.pwned=1">'
    recs = [r for r in ref.records if r.engine == "duckdb" and r.benchmark in ("O-T", "T-V1")]
    evil = [r.model_copy(update={"engine": name}) for r in recs]
    bad = ref.model_copy(update={"run_id": "evil", "records": evil})
    (tmp_path / "in").mkdir()
    bad.write(tmp_path / "in" / "results.json")
    (tmp_path / "in" / "conditions.txt").write_text("<b>bold</b> & more")
    out = tmp_path / "site"
    res = CliRunner().invoke(app, ["site", str(tmp_path / "in" / "results.json"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    browser.errors.clear()
    browser.open((out / "index.html").as_uri())
    assert browser.js("document.body.dataset.pwned") is None
    assert name in browser.js("document.getElementById('views').textContent")
    assert "<b>bold</b> & more" in browser.js("document.querySelector('.runs').textContent")
    assert not browser.errors
