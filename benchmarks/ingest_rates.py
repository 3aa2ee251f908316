"""Each engine's maximum sustained ingest rate, and its latency at half that rate
(``make bench-ingest``; the README's table comes from it).

Per engine, with the stream suite (one writer unless ``--writers``):

1. as fast as possible (batches of up to 1000 events): the rate the engine absorbs, ``M``;
2. fixed target rates 25, 50, 75 and 100 % of ``M``: the maximum *sustained* rate is the
   highest target met — every event sent, achieved within 5 % of the target;
3. 50 % of that sustained rate: p50/p99/p99.9 submit→acknowledge latency from each event's
   intended send time (no coordinated omission) and update-visibility p99.

Every cell is a verified stream cell (rows written = rows read back); results.json files are
kept under ``--out``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
from pathlib import Path
from typing import Any

from tickbench.cli import default_data_dir
from tickbench.data.dataset import Dataset, generate
from tickbench.results import Record
from tickbench.run.cell import Protocol
from tickbench.run.environment import capture
from tickbench.run.session import RunConfig, run, suite_options

LADDER = (0.25, 0.5, 0.75, 1.0)
MET = 0.95  # a target counts as met when achieved ≥ 95 % of it and every event was sent


def stream(engine: str, data: Path, out: Path, rates: tuple[int | None, ...], writers: int,
           seconds: float) -> list[Record]:
    results = run(RunConfig(engines=[engine], data=data, out=out, seed=7, suite="stream",
                            protocol=Protocol(repetitions=1), verify_dataset=False,
                            options=suite_options(stream_rates=rates, stream_writers=(writers,),
                                                 stream_seconds=seconds)))
    bad = [r for r in results.records if r.status != "ok"]
    if bad:
        raise CellFailed(f"{bad[0].benchmark} {bad[0].status}: {bad[0].reason.splitlines()[0][:200]}")
    return results.records


class CellFailed(Exception):
    """A stream cell that did not finish ok: the engine's row says so, the others go on."""


def met(rec: Record, target: int) -> bool:
    f = rec.figures
    return f["written"] == f["planned"] and f["throughput"] >= MET * target


def measure(engine: str, data: Path, out: Path, writers: int, seconds: float) -> dict[str, Any]:
    top = stream(engine, data, out / engine / "max", (None,), writers, seconds)[0].figures["throughput"]
    targets = tuple(max(1, int(float(f"{top * k:.2g}"))) for k in LADDER)
    ladder = stream(engine, data, out / engine / "ladder", targets, writers, seconds)
    sustained = max((t for t, r in zip(targets, ladder, strict=True) if met(r, t)), default=None)
    if sustained is None:
        return {"engine": engine, "max": top, "sustained": None}
    half = max(1, sustained // 2)
    rec = stream(engine, data, out / engine / "half", (half,), writers, seconds)[0]
    f = rec.figures
    return {"engine": engine, "max": top, "sustained": sustained, "half": half, "achieved": f["throughput"],
            "p50_ms": f["latency"]["p50_us"] / 1e3, "p99_ms": f["latency"]["p99_us"] / 1e3,
            "p99_9_ms": f["latency"]["p99_9_us"] / 1e3, "visibility_p99_ms": f["visibility"]["p99_us"] / 1e3}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", default="duckdb,chdb,questdb,postgres")
    ap.add_argument("--scale", type=float, default=0.05, help="the dataset whose bulk-load day is replayed")
    ap.add_argument("--writers", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=5.0, help="the most seconds one cell streams")
    ap.add_argument("--out", type=Path, default=Path("results") / dt.datetime.now().strftime("ingest-%Y%m%d-%H%M%S"))
    args = ap.parse_args()
    data = default_data_dir(args.scale, 7, 0)
    if not (data / "manifest.json").exists():
        generate(data, args.scale, 7, symbols=0, jobs=2)
    Dataset.open(data)
    env = capture()
    load = os.getloadavg()
    rows = []
    for engine in (e.strip() for e in args.engines.split(",")):
        try:
            rows.append(measure(engine, data, args.out, args.writers, args.seconds))
        except CellFailed as exc:
            rows.append({"engine": engine, "error": str(exc)})
    lines = [
        f"Stream suite, {args.writers} writer(s), cells of at most {args.seconds:g} s, bulk day of scale "
        f"{args.scale:g}; {env.cpu}, {env.cores} cores, {env.memory_bytes / 2**30:.0f} GiB, {platform.system()}; "
        f"load average at start {load[0]:.1f}.",
        "",
        "| engine | as fast as possible | max sustained (target met) | at 50 %: achieved | p50 | p99 | p99.9 | "
        "visibility p99 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['engine']} | {r['error'].replace('|', '/')} | | | | | | |")
            continue
        if r["sustained"] is None:
            lines.append(f"| {r['engine']} | {r['max']:,.0f} | no target met | | | | | |")
            continue
        lines.append(f"| {r['engine']} | {r['max']:,.0f} | {r['sustained']:,} | {r['achieved']:,.0f} of "
                     f"{r['half']:,} | {r['p50_ms']:.1f} ms | {r['p99_ms']:.1f} ms | {r['p99_9_ms']:.1f} ms | "
                     f"{r['visibility_p99_ms']:.1f} ms |")
    text = "\n".join(lines)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ingest_rates.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
