"""The results site: every reference run in one static page, and a reader's own run beside it.

``tickbench site RESULTS.json... --out DIR`` writes ``DIR/index.html`` (the page: its style and a
small data-driven script), ``DIR/data.js`` (every cell of the runs, as one JSON object assigned
to ``window.TICKBENCH_SITE``: a script, so the page works from ``file://``, where a page may not
fetch a local file) and ``DIR/plotly.min.js`` (the report's plotting library, from the ``plotly``
Python package, for the history charts; no network). Nothing else in ``DIR`` is touched.

Like the report, the site knows no suite: it is given the suites (:class:`ReportSuite`) and reads
what each record says of itself (its ``suite``, ``category``, status). A cell's text is its
suite's (:meth:`ReportSuite.cell_text`, as in the report, with its transport-bound mark); the
figure it is ranked by is the median of its suite's first measure (:meth:`ReportSuite.measures`,
what ``tickbench compare`` compares), and its ratio is to the fastest engine on that benchmark
and dataset. An in-memory engine (kind ``in-memory``) is shown apart and never ranked.

Where several runs hold the same cell (suite, benchmark, engine, dataset), the latest is shown
and every one is a point of the cell's history. Each run's conditions (what ran beside it) are
the text of ``conditions.txt`` beside its results file, when there is one.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tickbench.report.cells import (
    MARK,
    TRANSPORT_FLOOR_MS,
    TRANSPORT_SHARE,
    harness_ms,
    server_median_ms,
    timing_measures,
    transport_bound,
)
from tickbench.report.cells import cell_text as generic_text
from tickbench.report.html import STYLE as REPORT_STYLE
from tickbench.report.html import finite
from tickbench.report.plans import clip
from tickbench.report.sections import ReportSuite, find
from tickbench.report.summary import in_memory
from tickbench.results import SCHEMA_VERSION, Record, Results

CONDITIONS_FILE = "conditions.txt"
MAX_CONDITIONS = 20_000  # characters kept of a conditions.txt (it is shown, never run)
FILES = ("index.html", "data.js", "plotly.min.js")
HERE = Path(__file__).parent  # site.html, site.css and site.js: the page, its style and its script


@dataclass(frozen=True)
class Source:
    """One results file given to the site: its run, its file name, and its conditions text."""

    results: Results
    name: str
    conditions: str = ""


def conditions_of(path: Path) -> str:
    """The text of ``conditions.txt`` beside a results file ('' when there is none)."""
    f = path.parent / CONDITIONS_FILE
    if not f.is_file():
        return ""
    return f.read_text(errors="replace")[:MAX_CONDITIONS].strip()


def figure(suite: ReportSuite | None, rec: Record) -> tuple[float, str] | None:
    """The figure a cell is ranked by (lower is better) and its unit: the median of the first of
    its suite's measures that has samples; ``None`` unless the cell is ok."""
    if rec.status != "ok":
        return None
    for m in suite.measures(rec) if suite is not None else timing_measures(rec):
        if m.samples:
            value = float(statistics.median(m.samples))
            return (value, m.unit) if math.isfinite(value) else None
    return None


def _run(i: int, src: Source) -> dict[str, Any]:
    r, env, ds = src.results, src.results.environment, src.results.dataset
    return {
        "index": i, "id": r.run_id, "file": src.name, "created": r.created, "suite": r.suite,
        "machine": f"{env.cpu}, {env.cores} cores, {env.memory_bytes / 2**30:,.1f} GiB; {env.os}",
        "software": f"Python {env.python}, tickbench {env.tickbench_version}, results schema {r.schema_version}, "
                    f"protocol {r.protocol_version}",
        "tickbench_version": env.tickbench_version,
        "dataset": ds.model_dump(exclude={"root"}),
        "protocol": f"{r.protocol_text()}, timeout {r.timeout_s:g} s",
        "engines": {e: {"version": str(m.get("version", "")), "kind": str(m.get("kind", ""))}
                    for e, m in env.engines.items()},
        "conditions": src.conditions,
    }


def _texts(suite: ReportSuite | None, rec: Record, fig: tuple[float, str] | None) -> tuple[str, str]:
    """A cell's text (its suite's, as in the report, with the verification mark) and, where that
    text does not show the figure the cell is ranked by, that figure."""
    text = suite.cell_text(rec) if suite is not None else generic_text(rec)
    if rec.status == "ok" and "✔" not in text:
        text += " ✔"
    if fig is None:
        return text, ""
    value, unit = fig
    shown = f"{value:,.1f} {unit}" in text or (unit == "ms" and f"{value / 1e3:.2f} s" in text)
    return text, "" if shown else f"median {value:,.4g} {unit}"


def _cell(run: int, src: Source, suite: ReportSuite | None, rec: Record, mem: set[str]) -> dict[str, Any]:
    fig = figure(suite, rec)
    text, figure_text = _texts(suite, rec, fig)
    server = server_median_ms(rec)
    harness = harness_ms(rec)
    return {
        "run": run, "suite": rec.suite, "category": rec.category, "benchmark": rec.benchmark, "engine": rec.engine,
        "hash": src.results.dataset.content_hash, "scale": src.results.dataset.scale,
        "status": rec.status, "mark": MARK.get(rec.status, rec.status), "verified": rec.verified,
        "reason": rec.reason, "notes": rec.notes,
        "text": text, "figure": figure_text,
        "value": fig[0] if fig else None, "unit": fig[1] if fig else "",
        "median_ms": rec.stats.median_ms if rec.status == "ok" and rec.stats and math.isfinite(rec.stats.median_ms)
        else None,
        "server_ms": server, "harness_ms": harness, "transport_bound": transport_bound(rec),
        "samples_ms": [s / 1e6 for s in rec.samples_ns], "server_samples_ms": [s / 1e6 for s in rec.server_samples_ns],
        "query": rec.query.text if rec.query else "", "query_file": rec.query.file if rec.query else "",
        "plan": clip(rec.plan) if rec.plan else "",
        "in_memory": rec.engine in mem,
        "engine_version": str(src.results.environment.engines.get(rec.engine, {}).get("version", "")),
        "key": "|".join((rec.suite, src.results.dataset.content_hash, rec.benchmark, rec.engine, str(run))),
    }


def _key(c: dict[str, Any]) -> str:
    return "|".join((c["suite"], c["hash"], c["benchmark"], c["engine"]))


def build(sources: Sequence[Source], suites: Iterable[ReportSuite]) -> dict[str, Any]:
    """The site's data: the runs, every cell (the latest of each marked ``current``, ranked
    among the current cells of its benchmark and dataset), and each cell's history."""
    known = list(suites)
    runs = [_run(i, s) for i, s in enumerate(sources)]
    # An engine is in-memory when any run recorded it so (an older file may not record kinds).
    mem = {e for s in sources for e in s.results.engines() if in_memory(s.results, e)}
    cells = [_cell(i, s, find(known, rec.suite), rec, mem) for i, s in enumerate(sources) for rec in s.results.records]
    # The latest run holding a cell shows it (ISO times of one zone sort as text; ties: the later file).
    latest: dict[str, dict[str, Any]] = {}
    for c in cells:
        held = latest.get(_key(c))
        if held is None or runs[c["run"]]["created"] >= runs[held["run"]]["created"]:
            latest[_key(c)] = c
    best: dict[str, dict[str, Any]] = {}  # suite|hash|benchmark|unit -> the fastest contender
    best_ms: dict[str, dict[str, Any]] = {}  # suite|hash|benchmark -> the fastest median (own runs' ratios)
    for c in cells:
        c["current"] = latest[_key(c)] is c
        if not c["current"] or c["in_memory"]:
            continue
        group = "|".join((c["suite"], c["hash"], c["benchmark"]))
        if c["value"] is not None:
            k = f"{group}|{c['unit']}"
            if k not in best or c["value"] < best[k]["value"]:
                best[k] = {"value": c["value"], "engine": c["engine"]}
        if c["median_ms"] is not None and (group not in best_ms or c["median_ms"] < best_ms[group]["ms"]):
            best_ms[group] = {"ms": c["median_ms"], "engine": c["engine"]}
    for c in cells:
        top = best.get("|".join((c["suite"], c["hash"], c["benchmark"], c["unit"])))
        ranked = c["current"] and not c["in_memory"] and c["value"] is not None and top is not None
        c["ratio"] = c["value"] / top["value"] if ranked and top and top["value"] > 0 else None
        c["fastest"] = bool(ranked and top and c["value"] == top["value"])
    history: dict[str, list[dict[str, Any]]] = {}
    for c in cells:
        if c["value"] is not None:
            history.setdefault(_key(c), []).append(
                {"run": c["run"], "created": runs[c["run"]]["created"], "value": c["value"], "unit": c["unit"],
                 "engine_version": c["engine_version"], "tickbench_version": runs[c["run"]]["tickbench_version"]})
    history = {k: sorted(v, key=lambda p: p["created"]) for k, v in history.items() if len(v) > 1}
    titles = {s.name: s.title for s in known}
    names = list(dict.fromkeys([*(s.name for s in known if any(c["suite"] == s.name for c in cells)),
                                *(c["suite"] for c in cells)]))
    return {
        "schema_version": SCHEMA_VERSION,
        "transport": {"share": TRANSPORT_SHARE, "floor_ms": TRANSPORT_FLOOR_MS},
        "suites": [{"name": n, "title": titles.get(n, n)} for n in names],
        "titles": titles,
        "runs": runs, "cells": cells, "best_ms": best_ms, "history": history,
    }


def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs  # plotly is needed only to write the pages

    return str(get_plotlyjs())


def _write(path: Path, text: str) -> None:
    """Write atomically; a name already in ``DIR`` is replaced, never followed (a symlink there
    is replaced by the file, its target left alone)."""
    fd, tmp = tempfile.mkstemp(prefix=".site-", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write(data: dict[str, Any], out: Path) -> Path:
    """The site in ``out`` (created if need be): its three files; the path of ``index.html``."""
    out.mkdir(parents=True, exist_ok=True)
    # NaN and infinities (a hostile file's) become null: JSON has neither
    payload = json.dumps(finite(data), allow_nan=False, separators=(",", ":")).replace("</", "<\\/")
    _write(out / "data.js", f"window.TICKBENCH_SITE = {payload};\n")
    _write(out / "plotly.min.js", _plotly_js())
    page = out / "index.html"
    html, css, script = (HERE.joinpath(f"site.{x}").read_text() for x in ("html", "css", "js"))
    _write(page, html.replace("/*STYLE*/", REPORT_STYLE + css).replace("/*SCRIPT*/", script))
    return page
