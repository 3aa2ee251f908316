"""M-SNAP during ingest's fixed span and its writers' lifetime. (Each market engine's
during-ingest record and its controls are checked in tests/test_market_suite.py, through
tests/market_ingest_checks.py's ``check_ingest_record``; the toy engine's in
tests/test_market_users.py.)"""

from __future__ import annotations

from tickbench.data.dataset import Dataset
from tickbench.market_params import market_params
from tickbench.suites.market.ingest_ops import MarketReplay

SEED = 7


def test_the_span_is_fixed_in_minutes_of_d(market_tiny: Dataset) -> None:
    """MarketReplay's span: every event of D before the open plus the span and none after,
    whatever rate it is replayed at; each table's rows a prefix of its own order."""
    base = market_params(market_tiny, SEED)
    whole = MarketReplay(market_tiny, base)
    assert len(whole) == whole.total
    for minutes in (1.0, 10.0):
        span = int(minutes * 60e9)
        replay = MarketReplay(market_tiny, base, span_ns=span)
        assert len(replay) == int((whole.event_ts < whole.open_ns + span).sum()) > 0
        assert int(replay.event_ts.max()) < replay.open_ns + span <= replay.end_ns + 1
        assert replay.span_ns == span and len(replay) < replay.total
        for t, rows in replay.tables.items():
            assert rows.equals(whole.tables[t].slice(0, rows.num_rows))
