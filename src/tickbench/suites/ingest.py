"""What the ingest suites (tick-latency, stream, durability) share: the requirement they put
on an engine, and the synthetic tick events whose every field derives from the event's number
(so a row read back is checked field by field)."""

from __future__ import annotations

from typing import Any

from tickbench.engines.base import Engine, EngineInfo, Ingest

NO_INGEST = "no ingest capability implemented"

TICK_BASE_NS = 1_656_633_600 * 1_000_000_000  # 2022-07-01T00:00Z, outside the dataset's days
TICK_STEP_NS = 1_000  # one event per µs, so engines with µs timestamps keep every one distinct


def requires_ingest(suite: str, engine: type[Engine], info: EngineInfo) -> str | None:
    """Why ``engine`` cannot take part in the ingest suite ``suite``: its ``engine.toml``'s
    reason, or the missing ingest capability; ``None`` when it can."""
    reason = info.unsupported.get(suite)
    if reason is None and not issubclass(engine, Ingest):
        reason = NO_INGEST
    return reason


def tick_syms(x: int) -> list[str]:
    return [f"TICK{k:04d}" for k in range(x)]


def tick_row(i: int, syms: list[str]) -> tuple[Any, ...]:
    """Event ``i`` of the feed: tickers interleaved round-robin, as a consolidated feed
    delivers them; every field derives from ``i`` so the read-back is checkable."""
    return (TICK_BASE_NS + i * TICK_STEP_NS, "COINBASE", syms[i % len(syms)], "buy" if i % 2 else "sell",
            100.0 + (i % 997) * 0.01, 1.0 + (i % 13) * 0.5, i)
