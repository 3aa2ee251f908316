"""The market suite's operations in the engine process: the market dataset's load, M-W's bulk
loads and M-SE's storage measurement, each timed there, around the adapter's own calls (the
engine's market capabilities)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tickbench.engines.base import Engine, Market, MarketBulkLoad, MarketStorage, capability
from tickbench.run.visibility import wait_settled, wait_visible


def load_op(adapter: Engine, msg: dict[str, Any]) -> dict[str, Any]:
    """The market dataset into the engine; the load ends when its rows are queryable and the
    engine's own work on them (compaction) is done."""
    t0 = time.perf_counter_ns()
    rows = capability(adapter, Market).load_market()
    wait_visible(adapter)
    wait_settled(adapter)
    return {"ns": time.perf_counter_ns() - t0, "rows": rows}


def bulk_op(adapter: Engine, msg: dict[str, Any]) -> dict[str, Any]:
    """M-W: one bulk load of day D from ``fmt`` into a fresh store in ``scratch`` (tickbench's
    path, or the engine's own simplest with ``baseline``); the clock stops when it is queryable."""
    bulk = capability(adapter, MarketBulkLoad)
    load = bulk.market_baseline_load if msg.get("baseline") else bulk.market_bulk_load
    t0 = time.perf_counter_ns()
    figures = load(msg["fmt"], Path(msg["scratch"]))
    wait_visible(adapter)
    rows = figures.committed_rows()
    return {"ns": time.perf_counter_ns() - t0, "rows": rows, "input_bytes": figures.input_bytes,
            "detail": figures.detail}


def storage_op(adapter: Engine, msg: dict[str, Any]) -> dict[str, Any]:
    """M-SE: the bytes of the loaded market days, once the engine has settled."""
    wait_visible(adapter)
    wait_settled(adapter)
    return {"bytes": capability(adapter, MarketStorage).market_storage_bytes()}
