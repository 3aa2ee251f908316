"""The durability suite's table (Markdown): per engine and durability setting, what an
acknowledgement promises, rows acknowledged and lost, recovery time and the write rate the
setting allowed — the performance-versus-durability trade-off side by side."""

from __future__ import annotations

from html import escape

from tickbench.report.widgets import chart_title, markdown_to_html, md_code, md_text
from tickbench.results import Record
from tickbench.suites.base import AddChart

TITLE = "Durability under kill -9"


def _status(r: Record) -> str:
    text = f"{r.status}: {r.reason}" if r.reason else r.status
    return text.replace("|", "\\|").replace("\n", " ")


def render_durability(records: list[Record]) -> list[str]:
    out = ["| engine | setting | promises no loss | killed | acknowledged | lost | changed | in flight, kept | "
           "recovery s | writes/s | write p99 |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        f = r.figures
        setting = md_text(f.get("setting", r.benchmark.split("/", 1)[1]))
        if r.status not in ("ok", "wrong") or "acknowledged" not in f:
            out.append(f"| {md_text(r.engine)} | {setting} | {md_text(_status(r))} |||||||||")
            continue
        lat = f["latency"]
        p99 = f"{lat['p99_us'] / 1e3:,.2f} ms" if lat.get("count") else "–"
        lost = f"**{f['lost']:,}**" if f["lost"] else "0"
        out.append(f"| {md_text(r.engine)} | {setting} | {'yes' if f['durable'] else 'no'} | "
                   f"{md_text(f['killed'].split(' (')[0])} | "
                   f"{f['acknowledged']:,} | {lost} | {f['changed']:,} | {f['unacknowledged_present']:,} | "
                   f"{f['recovery_s']:.2f} | {f['throughput']:,.0f} | {p99} |")
    out += ["", "Each setting: writers stream one event per write; at a seeded point the engine's processes "
            "are SIGKILLed (an embedded engine's writer process); after the restart every acknowledged row is "
            "looked up. *Lost*: acknowledged, then missing; *recovery*: restart until the first answered query.", ""]
    for r in records:
        if r.figures.get("meaning"):
            out.append(f"- {md_text(r.engine)} {md_code(r.figures['setting'])}: {md_text(r.figures['meaning'])}")
    wrong = [r for r in records if r.status == "wrong"]
    out += [f"- ✘ {md_text(r.engine)} {md_code(r.figures.get('setting', ''))}: {md_text(_status(r))}" for r in wrong]
    return out


def chart(records: list[Record], add: AddChart) -> str | None:
    """The trade-off: each (engine, setting)'s write rate, its bar red where acknowledged
    rows were lost, labelled with how many."""
    rows = [r for r in records if r.status in ("ok", "wrong") and "acknowledged" in r.figures]
    if not rows:
        return None
    names = [escape(f"{r.engine} · {r.figures['setting']}") for r in rows]
    lost = [int(r.figures["lost"]) for r in rows]
    data = [{
        "type": "bar", "orientation": "h", "y": names, "x": [r.figures["throughput"] for r in rows],
        "marker": {"color": ["#d62728" if n else "#2ca02c" for n in lost]},
        "text": [f"lost {n:,} of {r.figures['acknowledged']:,}" for n, r in zip(lost, rows, strict=True)],
        "textposition": "auto", "hoverinfo": "x+text", "showlegend": False,
    }]
    layout = {
        "height": 120 + 34 * len(rows), "margin": {"l": 20, "r": 20, "t": 36, "b": 50}, "font": {"size": 12},
        "xaxis": {"title": {"text": "acknowledged writes/s, one event per write"}, "rangemode": "tozero"},
        "yaxis": {"automargin": True, "autorange": "reversed"},
        "annotations": [chart_title("write rate per durability setting; red: acknowledged rows lost to kill -9")],
    }
    return add("chart-beyond-durability", data, layout)



def markdown(records: list[Record]) -> list[str]:
    return render_durability(records)


def html(records: list[Record], add: AddChart) -> str:
    """Its Markdown table, as HTML, under its trade-off chart."""
    c = chart(records, add)
    box = f'<div class="chartbox">{c}</div>' if c else ""
    return box + markdown_to_html(render_durability(records))
