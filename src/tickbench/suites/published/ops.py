"""The published suite's operations in the engine process: W's bulk loads and SE's storage
measurement, each timed there, around the adapter's own calls."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tickbench.engines.base import BulkLoad, Engine, Storage, capability
from tickbench.run.visibility import wait_settled, wait_visible


def bulk_op(adapter: Engine, msg: dict[str, Any]) -> dict[str, Any]:
    """W: one bulk load of the bulk-load day from ``fmt`` into a fresh store in ``scratch``,
    through tickbench's load path or (``baseline``) the engine's own simplest one; the clock
    stops when the rows are queryable."""
    scratch = Path(msg["scratch"])
    bulk = capability(adapter, BulkLoad)
    load = bulk.baseline_load if msg.get("baseline") else bulk.bulk_load
    bulk.bulk_prepare()
    t0 = time.perf_counter_ns()
    figures = load(msg["fmt"], scratch)
    wait_visible(adapter)
    rows = figures.committed_rows()
    return {"ns": time.perf_counter_ns() - t0, "rows": rows,
            "input_bytes": figures.input_bytes, "detail": figures.detail}


def storage_op(adapter: Engine, msg: dict[str, Any]) -> dict[str, Any]:
    """SE: the bytes of the store SE measures, once the engine has settled."""
    storage = capability(adapter, Storage)
    storage.storage_load()  # the store SE measures, when it is not the loaded one
    wait_visible(adapter)
    wait_settled(adapter)  # SE is measured on the settled store
    return {"bytes": storage.storage_bytes()}
