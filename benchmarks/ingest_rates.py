"""Each engine's maximum sustained ingest rate against the harness ceiling and its own bulk
path, and its latency at half that rate (``make bench-ingest``; the README's table comes from it).

Per engine, with the stream suite (writer processes fed batches encoded before the clock, the
engine's fastest streaming path; one writer unless ``--writers``; book rows unless ``--tables``):

1. as fast as possible (writes of ``--batch`` events): the rate the engine absorbs, ``M``, the
   harness ceiling (the same writers into a sink that stores nothing) and the engine's bulk
   path on the same rows, all in the same cell;
2. fixed target rates 25, 50, 75 and 100 % of ``M``: the maximum *sustained* rate is the
   highest target met — every event sent, achieved within 5 % of the target;
3. 50 % of that sustained rate: p50/p99/p99.9 submit→acknowledge latency from each event's
   intended send time (no coordinated omission) and update-visibility p99.

A rate within 2× of its cell's harness ceiling is marked client-bound (the harness, not the
engine, may be its limit). Every cell is a verified stream cell (rows written = rows read
back); results.json files are kept under ``--out``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tickbench.cli import default_data_dir
from tickbench.datasets.base import generate, open_dataset
from tickbench.engines.base import Ingest
from tickbench.engines.registry import adapter_class, availability, engine_infos
from tickbench.results import Record
from tickbench.run.cell import Protocol
from tickbench.run.environment import capture
from tickbench.run.session import run
from tickbench.suites.registry import run_config, suite_options
from tickbench.suites.stream.suite import parse_tables

LADDER = (0.25, 0.5, 0.75, 1.0)
MET = 0.95  # a target counts as met when achieved ≥ 95 % of it and every event was sent


@dataclass(frozen=True)
class Setup:
    """What every cell of the run shares."""

    data: Path
    out: Path
    writers: int
    seconds: float
    tables: tuple[str, ...]
    batch: int


def stream(engine: str, setup: Setup, name: str, rates: tuple[int | None, ...]) -> list[Record]:
    results = run(run_config(engines=[engine], data=setup.data, out=setup.out / engine / name, seed=7,
                             suite="stream", protocol=Protocol(repetitions=1), verify_dataset=False,
                             options=suite_options(stream_rates=rates, stream_writers=(setup.writers,),
                                                   stream_seconds=setup.seconds, stream_tables=setup.tables,
                                                   stream_max_batch=setup.batch)))
    bad = [r for r in results.records if r.status != "ok"]
    if bad:
        raise CellFailed(f"{bad[0].benchmark} {bad[0].status}: {bad[0].reason.splitlines()[0][:200]}")
    return results.records


class CellFailed(Exception):
    """A stream cell that did not finish ok: the engine's row says so, the others go on."""


def met(rec: Record, target: int) -> bool:
    f = rec.figures
    return f["written"] == f["planned"] and f["throughput"] >= MET * target


def measure(engine: str, setup: Setup) -> dict[str, Any]:
    first = stream(engine, setup, "max", (None,))[0].figures
    top = first["throughput"]
    targets = tuple(max(1, int(float(f"{top * k:.2g}"))) for k in LADDER)
    ladder = stream(engine, setup, "ladder", targets)
    bulk = statistics.median([first["bulk_rate"], *(r.figures["bulk_rate"] for r in ladder)])
    row: dict[str, Any] = {"engine": engine, "ceiling": first["ceiling"], "max": top,
                           "max_bound": first["client_bound"], "bulk": bulk, "path": first["path"],
                           "mode": first["writer_mode"], "pinning": first["pinning"], "sustained": None}
    met_cells = [(t, r) for t, r in zip(targets, ladder, strict=True) if met(r, t)]
    if not met_cells:
        return row
    sustained, cell = max(met_cells, key=lambda tr: tr[0])
    half = max(1, sustained // 2)
    f = stream(engine, setup, "half", (half,))[0].figures
    row.update({"sustained": sustained, "sustained_ceiling": cell.figures["ceiling"],
                "sustained_bound": cell.figures["client_bound"], "half": half, "achieved": f["throughput"],
                "p50_ms": f["latency"]["p50_us"] / 1e3, "p99_ms": f["latency"]["p99_us"] / 1e3,
                "p99_9_ms": f["latency"]["p99_9_us"] / 1e3,
                "visibility_p99_ms": (f["visibility"] or {}).get("p99_us", 0) / 1e3})
    return row


def ingest_engines() -> list[str]:
    """Every available engine with the ingest capability, from the engine folders."""
    return [n for n in engine_infos() if issubclass(adapter_class(n), Ingest) and availability(n).available]


def mark(bound: bool) -> str:
    return " (client-bound)" if bound else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", default="duckdb,chdb,questdb,postgres",
                    help="comma-separated engines, or all: every available engine with a streaming path")
    ap.add_argument("--scale", type=float, default=0.05, help="the dataset whose bulk-load day is replayed")
    ap.add_argument("--writers", type=int, default=1)
    ap.add_argument("--tables", default="book", help="the tables replayed: book, trades or trades,book")
    ap.add_argument("--batch", type=int, default=1000, help="events per write as fast as possible")
    ap.add_argument("--seconds", type=float, default=5.0, help="the most seconds one cell streams")
    ap.add_argument("--out", type=Path, default=Path("results") / dt.datetime.now().strftime("ingest-%Y%m%d-%H%M%S"))
    args = ap.parse_args()
    data = default_data_dir(args.scale, 7, 0)
    if not (data / "manifest.json").exists():
        generate(data, args.scale, 7, symbols=0, jobs=2)
    open_dataset(data)
    setup = Setup(data, args.out, args.writers, args.seconds, parse_tables(args.tables), args.batch)
    env = capture()
    load = os.getloadavg()
    rows = []
    names = ingest_engines() if args.engines == "all" else [e.strip() for e in args.engines.split(",")]
    for engine in names:
        try:
            rows.append(measure(engine, setup))
        except CellFailed as exc:
            rows.append({"engine": engine, "error": str(exc)})
    lines = [
        f"Stream suite, {args.tables} rows, {args.writers} writer(s), writes of {args.batch} events as fast as "
        f"possible, cells of at most {args.seconds:g} s, bulk day of scale {args.scale:g}; {env.cpu}, {env.cores} "
        f"cores, {env.memory_bytes / 2**30:.0f} GiB, {platform.system()}; load average at start {load[0]:.1f}.",
        "",
        "| engine | harness ceiling | as fast as possible | max sustained (target met) | % of bulk | "
        "at 50 %: achieved | p50 | p99 | p99.9 | visibility p99 | bulk path |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['engine']} | {r['error'].replace('|', '/')} | | | | | | | | | |")
            continue
        notes.append(f"- {r['engine']}: {r['path']}; {r['mode']}; pinning: {r['pinning']}.")
        head = (f"| {r['engine']} | {r['ceiling']:,.0f} | {r['max']:,.0f}{mark(r['max_bound'])} |")
        if r["sustained"] is None:
            lines.append(f"{head} no target met | | | | | | | {r['bulk']:,.0f} |")
            continue
        lines.append(f"{head} {r['sustained']:,}{mark(r['sustained_bound'])} | "
                     f"{100 * r['sustained'] / r['bulk']:.0f} % | {r['achieved']:,.0f} of {r['half']:,} | "
                     f"{r['p50_ms']:.1f} ms | {r['p99_ms']:.1f} ms | {r['p99_9_ms']:.1f} ms | "
                     f"{r['visibility_p99_ms']:.1f} ms | {r['bulk']:,.0f} |")
    lines += ["", "Rates are rows/s. Harness ceiling: the same writers (as fast as possible, same writes) into a "
              "sink that acknowledges without storing. % of bulk: max sustained over the engine's bulk path on "
              "the same rows in the same run (median of its cells). A rate within 2× of its cell's ceiling is "
              "marked client-bound.", "", *notes]
    text = "\n".join(lines)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ingest_rates.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
