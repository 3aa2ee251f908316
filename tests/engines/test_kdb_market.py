"""kdb+'s market query files, read without a licence: one per M- query, each reading only the
parameters the market prelude binds and keeping to what flatten understands; names from data
reach q as escaped strings made symbols, never as code. The queries themselves run in
tests/test_market_suite.py where PyKX finds a licence (skipped here with the probe's reason)."""

from __future__ import annotations

import datetime as dt

import pytest

from tickbench.data.dataset import Dataset
from tickbench.datasets.market.params import MarketParams
from tickbench.engines.kdb import adapter as kdb
from tickbench.engines.kdb.market import m_literal, market_prelude
from tickbench.engines.registry import engine_infos
from tickbench.suites.market import QUERY_IDS

INFO = engine_infos()["kdb"]


@pytest.mark.parametrize("qid", QUERY_IDS)
def test_a_q_file_per_market_query_reading_only_bound_parameters(qid: str, market_tiny_params: MarketParams) -> None:
    assert qid not in INFO.unsupported
    text = INFO.query_text(qid)
    head = market_prelude(market_tiny_params)
    bound = set(head.removeprefix("p:").split("!(", 1)[0].split("`")[1:])
    used = kdb.query_params_used(text)
    assert used, f"{qid}.q reads no parameter"
    assert used <= bound, f"{qid}.q reads unbound parameters {used - bound}"
    assert "p[" not in text, "read parameters as p`name, so the check above sees them"
    flat = kdb.flatten(text)
    assert flat and "\n" not in flat and not flat.endswith(";")


def test_market_parameter_text(market_tiny: Dataset, market_tiny_params: MarketParams) -> None:
    assert m_literal('a"b\\') == '`$(),"a\\"b\\\\"'
    assert m_literal("X") == '`$(),"X"'  # a one-letter name stays a string, not a char
    assert m_literal(["A", "B C"]) == '`$((),"A";(),"B C")' and m_literal(["A"]) == '`$enlist (),"A"'
    assert m_literal([1, 10]) == "1 10" and m_literal([3]) == "enlist 3"
    assert m_literal([dt.date(2024, 1, 2), dt.date(2024, 1, 3)]) == "2024.01.02 2024.01.03"
    head = market_prelude(market_tiny_params)
    keys, values = head.removeprefix("p:").split("!(", 1)
    wanted = {"d", "w", "m", "vwab", "session_open_minute", "m_day_count", "b_syms", "t_times"}
    assert wanted <= set(keys.split("`")[1:])
    assert ";2024.01.16;2024.01.02 2024.01.08;2024.01.02 2024.01.30;" in values
