"""Results derived from a real run, for report and compare tests.

Every figure starts from a real duckdb run; these helpers only rename engines, scale samples
or set statuses, so the reports meet every status and several engines (including ones the
reference paper measured) without needing those engines installed.
"""

from __future__ import annotations

from pathlib import Path

from tickbench.results import Record, Results, Stats
from tickbench.run.cell import Protocol
from tickbench.run.session import run
from tickbench.suites.registry import run_config


def real_run(data: Path, out: Path, seed: int, repetitions: int = 2) -> Results:
    """A real duckdb run of the published suite on ``data`` (W loaded once per path)."""
    return run(run_config(engines=["duckdb"], data=data, out=out, seed=seed,
                         protocol=Protocol(warmup=1, repetitions=repetitions, load_repetitions=1)))


def scaled(rec: Record, factor: float, engine: str | None = None) -> Record:
    """``rec`` with every timing multiplied by ``factor`` (and optionally renamed)."""
    samples = [int(s * factor) for s in rec.samples_ns]
    figures = dict(rec.figures)
    for fmt in ("csv", "parquet"):
        if isinstance(figures.get(fmt), dict):
            f = dict(figures[fmt])
            for key in ("seconds", "baseline_seconds"):
                if key in f:
                    f[key] = f[key] * factor
            for key in ("samples_s", "baseline_samples_s"):
                if key in f:
                    f[key] = [s * factor for s in f[key]]
            if "mb_per_s" in f:
                f["mb_per_s"] = f["mb_per_s"] / factor
            figures[fmt] = f
    return rec.model_copy(update={
        "engine": engine or rec.engine, "samples_ns": samples,
        "stats": Stats.of(samples) if samples and rec.stats is not None else rec.stats, "figures": figures})


def slowed(results: Results, engine: str, add_ms: float) -> Results:
    """``results`` with ``add_ms`` added to every query sample of ``engine`` (a synthetic
    stand-in for a run under ``TICKBENCH_FAULTS="<engine>:slow=<s>"``)."""
    recs = []
    for r in results.records:
        if r.engine == engine and r.samples_ns and r.stats is not None:
            samples = [s + int(add_ms * 1e6) for s in r.samples_ns]
            r = r.model_copy(update={"samples_ns": samples, "stats": Stats.of(samples)})
        recs.append(r)
    return results.model_copy(update={"records": recs})


def many_engines(real: Results) -> Results:
    """Five engines from one real duckdb run: duckdb as it ran; ``chdb`` 2× slower; ``timescaledb``
    5× slower with O-NBBO unsupported and O-V2 timed out; ``influxdb`` 0.5× with T-V1 wrong and
    C-VT errored; ``kdb`` 0.3× with O-T not applicable and no W/SE (unavailable)."""
    records: list[Record] = list(real.records)
    special = {
        ("timescaledb", "O-NBBO"): ("unsupported", "needs an as-of join across venues the dialect lacks"),
        ("timescaledb", "O-V2"): ("timeout", "repetition 1 ran past 300 s"),
        ("influxdb", "T-V1"): ("wrong", "row 3: volume 12.5 != 12.25 (the reference)"),
        ("influxdb", "C-VT"): ("error", "EngineError: internal error <b>not html</b> | pipe"),
        ("kdb", "O-T"): ("not_applicable", "in-memory only"),
        ("kdb", "W"): ("unavailable", "kdb+ is not installed: q not found"),
        ("kdb", "SE"): ("unavailable", "kdb+ is not installed: q not found"),
    }
    for engine, factor in (("chdb", 2.0), ("timescaledb", 5.0), ("influxdb", 0.5), ("kdb", 0.3)):
        for r in real.records:
            rec = scaled(r, factor, engine)
            if rec.query is not None:
                rec = rec.model_copy(update={"query": rec.query.model_copy(
                    update={"file": rec.query.file.replace("duckdb", engine)})})
            if rec.benchmark == "SE" and rec.figures:
                f = dict(rec.figures)
                f["engine_bytes"] = int(f["engine_bytes"] * factor)
                f["pct_of_parquet"] = f["pct_of_parquet"] * factor
                f["pct_of_csv"] = 40.0 * factor
                rec = rec.model_copy(update={"figures": f})
            if (engine, rec.benchmark) in special:
                status, reason = special[(engine, rec.benchmark)]
                rec = rec.model_copy(update={"status": status, "reason": reason, "stats": None, "samples_ns": [],
                                             "figures": {}, "verified": False if status == "wrong" else None})
            records.append(rec)
    env = real.environment.model_copy(update={"engines": {
        **real.environment.engines, **{e: {"version": "synthetic", "settings": {}} for e in
                                       ("chdb", "timescaledb", "influxdb", "kdb")}}})
    return real.model_copy(update={"records": records, "environment": env})


def report_markdown(results: Results) -> str:
    """``report.md`` of ``results`` with every suite of this tickbench, as the command line writes it."""
    from tickbench.report import markdown
    from tickbench.suites.registry import suites

    return markdown.render(results, suites().values())
