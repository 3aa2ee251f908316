"""The durability suite's table (Markdown): per engine and durability setting, what an
acknowledgement promises, rows acknowledged and lost, recovery time and the write rate the
setting allowed — the performance-versus-durability trade-off side by side."""

from __future__ import annotations

from tickbench.results import Record

TITLE = "Durability under kill -9"


def _status(r: Record) -> str:
    text = f"{r.status}: {r.reason}" if r.reason else r.status
    return text.replace("|", "\\|").replace("\n", " ")


def render_durability(records: list[Record]) -> list[str]:
    out = ["| engine | setting | promises no loss | killed | acknowledged | lost | changed | in flight, kept | "
           "recovery s | writes/s | write p99 |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        f = r.figures
        setting = f.get("setting", r.benchmark.split("/", 1)[1]).replace("|", "\\|")
        if r.status not in ("ok", "wrong") or "acknowledged" not in f:
            out.append(f"| {r.engine} | {setting} | {_status(r)} |||||||||")
            continue
        lat = f["latency"]
        p99 = f"{lat['p99_us'] / 1e3:,.2f} ms" if lat.get("count") else "–"
        lost = f"**{f['lost']:,}**" if f["lost"] else "0"
        out.append(f"| {r.engine} | {setting} | {'yes' if f['durable'] else 'no'} | {f['killed'].split(' (')[0]} | "
                   f"{f['acknowledged']:,} | {lost} | {f['changed']:,} | {f['unacknowledged_present']:,} | "
                   f"{f['recovery_s']:.2f} | {f['throughput']:,.0f} | {p99} |")
    out += ["", "Each setting: writers stream one event per write; at a seeded point the engine's processes "
            "are SIGKILLed (an embedded engine's writer process); after the restart every acknowledged row is "
            "looked up. *Lost*: acknowledged, then missing; *recovery*: restart until the first answered query.", ""]
    for r in records:
        if r.figures.get("meaning"):
            out.append(f"- {r.engine} `{r.figures['setting']}`: {r.figures['meaning']}")
    wrong = [r for r in records if r.status == "wrong"]
    out += [f"- ✘ {r.engine} `{r.figures.get('setting', '')}`: {_status(r)}" for r in wrong]
    return out
