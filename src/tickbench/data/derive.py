"""The benchmark parameters of imported data, derived from its partitions (SPEC §2 asks them
of the generated calendar; an imported capture has its own days and instruments)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any


def derive_params(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The benchmark parameters of SPEC §2 for imported data, from its partitions:

    * S, the symbol with the most trades (book rows when there are no trades);
    * D, the day with the most trades of S (book rows when it has none);
    * M, up to 30 consecutive days holding D, starting at D unless the data ends sooner (then
      shifted back as far as the data allows); W, 7 days inside M holding D, the same way;
    * X, the day with the most venues quoting S (then the most book rows of S, then the
      earliest): the multi-exchange day of O-NBBO, which is a single-venue NBBO when no day has
      more than one venue;
    * the bulk-load day, the day with the most rows outside M, or D when every day is in M.

    Ties go to the earliest day and the first name.
    """
    def count(table: str, key: Callable[[dict[str, Any]], Any]) -> dict[Any, int]:
        out: dict[Any, int] = {}
        for e in entries:
            if e["table"] == table:
                out[key(e)] = out.get(key(e), 0) + e["rows"]
        return out

    def best(counts: dict[Any, int]) -> Any:
        return min(counts, key=lambda k: (-counts[k], k))

    trades_by_sym = count("trades", lambda e: e["sym"]) or count("book", lambda e: e["sym"])
    sym = best(trades_by_sym)
    by_day = count("trades", lambda e: e["day"] if e["sym"] == sym else None)
    by_day.pop(None, None)
    if not by_day:
        by_day = {k: v for k, v in count("book", lambda e: e["day"] if e["sym"] == sym else None).items() if k}
    day = dt.date.fromisoformat(best(by_day))
    sym_days = sorted({dt.date.fromisoformat(e["day"]) for e in entries if e["sym"] == sym})
    first, last = sym_days[0], sym_days[-1]

    def window(lo: dt.date, hi: dt.date, n: int) -> tuple[dt.date, dt.date]:
        start = max(lo, min(day, hi - dt.timedelta(days=n - 1)))
        return start, min(hi, start + dt.timedelta(days=n - 1))

    m0, m1 = window(first, last, 30)
    w0, w1 = window(m0, m1, 7)
    venues: dict[str, set[str]] = {}
    book_rows = count("book", lambda e: e["day"] if e["sym"] == sym else None)
    for e in entries:
        if e["table"] == "book" and e["sym"] == sym:
            venues.setdefault(e["day"], set()).add(e["exchange"])
    multi = (min(venues, key=lambda d: (-len(venues[d]), -book_rows.get(d, 0), d)) if venues else day.isoformat())
    rows_by_day: dict[str, int] = {}
    for e in entries:
        rows_by_day[e["day"]] = rows_by_day.get(e["day"], 0) + e["rows"]
    outside = {d: n for d, n in rows_by_day.items() if not (m0.isoformat() <= d <= m1.isoformat())}
    bulk = best(outside) if outside else day.isoformat()
    return {
        "day": day.isoformat(), "week": [w0.isoformat(), w1.isoformat()], "month": [m0.isoformat(), m1.isoformat()],
        "symbol": sym, "multi_day": multi, "bulk_day": bulk,
    }
