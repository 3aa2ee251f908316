"""The stream suite's declaration and protocol (METHODOLOGY.md, "Streaming ingest")."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from tickbench import latency
from tickbench.results import Record
from tickbench.run.cell import CellContext, Worker
from tickbench.suites.base import Option, OptionError, Options, Suite, WorkerOp, parse_counts, parse_rates, rate_label
from tickbench.suites.harness import CLIENT_BOUND_FACTOR, bound
from tickbench.suites.ingest import requires_ingest
from tickbench.suites.stream import report as report_module
from tickbench.suites.stream.ops import stream_op

if TYPE_CHECKING:
    from tickbench.engines.base import Engine, EngineInfo

RATES: tuple[int | None, ...] = (10_000, 100_000, 1_000_000, None)  # None: as fast as possible


def parse_tables(text: str) -> tuple[str, ...]:
    """``"trades,book"`` → ``("trades", "book")``: the tables whose events a cell replays."""
    items = tuple(s.strip() for s in text.split(",") if s.strip())
    if not items or any(t not in ("trades", "book") for t in items) or len(set(items)) != len(items):
        raise OptionError(f"--stream-tables {text}: expected trades,book, book or trades")
    return items


def stream_id(rate: int | None, writers: int) -> str:
    return f"stream/rate={rate_label(rate)}/writers={writers}"


class StreamFigures(BaseModel):
    """A stream cell: its target, then what was sent, acknowledged, read back and counted,
    and the latency histograms (submit→ack, service, visibility, snapshot query)."""

    model_config = ConfigDict(extra="forbid")
    rate: str | None = None
    writers: int | None = None
    max_batch: int | None = None
    seconds_cap: float | None = None
    planned: int | None = None
    written: int | None = None
    read: int | None = None
    counted: int | None = None
    written_by_table: dict[str, int] | None = None
    read_by_table: dict[str, int] | None = None
    dataset_events: int | None = None
    seconds: float | None = None
    throughput: float | None = None
    polls: int | None = None
    latency: dict[str, Any] | None = None
    service: dict[str, Any] | None = None
    visibility: dict[str, Any] | None = None
    snapshot_during: dict[str, Any] | None = None
    snapshot_after: dict[str, Any] | None = None
    # -- since the harness rework (figures model 2); absent in older results ----------------
    #: Events per payload, the tables replayed, the client path and how the writers ran.
    batch: int | None = None
    linger: float | None = None
    tables: str | None = None
    path: str | None = None
    writer_mode: str | None = None
    pinning: str | None = None
    encode_seconds: float | None = None
    encoded_bytes: int | None = None
    writer_rss_bytes: list[int] | None = None
    #: The harness ceiling: rows/s the same writers offer the sink (same batch, writers).
    ceiling: float | None = None
    ceiling_sink: str | None = None
    ceiling_null: float | None = None
    ceiling_loopback: float | None = None
    #: Whether ``throughput`` is within 2× of ``ceiling`` (the harness may be the limit).
    client_bound: bool | None = None
    #: Rows sent, acknowledged (``throughput``, ``latency``), visible and durable: rates
    #: and latency distributions (sent and acknowledged from each row's intended send time).
    sent_rate: float | None = None
    sent: dict[str, Any] | None = None
    visible_rate: float | None = None
    durability: str | None = None
    durable_rate: float | None = None
    durable: dict[str, Any] | None = None
    durable_note: str | None = None
    #: The same rows through the engine's bulk path in the same cell.
    bulk_rows: int | None = None
    bulk_seconds: float | None = None
    bulk_rate: float | None = None
    bulk_visible_seconds: float | None = None
    #: ``throughput`` as a percentage of ``bulk_rate``.
    pct_of_bulk: float | None = None


#: Worker reply fields recorded as they are.
PLAIN = ("batch", "path", "writer_mode", "pinning", "encode_seconds", "encoded_bytes", "writer_rss_bytes", "ceiling",
         "ceiling_sink", "ceiling_null", "ceiling_loopback", "sent_rate", "visible_rate", "durability",
         "durable_rate", "durable_note", "bulk_rows", "bulk_seconds", "bulk_rate", "bulk_visible_seconds")


def client_bound_note(rate: float, ceiling: float) -> str:
    """Why a cell is marked client-bound."""
    return (f"client-bound: {rate:,.0f} rows/s is within {CLIENT_BOUND_FACTOR:g}× of the harness ceiling "
            f"({ceiling:,.0f} rows/s offered to the sink by the same writers): not the engine's rate")


def _positive(v: float) -> str | None:
    return None if v > 0 else "must be positive"


class StreamSuite(Suite):
    name = "stream"
    title = "Streaming ingest (after STAC-M3)"
    order = 20
    summary = "the day's events replayed at fixed rates by n writers: throughput, latency, visibility"
    options = (
        Option("stream_rates", RATES, "target rates, events/s or max", kind="text",
               parse=lambda t: parse_rates(t, "--stream-rates"),
               text_default="10000,100000,1000000,max", decode=lambda raw: tuple(raw)),
        Option("stream_writers", (1, 2), "writer clients per cell, e.g. 1,2,4", kind="text",
               parse=lambda t: parse_counts(t, "--stream-writers"), text_default="1,2", decode=tuple),
        Option("stream_seconds", 10.0, "the most seconds of events one cell replays", kind="float", check=_positive),
        Option("stream_max_batch", 1000, "events per write as fast as possible, and the most at a fixed rate",
               check=lambda v: None if v >= 1 else "must be at least 1"),
        Option("stream_linger", 0.01, "at a fixed rate, a write carries the events due within this many seconds",
               kind="float", check=_positive),
        Option("stream_tables", ("trades", "book"), "the tables replayed: trades,book, book or trades", kind="text",
               parse=parse_tables, text_default="trades,book", decode=tuple),
    )
    report: ClassVar[ModuleType | None] = report_module
    figures_model = StreamFigures
    endpoint_refusal = ("its ingest stores restart the server with each durability setting (a server-wide setting) "
                        "and live beside the loaded tables in stores of their own")
    worker_ops: ClassVar[dict[str, WorkerOp]] = {"stream": stream_op}

    def requires(self, engine: type[Engine], info: EngineInfo) -> str | None:
        return requires_ingest(self.name, engine, info)

    def cell_ids(self, opts: Options, engine: type[Engine]) -> list[str]:
        return [stream_id(r, w) for r in opts["stream_rates"] for w in opts["stream_writers"]]

    def run(self, ctx: CellContext, todo: list[str]) -> None:
        worker = ctx.worker("stream")
        if not worker.start_or_fail(todo):
            return
        try:
            for rate in ctx.opts["stream_rates"]:
                for writers in ctx.opts["stream_writers"]:
                    bench = stream_id(rate, writers)
                    if bench in todo:
                        ctx.on_record(self._cell(ctx, worker, bench, rate, writers))
        finally:
            worker.close()

    def _cell(self, ctx: CellContext, worker: Worker, bench: str, rate: int | None, writers: int) -> Record:
        o = ctx.opts
        base: dict[str, Any] = {"rate": rate_label(rate), "writers": writers, "max_batch": o["stream_max_batch"],
                                "seconds_cap": o["stream_seconds"], "linger": o["stream_linger"],
                                "tables": ",".join(o["stream_tables"])}

        def body() -> Record:
            r = worker.call(8 * o["stream_seconds"] + 600 + ctx.protocol.timeout_s, op="stream",
                            store=str(ctx.workdir / "stream" / "store"), rate=rate, writers=writers,
                            seconds=o["stream_seconds"], max_batch=o["stream_max_batch"],
                            linger=o["stream_linger"], tables=list(o["stream_tables"]))
            figures = {
                **base, **{k: r[k] for k in ("planned", "written", "read", "counted", "written_by_table",
                                              "read_by_table", "dataset_events", "seconds", "throughput", "polls",
                                              *PLAIN)},
                "client_bound": bound(r["throughput"], r["ceiling"]),
                "pct_of_bulk": 100 * r["throughput"] / r["bulk_rate"] if r.get("bulk_rate") else None,
                "sent": latency.summary(latency.decode(r["sent_hdr"])) if r["sent_hdr"] else None,
                "durable": latency.summary(latency.decode(r["durable_hdr"])) if r["durable_hdr"] else None,
                "latency": latency.summary(latency.decode(r["latency_hdr"])),
                "service": latency.summary(latency.decode(r["service_hdr"])),
                "visibility": latency.summary(latency.decode(r["visibility_hdr"])),
                "snapshot_during": latency.summary(latency.decode(r["snapshot_during_hdr"])),
                "snapshot_after": latency.summary(latency.decode(r["snapshot_after_hdr"])),
            }
            notes = ""
            if r["written"] < r["planned"]:
                notes = (f"{r['planned'] - r['written']} of {r['planned']} events not sent before the cell's time "
                         "limit: the engine fell behind the target rate")
            if figures["client_bound"]:
                notes = "; ".join(filter(None, [notes, client_bound_note(r["throughput"], r["ceiling"])]))
            if r["errors"]:
                return ctx.make(bench, "error", "; ".join(r["errors"])[:2000], figures=figures)
            if (r["read"] != r["written"] or r["counted"] != r["written"]
                    or r["read_by_table"] != r["written_by_table"]):
                return ctx.make(bench, "wrong", f"{r['written']} rows acknowledged, {r['read']} read back, "
                                f"{r['counted']} counted", verified=False, figures=figures)
            return ctx.make(bench, "ok", verified=True, samples_ns=[round(r["seconds"] * 1e9)], rows=r["written"],
                            figures=figures, notes=notes)

        return worker.attempt(bench, body, figures=base)

    def headline(self, record: Record) -> str:
        f = record.figures
        mark = " · client-bound" if f.get("client_bound") else ""
        bulk = f" · {f['pct_of_bulk']:.0f} % of bulk" if f.get("pct_of_bulk") is not None else ""
        return (f"{f['throughput']:,.0f} events/s{mark}{bulk} · p99 {f['latency'].get('p99_us', 0) / 1e3:,.1f} ms")


SUITE = StreamSuite()
