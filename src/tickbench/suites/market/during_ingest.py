"""The market suite's queries during ingest (SPEC §2.3's last paragraph: "how does ingest affect
queries?"): one cell per (rate, writers), ``M-SNAP/ingest/rate=<r>/writers=<w>``, on an engine
with the :class:`~tickbench.engines.base.Ingest` capability. The same span of day D for
every engine (its first ``--ingest-minutes`` of quotes and trades) is replayed in time order into
a fresh store through the engine's streaming path while the users run M-SNAP over the rows
already visible (:mod:`tickbench.suites.market.ingest_ops`), beside two controls: the same
replay alone (no users) and the same users alone on the same store at the same watermarks. Every
answer is checked here against the reference over that user's probe times (M-SNAP reads only
rows at or before them, all of which were visible)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import polars as pl
from pydantic import BaseModel, ConfigDict

from tickbench import latency, verify
from tickbench.datasets.market.params import MarketParams
from tickbench.datasets.market.reference import answer
from tickbench.engines.base import Ingest
from tickbench.suites.base import rate_label
from tickbench.suites.harness import batch_size, bound
from tickbench.suites.market.users import SHARED_KEY, Users, client_bound, summarise_ms

if TYPE_CHECKING:
    from tickbench.results import Record
    from tickbench.run.cell import CellContext, Worker

PREFIX = "M-SNAP/ingest/"
NO_INGEST = "no ingest capability: the engine has no streaming path into the market tables"
LINGER_S = 0.01  # at a fixed rate a write carries the events due within this long (the stream suite's default)
RATES: tuple[int | None, ...] = (10_000, 100_000, None)
WRITERS: tuple[int, ...] = (1, 2)
# D's first 10 minutes: its opening burst and busiest minutes, about 5 % of the day at SF 1 by
# the generator's intraday profile (~140 k events): ~14 s at 10 k/s, and an estimated 1.5-3 min
# at the slowest streaming path of the 2026-11-26 run (ArcticDB, 750-1,700 events/s), so a
# cell's two replays fit its time budget (METHODOLOGY.md, "Queries during ingest").
SPAN_MINUTES = 10.0
CAP_SECONDS = 600.0  # one replay of the span stops after this long (noted: the span is then not covered)
VISIBLE_ON_COMMIT = "visible on commit"


class IngestFigures(BaseModel):
    """A during-ingest cell: the span replayed, the ingest's figures during the queries and alone
    beside the writers' ceiling, and M-SNAP's latency during the ingest and alone beside the
    users' ceiling, with the during/alone ratios."""

    model_config = ConfigDict(extra="forbid")
    rate: str | None = None
    writers: int | None = None
    ingest_users: int | None = None
    batch: int | None = None
    span_minutes: float | None = None
    span_start_ns: int | None = None
    #: Every replayed row has ``ts <= span_end_ns``, and every row of D up to it is replayed.
    span_end_ns: int | None = None
    cap_seconds: float | None = None
    path: str | None = None
    dataset_events: int | None = None
    replayed_events: int | None = None
    planned: int | None = None
    written: int | None = None
    ingest_seconds: float | None = None
    #: Rows acknowledged per second while the users queried: the rate achieved.
    throughput: float | None = None
    ingest_alone_events_per_s: float | None = None
    ingest_alone_written: int | None = None
    ingest_alone_seconds: float | None = None
    #: ``throughput`` over ``ingest_alone_events_per_s``.
    ingest_during_over_alone: float | None = None
    ingest_ceiling: float | None = None
    ingest_ceiling_sink: str | None = None
    ingest_client_bound: bool | None = None
    writers_mode: str | None = None
    watcher: str | None = None
    #: Why writers and watcher share the engine's process (an embedded store), else empty.
    one_process: str | None = None
    pinning: str | None = None
    visible_on_commit: bool | None = None
    #: acknowledged → visible, or ``None`` for an engine whose writes are visible on commit.
    visibility: dict[str, Any] | None = None
    watermark_polls: int | None = None
    during: dict[str, Any] | None = None
    #: The queries-alone control: the same users on the same store at the same watermarks.
    alone: dict[str, Any] | None = None
    query_alone_p50_ms: float | None = None
    #: M-SNAP's median during the ingest over its median alone.
    query_during_over_alone: float | None = None
    users_ceiling_qps: float | None = None
    users_ceiling_p50_ms: float | None = None
    users_client_bound: bool | None = None
    distinct_probe_sets: int | None = None


def ingest_id(rate: int | None, writers: int) -> str:
    return f"{PREFIX}rate={rate_label(rate)}/writers={writers}"


def parse_ingest_id(bench: str) -> tuple[int | None, int] | None:
    """``(rate, writers)`` of a during-ingest cell's id, or ``None`` for any other cell."""
    if not bench.startswith(PREFIX):
        return None
    parts = dict(p.split("=", 1) for p in bench[len(PREFIX):].split("/") if "=" in p)
    rate = parts.get("rate", "")
    return (None if rate == "max" else int(rate)), int(parts.get("writers", "0"))


def cell_ids(rates: tuple[int | None, ...], writers: tuple[int, ...], users: int) -> list[str]:
    return [ingest_id(r, w) for r in rates for w in writers] if users > 0 else []


def _phase(ns: list[list[int]], seconds: float) -> dict[str, Any]:
    """Latency over every user's queries of one phase, per user p50 and p99, and queries/s."""
    every = [x for u in ns for x in u]
    if not every:
        return {"queries": 0}
    h = latency.new()
    for x in every:
        latency.record(h, max(1, x))
    out = summarise_ms(sorted(x / 1e6 for x in every))
    per = [summarise_ms(sorted(x / 1e6 for x in u)) if u else {} for u in ns]
    return {**out, "queries": len(every), "qps": len(every) / seconds if seconds > 0 else None,
            "per_user": per, "hdr": latency.encode(h)}


class DuringIngest:
    """The during-ingest cells of one engine, on its started worker."""

    def __init__(self, ctx: CellContext, worker: Worker, users: Users) -> None:
        self.ctx, self.worker, self.users = ctx, worker, users

    def expected(self, user: int, p: MarketParams, times: tuple[int, ...]) -> pl.DataFrame:
        refs: dict[tuple[int, tuple[int, ...]], pl.DataFrame] = (
            self.ctx.shared.setdefault(SHARED_KEY, {}).setdefault("ingest_refs", {}))
        if (user, times) not in refs:
            refs[(user, times)] = answer("M-SNAP", self.ctx.ds, dataclasses.replace(p, T=times))
        return refs[(user, times)]

    def cell(self, bench: str) -> Record:
        parsed = parse_ingest_id(bench)
        if parsed is None:
            raise ValueError(f"not a during-ingest cell: {bench}")
        rate, writers = parsed
        ctx, o = self.ctx, self.ctx.opts
        base: dict[str, Any] = {"rate": rate_label(rate), "writers": writers, "ingest_users": o["ui_users"],
                                "batch": batch_size(rate, o["ingest_batch"], LINGER_S),
                                "span_minutes": float(o["ingest_minutes"]), "cap_seconds": float(o["ingest_seconds"])}
        for key in (bench, "M-SNAP/ingest", "M-SNAP"):
            if key in ctx.info.unsupported:
                return ctx.make(bench, "unsupported", ctx.info.unsupported[key], figures=base)
        if not issubclass(ctx.engine, Ingest):
            return ctx.make(bench, "unsupported", NO_INGEST, figures=base)
        return self.worker.attempt(bench, lambda: self._cell(bench, rate, writers, base), figures=base)

    def _cell(self, bench: str, rate: int | None, writers: int, base: dict[str, Any]) -> Record:
        ctx, proto = self.ctx, self.ctx.protocol
        params = self.users.params(ctx.opts["ui_users"])
        cap = base["cap_seconds"]
        r = self.worker.call(2 * cap + 600 + 2 * proto.timeout_s, op="market_ingest",
                             store=str(ctx.workdir / "market-ingest" / "store"), rate=rate, writers=writers,
                             minutes=base["span_minutes"], cap_s=cap, batch=base["batch"],
                             users=[p.as_dict() for p in params], repetitions=max(1, proto.repetitions))
        alone_ingest = r["alone"]
        figures: dict[str, Any] = {
            **base, "path": r["path"], "dataset_events": r["dataset_events"], "replayed_events": r["replayed_events"],
            "span_start_ns": r["open_ns"], "span_end_ns": r["span_end_ns"],
            "planned": r["planned"], "written": r["written"], "ingest_seconds": r["seconds"],
            "throughput": r["throughput"], "ingest_alone_events_per_s": alone_ingest["throughput"],
            "ingest_alone_written": alone_ingest["written"], "ingest_alone_seconds": alone_ingest["seconds"],
            "ingest_during_over_alone": (r["throughput"] / alone_ingest["throughput"]
                                         if alone_ingest["throughput"] else None),
            "ingest_ceiling": r["ceiling"], "ingest_ceiling_sink": r["ceiling_sink"],
            "ingest_client_bound": bound(r["throughput"], r["ceiling"]), "watermark_polls": r["polls"],
            "writers_mode": r["writers_mode"], "watcher": r["watcher"], "one_process": r["one_process"],
            "pinning": r["pinning"], "visible_on_commit": r["visible_on_commit"],
            "visibility": (None if r["visibility_hdr"] is None
                           else latency.summary(latency.decode(r["visibility_hdr"]))),
        }
        errors = list(r["errors"]) + [u["error"] for u in r["users"] if "error" in u]
        if errors:
            return ctx.make(bench, "error", "; ".join(errors)[:2000], figures=figures)
        during = _phase([u["during"] for u in r["users"]], r["during_seconds"])
        alone = _phase([u["alone"] for u in r["users"]], r["alone_seconds"])
        noop = _phase([r["noop"]["ns"]], r["noop"]["seconds"])
        figures.update({"during": during, "alone": alone, "query_alone_p50_ms": alone.get("p50_ms"),
                        "users_ceiling_qps": noop.get("qps"), "users_ceiling_p50_ms": noop.get("p50_ms")})
        if during.get("p50_ms") and alone.get("p50_ms"):
            figures["query_during_over_alone"] = during["p50_ms"] / alone["p50_ms"]
        figures["users_client_bound"] = client_bound({"qps": alone.get("qps"), "p50_ms": alone.get("p50_ms")},
                                                     {"qps": noop.get("qps"), "p50_ms": noop.get("p50_ms")})
        probe_sets = 0
        for i, (u, p) in enumerate(zip(r["users"], params, strict=True)):
            for group in u["answers"]:
                times = tuple(int(t) for t in group["T"])
                probe_sets += 1
                want = self.expected(i, p, times)
                for table in group["tables"]:
                    verdict = verify.compare(verify.normalize(pl.from_arrow(table), want), want)  # type: ignore[arg-type]
                    if not verdict.ok:
                        return ctx.make(bench, "wrong", f"user {i}, probe times up to {times[-1]} ns: {verdict.reason}",
                                        verified=False, figures=figures)
        figures["distinct_probe_sets"] = probe_sets
        notes = []
        if not during.get("queries"):
            notes.append("no M-SNAP query ran during the ingest (no checkpoint of the replay was proved visible "
                         "before the writers finished)")
        if figures["ingest_client_bound"]:
            notes.append("ingest client-bound: within 2× of the writers' ceiling")
        for what, written in (("during the queries", r["written"]), ("alone", alone_ingest["written"])):
            if written < r["planned"]:
                notes.append(f"{r['planned'] - written:,} of the span's {r['planned']:,} events not sent {what} "
                             f"within {cap:g} s: the engine took them more slowly than that")
        if r["one_process"]:
            notes.append(r["one_process"])
        samples = [x for u in r["users"] for x in u["during"]] or [x for u in r["users"] for x in u["alone"]]
        return ctx.make(bench, "ok", verified=True, samples_ns=samples, rows=r["written"], figures=figures,
                        notes="; ".join(notes))


def visible_text(f: dict[str, Any]) -> str:
    """A cell's acknowledged → visible p50 in ms, or "visible on commit"."""
    if f.get("visible_on_commit"):
        return VISIBLE_ON_COMMIT
    vis = f.get("visibility") or {}
    return "—" if not vis.get("count") else f"{vis['p50_us'] / 1e3:,.2f} ms"


def headline(rec: Record) -> str:
    f = rec.figures
    d = f.get("during") or {}
    if not d.get("p50_ms") or not f.get("query_alone_p50_ms"):
        return f"{f.get('throughput') or 0:,.0f} events/s"
    ingest = f.get("ingest_during_over_alone")
    return (f"{f.get('throughput') or 0:,.0f} ev/s ({'—' if ingest is None else f'{ingest:,.2f}'}× alone) · M-SNAP p50 "
            f"{d['p50_ms']:,.1f} ms ({f.get('query_during_over_alone') or 0:,.2f}× alone)")
