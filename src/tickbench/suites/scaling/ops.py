"""The scaling suite's operation in the engine process: rebinding the queries' ranges."""

from __future__ import annotations

from typing import Any

from tickbench.datasets.base import params_from_dict
from tickbench.engines.base import Engine
from tickbench.run.visibility import wait_visible


def params_op(adapter: Engine, msg: dict[str, Any]) -> dict[str, Any]:
    """Bind the queries to new parameters (a span of the month); the loaded data stay as they are."""
    adapter.set_params(params_from_dict(msg["params"]))
    wait_visible(adapter)
    return {}
