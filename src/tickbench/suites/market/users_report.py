"""The market suite's users in the reports (SPEC §2.3's last paragraph): a table of every users
cell (per-user spread, all users' queries/s, the harness's ceiling beside them, the memory), two
charts of M-VWAB-12D against the number of users: latency (one line per engine for p50, one for
p99) and queries/s; and M-SNAP during ingest against its controls, per engine."""

from __future__ import annotations

from html import escape
from typing import Any

from tickbench.report.widgets import Grid, Item, SuiteView, chart_title, log_ticks
from tickbench.results import Record
from tickbench.suites.market.during_ingest import parse_ingest_id, visible_text
from tickbench.suites.market.users import USERS_QUERIES, parse_id

INTRO = ("STAC-M3's users: M-VWAB-12D with 1, 10, 50 and 100 users at once, each its own client with its own "
         "disjoint block of instruments and 12-day window; M-SNAP and M-STATS-UI with 10 users, each with its own "
         "times and requests. Each user is a process of its own with its own connection or open of the store, "
         "or, where the engine admits one open per process (or holds its data in memory), a thread of the "
         "engine's process with its own client; all start together and each times at least 20 queries of its "
         "own. Every answer of every user is checked against the reference over that user's parameters. Latency "
         "is each query's, client-side; queries/s counts every user's timed queries.")
BAD = ("wrong", "error", "timeout")


def records(view: SuiteView) -> list[Record]:
    """The users cells, by query, then engine, then number of users."""
    order = {q: i for i, q in enumerate(USERS_QUERIES)}
    engines = {e: i for i, e in enumerate(view.engines)}
    mine = [(p, r) for r in view.records if (p := parse_id(r.benchmark)) is not None]
    return [r for p, r in sorted(mine, key=lambda x: (order.get(x[0][0], 99), engines.get(x[1].engine, 99), x[0][1]))]


def headline(rec: Record) -> str:
    """A users cell in one line: p50 and p99 over every user's queries, all users' queries/s."""
    f = rec.figures
    bound = " ⚠" if f.get("client_bound") else ""
    return f"p50 {f.get('p50_ms', 0):,.1f} · p99 {f.get('p99_ms', 0):,.1f} ms · {f.get('qps') or 0:,.1f} q/s{bound}"


def _mib(n: int | None) -> str:
    return "" if not n else f"{n / 2**20:,.0f} MiB"


def table(view: SuiteView) -> Grid:
    g = Grid(["query", "engine", "users", "p10 ms", "p50 ms", "p90 ms", "p99 ms", "max ms",
              "slowest user p50 / fastest", "the same, each alone", "largest slowdown / smallest", "queries/s",
              "harness ceiling q/s", "peak RSS", "how the users run"])
    limits: dict[str, str] = {}
    for r in records(view):
        qid, users = parse_id(r.benchmark) or ("", 0)
        f = r.figures
        if f.get("limit"):
            limits[r.engine] = str(f["limit"])
        if r.status != "ok":
            g.add(qid, r.engine, Item(str(users), "num"),
                  Item(r.status, "num bad" if r.status in BAD else "num na", r.reason[:300], span=12))
            continue
        bound = " ⚠" if f.get("client_bound") else ""
        g.add(qid, r.engine, Item(str(users), "num"),
              *(Item("—" if f.get(k) is None else f"{f[k]:,.2f}", "num")
                for k in ("p10_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms")),
              *(Item("—" if f.get(k) is None else f"{f[k]:,.2f}", "num")
                for k in ("spread", "alone_spread", "slowdown_spread")),
              Item(f"{f.get('qps') or 0:,.1f}{bound}", "num", r.notes),
              Item("—" if f.get("ceiling_qps") is None else f"{f['ceiling_qps']:,.0f}", "num"),
              Item(_mib(f.get("rss_peak_bytes")), "num"),
              str(f.get("model", "")) + (f"; {f['packed']}" if f.get("packed") else ""))
    note = ("p10 … max over every timed query of every user (nearest rank; each user's own in the table of each "
            "user); ⚠ client-bound: the queries/s or the median latency is within 2× of the harness's own ceiling "
            "(the same users, in the same processes, decoding a real answer of theirs as their client does, with "
            "no engine behind it), so the client may be what limits it. Each alone: each user's query with no "
            "other user running (the users' baskets and windows differ in size, and on an engine whose work "
            "follows them so do their medians); a user's slowdown is its median among the users over its median "
            "alone: the largest over the smallest is near 1 where each query waits its turn and then runs at its "
            "own speed, and large where the engine shares its time among the running queries (a short query is "
            "then slowed most). Peak RSS: the "
            "users' processes and the engine's servers while the users ran, each page once (shared memory, "
            "e.g. a server's buffers mapped by every backend, counted once).")
    if limits:
        note += " The engines' own limits: " + "; ".join(f"{e}: {why}" for e, why in sorted(limits.items())) + "."
    g.notes.append(note)
    return g


def per_user(view: SuiteView) -> Grid:
    g = Grid(["query", "engine", "users", "user", "pid", "queries", "p10 ms", "p50 ms", "p90 ms", "p99 ms",
              "max ms", "alone p50 ms", "slowdown", "began s", "from s", "to s"])
    for r in records(view):
        if r.status != "ok":
            continue
        qid, users = parse_id(r.benchmark) or ("", 0)
        for u in r.figures.get("per_user") or []:
            g.add(qid, r.engine, Item(str(users), "num"), Item(str(u["user"]), "num"),
                  Item(str(u.get("pid") or "—"), "num"), Item(str(u["n"]), "num"),
                  *(Item("—" if u.get(k) is None else f"{u[k]:,.2f}", "num")
                    for k in ("p10_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms", "alone_p50_ms", "slowdown", "began_s",
                             "from_s", "to_s")))
    g.notes.append("alone p50 ms: the user's query with no other user running; slowdown: its p50 over that; "
                   "began s: the user's start (its untimed warm-up's); from s … to s: its first timed query's start "
                   "and its last's end; all in seconds after the users' common start; pid: the process the user "
                   "ran in.")
    return g


def charts(view: SuiteView) -> str:
    """Latency and queries/s of M-VWAB-12D against the number of users, one line per engine."""
    if view.add is None:
        return ""
    by_engine: dict[str, list[Record]] = {}
    for r in records(view):
        if r.status == "ok" and (parse_id(r.benchmark) or ("", 0))[0] == "M-VWAB-12D":
            by_engine.setdefault(r.engine, []).append(r)
    if not by_engine:
        return ""
    data: list[dict[str, Any]] = []
    ticks: set[int] = set()
    lat: list[float | None] = []
    for engine, recs in by_engine.items():
        users = [int(r.figures["users"]) for r in recs]
        ticks.update(users)
        color = view.colors.get(engine, "#333")
        name = escape(engine)
        for key, dash in (("p50_ms", "solid"), ("p99_ms", "dot")):
            ys = [r.figures[key] for r in recs]
            lat += ys
            data.append({"type": "scatter", "mode": "lines+markers", "x": users, "y": ys, "legendgroup": name,
                         "name": f"{name} {key[:3]}", "line": {"color": color, "dash": dash},
                         "marker": {"color": color}, "hovertemplate": f"{name} · %{{x}} users: %{{y:,.3g}} ms "
                         f"({key[:3]})<extra></extra>"})
        data.append({"type": "scatter", "mode": "lines+markers", "x": users, "y": [r.figures["qps"] for r in recs],
                     "xaxis": "x2", "yaxis": "y2", "legendgroup": name, "showlegend": False,
                     "line": {"color": color}, "marker": {"color": color},
                     "hovertemplate": f"{name} · %{{x}} users: %{{y:,.1f}} queries/s<extra></extra>"})
    tick = sorted(ticks)
    xaxis = {"type": "log", "tickvals": tick, "ticktext": [str(t) for t in tick], "title": {"text": "users"}}
    layout = {
        "height": 360, "margin": {"l": 70, "r": 20, "t": 36, "b": 50}, "font": {"size": 12},
        "legend": {"orientation": "h", "x": 0, "y": -0.22, "yanchor": "top"},
        "xaxis": {**xaxis, "domain": [0, 0.44]},
        "yaxis": {"type": "log", "title": {"text": "ms · log scale"}, "automargin": True, **log_ticks(lat)},
        "xaxis2": {**xaxis, "domain": [0.56, 1], "anchor": "y2"},
        "yaxis2": {"anchor": "x2", "title": {"text": "queries/s, all users"}, "rangemode": "tozero"},
        "annotations": [chart_title("M-VWAB-12D latency (p50 solid, p99 dotted)"),
                        chart_title("M-VWAB-12D queries/s", "x2 domain")],
    }
    return view.add("chart-market-users", data, layout)


# -- during ingest ---------------------------------------------------------------------------

INGEST_INTRO = ("How does ingest affect queries? The same span of day D for every engine (its first minutes of quotes "
                "and trades) replayed in time order into a fresh store through the engine's streaming path, at fixed "
                "rates and as fast as it takes them, by 1..n writers, while the users run M-SNAP over the rows already "
                "visible (each answer checked against the reference at a watermark proved visible when the query "
                "began). Controls beside each cell: the same replay alone (same writers and rate, no users, a fresh "
                "store), and the same users alone on the same store once the span is in, binding the same probe "
                "times (the same watermarks) as during the ingest.")


def ingest_records(view: SuiteView) -> list[Record]:
    engines = {e: i for i, e in enumerate(view.engines)}
    mine = [r for r in view.records if parse_ingest_id(r.benchmark) is not None]
    return sorted(mine, key=lambda r: (engines.get(r.engine, 99), r.benchmark))


def _ms(phase: dict[str, Any] | None, key: str) -> str:
    v = (phase or {}).get(key)
    return "—" if v is None else f"{v:,.2f}"


def _ratio(v: float | None) -> str:
    return "—" if v is None else f"{v:,.2f}×"


def _span(f: dict[str, Any]) -> str:
    if f.get("span_minutes") is None or f.get("replayed_events") is None:
        return "—"
    return f"{f['span_minutes']:g} min · {f['replayed_events']:,} ev"


def _processes(f: dict[str, Any]) -> str:
    if not f.get("writers_mode"):
        return "—"
    watcher = str(f.get("watcher") or "")
    return f"{f['writers_mode']}; watcher: {'a process' if watcher.startswith('a process') else 'a thread'}"


def ingest_table(view: SuiteView) -> Grid:
    g = Grid(["engine", "rate", "writers", "span of D", "events/s during", "events/s alone", "during / alone",
              "writers' ceiling", "visible p50", "M-SNAP p50 during", "p50 alone", "during / alone", "p99 during",
              "p99 alone", "queries during", "users' ceiling q/s", "writers and watcher"])
    for r in ingest_records(view):
        f = r.figures
        key: list[Item | str] = [r.engine, str(f.get("rate", "")), Item(str(f.get("writers", "")), "num")]
        if r.status != "ok":
            g.add(*key, Item(r.status, "num bad" if r.status in BAD else "num na", r.reason[:300], span=14))
            continue
        d, a = f.get("during") or {}, f.get("alone") or {}
        mark = " ⚠" if f.get("ingest_client_bound") else ""
        umark = " ⚠" if f.get("users_client_bound") else ""
        alone_rate = f.get("ingest_alone_events_per_s")
        g.add(*key, Item(_span(f), "num"), Item(f"{f.get('throughput') or 0:,.0f}{mark}", "num", r.notes),
              Item("—" if alone_rate is None else f"{alone_rate:,.0f}", "num"),
              Item(_ratio(f.get("ingest_during_over_alone")), "num"),
              Item(f"{f.get('ingest_ceiling') or 0:,.0f}", "num", f.get("ingest_ceiling_sink") or ""),
              Item(visible_text(f), "num"),
              Item(_ms(d, "p50_ms"), "num"), Item(_ms(a, "p50_ms") + umark, "num"),
              Item(_ratio(f.get("query_during_over_alone")), "num"),
              Item(_ms(d, "p99_ms"), "num"), Item(_ms(a, "p99_ms"), "num"),
              Item(f"{d.get('queries', 0):,}", "num"),
              Item("—" if f.get("users_ceiling_qps") is None else f"{f['users_ceiling_qps']:,.0f}", "num"),
              Item(_processes(f), "", f.get("one_process") or ""))
    g.notes.append("events/s: rows acknowledged per second, the rate achieved (⚠ within 2× of the same writers' rate "
                   "into the harness's sink: client-bound); alone: the same replay with no users; visible: from a "
                   "write's acknowledgement to the end of the first check that proved its rows visible (an upper "
                   "bound), or \"visible on commit\" for an engine whose acknowledged writes are (checked); M-SNAP "
                   "latencies in ms over every user's queries; alone: the same users, probe times and store with no "
                   "writer running (⚠ within 2× of the same users against a no-op query); writers and watcher: "
                   "processes of their own, or threads of the engine's process where the engine admits one "
                   "process on its store (the reason in the cell).")
    return g
