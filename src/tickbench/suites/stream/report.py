"""The stream suite's table and charts (spectra of submit→ack, visibility, snapshot query)."""

from __future__ import annotations

from typing import Any

from tickbench.report.widgets import (
    Row,
    Table,
    hdr,
    markdown_table,
    ok,
    pcts,
    section_html,
    spectra_chart,
    us_text,
)
from tickbench.results import Record
from tickbench.suites.base import AddChart

DESCRIPTION = ("Events replayed at a target rate by n writer processes fed batches encoded before the clock, "
               "each engine's fastest streaming path; the harness ceiling (a sink through the same writers) and "
               "the engine's bulk path on the same rows are measured in every cell; latency runs from each "
               "event's intended send time (no coordinated omission); visibility is acknowledged → counted by a "
               "polling query; the snapshot query reads the latest book row per symbol during and after the ingest.")


def stream_parts(bench: str) -> dict[str, str]:
    """``stream/rate=2000/writers=1`` → ``{"rate": "2000", "writers": "1"}``."""
    return dict(p.split("=", 1) for p in bench.split("/")[1:])


def rate_text(f: dict[str, Any]) -> str:
    """The achieved rate, marked ``client-bound`` when within 2× of the harness ceiling (then
    it is the harness's figure, not the engine's)."""
    text = f"{f['throughput']:,.0f}"
    return f"{text} (client-bound)" if f.get("client_bound") else text


def table(records: list[Record]) -> Table:
    rows = []
    for r in records:
        parts = stream_parts(r.benchmark)
        f = r.figures
        row = Row(r, [r.engine, parts.get("rate", ""), parts.get("writers", ""),
                      f"{f.get('tables') or 'trades,book'} · {f.get('batch') or '–'}"])
        if r.status == "ok":
            vis = f.get("visibility")
            ceiling = f.get("ceiling")
            bulk = f.get("pct_of_bulk")
            row.values = [f"{f['written']:,}", rate_text(f), f"{ceiling:,.0f}" if ceiling else "–",
                          f"{bulk:.0f} %" if bulk is not None else "–", *pcts(f.get("latency")),
                          us_text(vis, "p50_us"), us_text(vis, "p99_us"),
                          us_text(f.get("snapshot_during"), "p50_us"), us_text(f.get("snapshot_after"), "p50_us")]
        rows.append(row)
    return Table("stream", ["engine", "target rate", "writers", "tables · events per write", "events",
                            "achieved events/s", "harness ceiling", "% of bulk", "submit→ack p50", "p99", "p99.9",
                            "max", "visibility p50", "p99", "snapshot during p50", "after p50"],
                 4, rows,
                 notes=["Latency is from each event's intended send time (no coordinated omission); visibility "
                        "is acknowledged → counted by a polling query.",
                        "Harness ceiling: rows/s the same writers (same batches, writer count, client) offer a "
                        "sink that acknowledges without storing; an achieved rate within 2× of it is marked "
                        "client-bound: the harness, not the engine, may be its limit.",
                        "% of bulk: the achieved rate over the rate of the same rows through the engine's bulk "
                        "path in the same cell."],
                 groups=[("", 8), ("submit→ack, from the intended send time", 4), ("visibility", 2),
                         ("snapshot query", 2)],
                 text_columns=frozenset({1}))


def markdown(records: list[Record]) -> list[str]:
    return markdown_table(table(records))


def html(records: list[Record], add: AddChart) -> str:
    names = []
    for r in ok(records):
        p = stream_parts(r.benchmark)
        rate = p.get("rate", "?")
        names.append((r, f"{r.engine} · {rate if rate == 'max' else rate + '/s'} · {p.get('writers', '?')} "
                         f"writer{'' if p.get('writers') == '1' else 's'}"))
    charts = []
    for div_id, title, parts in (
        ("chart-beyond-stream-latency", "submit→ack from the intended send time (solid) and the write "
         "call's own service time (dotted)", (("", "latency", "solid"), (" · service", "service", "dot"))),
        ("chart-beyond-stream-visibility", "update visibility: acknowledged → counted",
         (("", "visibility", "solid"),)),
        ("chart-beyond-stream-snapshot", "market snapshot query during the ingest (solid) and after it "
         "(dotted)", ((" · during", "snapshot_during", "solid"), (" · after", "snapshot_after", "dot"))),
    ):
        lines = [(name, [(suffix, hdr(r, key), dash) for suffix, key, dash in parts]) for r, name in names]
        chart = spectra_chart(add, div_id, title, lines)
        if chart:
            charts.append(chart)
    return section_html(table(records), charts, records, DESCRIPTION)
