"""Markdown sections for the suites beyond the paper (tick-latency, stream, concurrency, scaling).

``render_beyond(results)`` returns "" when the run holds none of their records, so a report
can always call it. Latencies are from the HDR histograms in each record's figures.
"""

from __future__ import annotations

from typing import Any

from tickbench.report.durability import TITLE as DURABILITY_TITLE
from tickbench.report.durability import render_durability
from tickbench.results import Record, Results

SUITE_TITLES = {
    "tick-latency": "Tick latency (after KungfuDB, table 1)",
    "stream": "Streaming ingest (after STAC-M3)",
    "concurrency": "Concurrent clients",
    "scaling": "Scaling with data read",
    "durability": DURABILITY_TITLE,
}


def _us(summary: dict[str, Any] | None, key: str) -> str:
    if not summary or summary.get("count", 0) == 0 or summary.get(key) is None:
        return "–"
    v = float(summary[key])
    return f"{v / 1e3:,.1f} ms" if v >= 10_000 else f"{v:,.0f} µs"


def _status(r: Record) -> str:
    text = f"{r.status}: {r.reason}" if r.reason else r.status
    return text.replace("|", "\\|").replace("\n", " ")  # a reason must not break the table row


def _tick(records: list[Record]) -> list[str]:
    out = ["| engine | X | Y | mode | total write s (mean ± std) | read s (mean ± std) | events/s | "
           "p50 | p99 | p99.9 | max |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        f = r.figures
        x, y, mode = _tick_parts(r.benchmark)
        if r.status != "ok":
            out.append(f"| {r.engine} | {x} | {y} | {mode} | {_status(r)} | | | | | | |")
            continue
        lat = f["latency"]
        mode_label = f"batch of {f['batch']}" if f["mode"] == "batch" else "one per write"
        out.append(f"| {r.engine} | {x} | {y} | {mode_label} | {f['write_s_mean']:.3f} ± {f['write_s_std']:.3f} | "
                   f"{f['read_s_mean']:.3f} ± {f['read_s_std']:.3f} | {f['events_per_s']:,.0f} | "
                   f"{_us(lat, 'p50_us')} | {_us(lat, 'p99_us')} | {_us(lat, 'p99_9_us')} | {_us(lat, 'max_us')} |")
    return out


def _tick_parts(bench: str) -> tuple[str, str, str]:
    _, xy, mode = bench.split("/")
    x, y = (part.split("=")[1] for part in xy.split(","))
    return x, y, mode


def _stream(records: list[Record]) -> list[str]:
    out = ["| engine | target rate | writers | events | achieved events/s | submit→ack p50 | p99 | p99.9 | max | "
           "visibility p50 | p99 | snapshot during p50 | after p50 |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        parts = dict(p.split("=") for p in r.benchmark.split("/")[1:])
        f = r.figures
        if r.status != "ok":
            out.append(f"| {r.engine} | {parts['rate']} | {parts['writers']} | {_status(r)} |||||||||| |")
            continue
        lat, vis = f["latency"], f["visibility"]
        out.append(f"| {r.engine} | {parts['rate']} | {parts['writers']} | {f['written']:,} | {f['throughput']:,.0f} | "
                   f"{_us(lat, 'p50_us')} | {_us(lat, 'p99_us')} | {_us(lat, 'p99_9_us')} | {_us(lat, 'max_us')} | "
                   f"{_us(vis, 'p50_us')} | {_us(vis, 'p99_us')} | {_us(f['snapshot_during'], 'p50_us')} | "
                   f"{_us(f['snapshot_after'], 'p50_us')} |")
    out += ["", "Latency is from each event's intended send time (no coordinated omission); visibility is "
            "acknowledged → counted by a polling query."]
    return out


def _concurrency(records: list[Record]) -> list[str]:
    out = ["| engine | clients | model | queries/s | p50 | p99 | p99.9 | max |", "|---|---|---|---|---|---|---|---|"]
    for r in records:
        clients = r.benchmark.split("=")[1]
        f = r.figures
        if r.status != "ok":
            out.append(f"| {r.engine} | {clients} | {f.get('model', '')} | {_status(r)} | | | | |")
            continue
        lat = f["latency"]
        out.append(f"| {r.engine} | {clients} | {f['model']} | {f['qps']:,.1f} | {_us(lat, 'p50_us')} | "
                   f"{_us(lat, 'p99_us')} | {_us(lat, 'p99_9_us')} | {_us(lat, 'max_us')} |")
    return out


def _scaling(records: list[Record]) -> list[str]:
    out = ["| engine | query | log-log slope | points (scale, span: rows read → median ms) |", "|---|---|---|---|"]
    for r in records:
        qid = r.benchmark.split("/", 1)[1]
        if r.status != "ok":
            out.append(f"| {r.engine} | {qid} | {_status(r)} | |")
            continue
        slope = r.figures.get("slope")
        pts = "; ".join(f"{p['scale']:g} {p['span']}: {p['rows_read']:,} → {p['median_ms']:.2f}"
                        for p in r.figures["points"])
        out.append(f"| {r.engine} | {qid} | {'–' if slope is None else f'{slope:.2f}'} | {pts} |")
    out += ["", "Slope 1: latency grows in proportion to the rows read; 0: independent of them."]
    return out


RENDERERS = {"tick-latency": _tick, "stream": _stream, "concurrency": _concurrency, "scaling": _scaling,
             "durability": render_durability}


def render_beyond(results: Results) -> str:
    """Markdown sections (``##``) for every suite beyond the paper that the run recorded."""
    out: list[str] = []
    for suite, render in RENDERERS.items():
        records = [r for r in results.records if r.benchmark.startswith(suite + "/")]
        if records:
            out += [f"## {SUITE_TITLES[suite]}", "", *render(records), ""]
    return "\n".join(out)
