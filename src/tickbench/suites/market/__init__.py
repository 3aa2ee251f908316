"""The market suite (SPEC §2.3, after STAC-M3): fifteen questions a trading firm asks of its tick
store — baskets, the consolidated quote, market snapshots, mark-outs, statistics, as-of joins,
bars, the latest quote and the top names — over the market dataset (many instruments, eight
venues), every answer checked against :mod:`tickbench.datasets.market.reference`; then M-W and M-SE.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MarketQuery:
    """One query of the market suite: its id, its group, what it answers and the drawn parameters
    a small universe may not serve that it binds (:attr:`tickbench.datasets.market.params.MarketParams.unserved`)."""

    id: str
    category: str
    description: str
    needs: tuple[str, ...] = ()


QUERIES: tuple[MarketQuery, ...] = (
    MarketQuery("M-HIBID-D", "basket", "highest bid per instrument of the basket B on day D", needs=("B",)),
    MarketQuery("M-HIBID-W", "basket", "highest bid per instrument of B over the week W", needs=("B",)),
    MarketQuery("M-HIBID-M", "basket", "highest bid per instrument of B over the 20 days", needs=("B",)),
    MarketQuery("M-VWAB-D", "basket", "volume-weighted average bid per instrument of B on D", needs=("B",)),
    MarketQuery("M-VWAB-12D", "basket", "volume-weighted average bid per instrument and day of a user's own block, "
                "over its 12 days", needs=("VWAB12D",)),
    MarketQuery("M-NBBO", "consolidated", "consolidated best bid and offer of each of B's instruments, quote by "
                "quote on D: changes, mean spread, locked changes", needs=("B",)),
    MarketQuery("M-SNAP", "consolidated", "market snapshot at 10 times of D: last trade and NBBO of every "
                "instrument of B", needs=("B",)),
    MarketQuery("M-THEOPL", "consolidated", "mark-outs of 100 trades at 1, 10, 60 and 300 s against their own "
                "venue's mid", needs=("P",)),
    MarketQuery("M-VOLCURV", "statistics", "average volume per 5-minute bucket of the session over the 20 days, "
                "per instrument of B", needs=("B",)),
    MarketQuery("M-STATS", "statistics", "daily statistics of every instrument of the universe on D"),
    MarketQuery("M-STATS-UI", "statistics", "the same statistics for 10 requests of a basket and a window each"),
    MarketQuery("M-ASOF", "consolidated", "effective spread of each trade against its venue's quote, per "
                "instrument of B50 (5 of which do not exist)", needs=("B50",)),
    MarketQuery("M-OHLCV", "statistics", "5-minute bars of every instrument of B50 on D", needs=("B50",)),
    MarketQuery("M-LAST", "consolidated", "the latest quote of every (instrument, venue) over the 20 days"),
    MarketQuery("M-TOPN", "statistics", "the 20 instruments of largest notional on D"),
)
QUERY_IDS = tuple(q.id for q in QUERIES)
LOADS = ("M-W", "M-SE")
BY_ID = {q.id: q for q in QUERIES}
