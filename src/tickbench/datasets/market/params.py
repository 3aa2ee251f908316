"""The market suite's parameters (SPEC §2.3): the fixed days D, W, M from the dataset's manifest,
and the random draws (B, B50, T, P, UI, each M-VWAB-12D user's block and window) from the run's
seed, by named streams (:func:`tickbench.rng.stream`), so every engine, the reference and a later
re-run bind the same values. ``params.json`` (SPEC §4) is their saved form, read back by
:func:`read_params_json`.

User i of the multi-user queries (M-VWAB-12D, M-SNAP, M-STATS-UI) has its own T, UI and
M-VWAB-12D block and window (:func:`market_params` with ``user=i``); B, B50 and P are the run's,
shared by every user. User 0's are the single-user parameters.

A universe too small for a parameter (B needs 10 instruments, B50 45, user i's M-VWAB-12D block
10·(i+1)) leaves it empty and names why in :attr:`MarketParams.unserved`: the queries that bind
it are not applicable to the dataset, decided by the suite before anything loads.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from tickbench.data.dataset import Dataset, DatasetError
from tickbench.datasets.market import calendar as mc
from tickbench.rng import stream

PROBES = 10  # T
THEO_TRADES = 100  # P
UI_REQUESTS = 10
B50_DRAWN, B50_MISSING = 45, 5
B_MIN = 10  # B draws one share from each of ten activity deciles
VWAB12D_DAYS = 12
VWAB12D_OFFSETS = 9  # user i's window starts at trading day 1 + (i mod 9)
UI_MIN_S = 60.0  # a UI window lasts from a minute to the whole session (log-uniform)
NS_PER_US = 1_000
STREAM = "market-params"
MARKET = "market"  # the kind these parameters are drawn on
GENERATED_SESSION = (mc.SESSION_OPEN_S, mc.SESSION_CLOSE_S)
GENERATED_VENUES = mc.VENUES


class MarketParamsError(ValueError):
    """The parameters cannot be drawn for this dataset (universe too small, too many users)."""


@dataclass(frozen=True)
class Request:
    """One M-STATS-UI request: a basket and a window [start, end) on D, ns since the epoch."""

    syms: tuple[str, ...]
    start: int
    end: int


@dataclass(frozen=True)
class UserBlock:
    """One M-VWAB-12D user's instruments and its 12 trading days."""

    syms: tuple[str, ...]
    days: tuple[str, ...]


@dataclass(frozen=True)
class MarketParams:
    """Every parameter of the market suite for one user: dates as ISO strings, times as ns since the epoch."""

    D: str
    W: tuple[str, ...]
    M: tuple[str, ...]
    B: tuple[str, ...]
    B50: tuple[str, ...]
    T: tuple[int, ...]
    P: tuple[tuple[str, str, int], ...]
    UI: tuple[Request, ...]
    VWAB12D: UserBlock
    user: int = 0
    session: tuple[int, int] = GENERATED_SESSION  # [open, close), seconds of the UTC day
    venues: tuple[str, ...] = GENERATED_VENUES  # the calendar's venues, in its order
    #: The parameters the universe cannot serve (``B``, ``B50``, ``P``, ``VWAB12D``), each with
    #: why; each is left empty (a block keeps its days).
    unserved: tuple[tuple[str, str], ...] = ()

    def unserved_reason(self, names: tuple[str, ...]) -> str | None:
        """Why one of the parameters ``names`` cannot be served here, or ``None`` when all can."""
        why = dict(self.unserved)
        return next((why[n] for n in names if n in why), None)

    def bindings(self) -> dict[str, Any]:
        """The named parameters the engines' market query files bind (``$name``): every time as a
        naive UTC datetime (whole µs, as every drawn time is), every list a Python list.

        * ``d_start``/``d_end``: D's UTC day [00:00, next 00:00); ``d_open``/``d_close``: its
          session ([14:30, 21:00) in the generated calendar); ``w_start``/``w_end`` and
          ``m_start``/``m_end``: W's and M's days, from the first's 00:00 to the day after the last;
        * ``session_open_minute``: the session's open as whole minutes of the UTC day (870 for
          14:30; M-VOLCURV's buckets count from it); ``m_day_count``: how many days M has (20;
          M-VOLCURV's divisor);
        * ``venues``: the calendar's venues (the eight of SPEC §1.3 in the generated calendar; an
          engine that must name each venue in a query, as a pivot does, repeats a part per venue);
        * ``b_syms``, ``b50_syms``: B and B50;
        * ``t_times``: T, sorted;
        * ``p_exchanges``, ``p_syms``, ``p_trade_ids``: P as three parallel lists;
        * ``ui_req``, ``ui_from``, ``ui_to``: the M-STATS-UI requests' numbers and windows
          [from, to); ``ui_pair_req``, ``ui_pair_sym``: each request's basket as (req, sym) pairs;
        * ``vwab_syms``, ``vwab_start``, ``vwab_end``, ``vwab_days``: this user's M-VWAB-12D
          block and window (its first day's 00:00 to the day after its last; the days as dates).
        """
        def at(ns: int) -> dt.datetime:
            return dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=ns // NS_PER_US)

        def day_start(day: str) -> dt.datetime:
            return dt.datetime.fromisoformat(day)

        def day_end(day: str) -> dt.datetime:
            return dt.datetime.fromisoformat(day) + dt.timedelta(days=1)

        open_ns, close_ns = self.calendar_session_ns(self.D)
        return {
            "session_open_minute": self.session[0] // 60, "m_day_count": len(self.M), "venues": list(self.venues),
            "d_start": day_start(self.D), "d_end": day_end(self.D), "d_open": at(open_ns), "d_close": at(close_ns),
            "w_start": day_start(self.W[0]), "w_end": day_end(self.W[-1]),
            "m_start": day_start(self.M[0]), "m_end": day_end(self.M[-1]),
            "b_syms": list(self.B), "b50_syms": list(self.B50), "t_times": [at(t) for t in self.T],
            "p_exchanges": [e for e, _, _ in self.P], "p_syms": [s for _, s, _ in self.P],
            "p_trade_ids": [i for _, _, i in self.P],
            "ui_req": list(range(len(self.UI))), "ui_from": [at(r.start) for r in self.UI],
            "ui_to": [at(r.end) for r in self.UI],
            "ui_pair_req": [i for i, r in enumerate(self.UI) for _ in r.syms],
            "ui_pair_sym": [s for r in self.UI for s in r.syms],
            "vwab_syms": list(self.VWAB12D.syms), "vwab_start": day_start(self.VWAB12D.days[0]),
            "vwab_end": day_end(self.VWAB12D.days[-1]),
            "vwab_days": [dt.date.fromisoformat(d) for d in self.VWAB12D.days],
        }

    def calendar_session_ns(self, day: str) -> tuple[int, int]:
        """[open, close) of ``day``'s session, ns since the epoch."""
        start = mc.day_ns(dt.date.fromisoformat(day))
        return start + self.session[0] * mc.NS_PER_S, start + self.session[1] * mc.NS_PER_S

    def days(self, span: str) -> list[str]:
        """The ISO days of ``span``: ``D``, ``W`` or ``M``."""
        return [self.D] if span == "D" else list(getattr(self, span))

    def load_days(self) -> list[str]:
        """The days an engine loads for the market suite: M, the 20 trading days."""
        return list(self.M)

    def as_dict(self) -> dict[str, Any]:
        """The parameters as plain data (``params.json``'s form, with the kind and the user),
        for the engine processes; :func:`tickbench.datasets.base.params_from_dict` reads it back."""
        return {"kind": MARKET, "user": self.user, **self.to_json()}

    def to_json(self) -> dict[str, Any]:
        """SPEC §4's ``params.json`` object."""
        return {
            "D": self.D, "W": list(self.W), "M": list(self.M), "B": list(self.B), "B50": list(self.B50),
            "T": [iso_ns(t) for t in self.T],
            "P": [[e, s, i] for e, s, i in self.P],
            "UI": [{"syms": list(r.syms), "from": iso_ns(r.start), "to": iso_ns(r.end)} for r in self.UI],
            "VWAB12D": {"syms": list(self.VWAB12D.syms), "days": list(self.VWAB12D.days)},
            # an imported calendar's session (the generated one's is SPEC §2.3's, left implicit)
            **({} if self.session == GENERATED_SESSION else
               {"session": {"open_s": self.session[0], "close_s": self.session[1]}}),
            **({} if self.venues == GENERATED_VENUES else {"venues": list(self.venues)}),
            # what a small universe cannot serve (those parameters are empty), and why
            **({"not_applicable": dict(self.unserved)} if self.unserved else {}),
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any], user: int = 0) -> MarketParams:
        """Parameters from a ``params.json`` object (``user``: whose they are; the file does not say)."""
        try:
            return cls(
                D=str(raw["D"]), W=tuple(map(str, raw["W"])), M=tuple(map(str, raw["M"])),
                B=tuple(map(str, raw["B"])), B50=tuple(map(str, raw["B50"])),
                T=tuple(parse_iso_ns(t) for t in raw["T"]),
                P=tuple((str(e), str(s), int(i)) for e, s, i in raw["P"]),
                UI=tuple(Request(tuple(map(str, r["syms"])), parse_iso_ns(r["from"]), parse_iso_ns(r["to"]))
                         for r in raw["UI"]),
                VWAB12D=UserBlock(tuple(map(str, raw["VWAB12D"]["syms"])), tuple(map(str, raw["VWAB12D"]["days"]))),
                user=user,
                session=(int(raw["session"]["open_s"]), int(raw["session"]["close_s"])) if "session" in raw
                else GENERATED_SESSION,
                venues=tuple(map(str, raw["venues"])) if "venues" in raw else GENERATED_VENUES,
                unserved=tuple((str(k), str(v)) for k, v in dict(raw.get("not_applicable") or {}).items()),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise MarketParamsError(f"not a market suite params.json ({type(exc).__name__}: {exc})") from None


def iso_ns(ns: int) -> str:
    """``2024-01-16T15:04:05.123456789Z``: ISO-8601 UTC with nine fractional digits."""
    sec, frac = divmod(int(ns), 1_000_000_000)
    return (dt.datetime(1970, 1, 1) + dt.timedelta(seconds=sec)).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:09d}Z"


_ISO = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|\+00:00)")


def parse_iso_ns(text: str) -> int:
    """The inverse of :func:`iso_ns` (UTC only; up to nine fractional digits)."""
    m = _ISO.fullmatch(str(text))
    if not m:
        raise ValueError(f"{text!r} is not an ISO-8601 UTC time (YYYY-MM-DDThh:mm:ss.fffffffffZ)")
    base = dt.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S") - dt.datetime(1970, 1, 1)
    frac = (m.group(2) or "").ljust(9, "0")
    return (base.days * 86_400 + base.seconds) * 1_000_000_000 + int(frac or 0)


def basket_size(universe: int) -> int:
    """|B| = max(10, N/100), N/100 rounded down."""
    return max(10, universe // 100)


def decile_shares(universe: int) -> list[int]:
    """How many of B come from each activity decile (most active first): an equal share, the
    remainder of |B| / 10 going one each to the most active deciles."""
    base, extra = divmod(basket_size(universe), 10)
    return [base + (1 if k < extra else 0) for k in range(10)]


Names = tuple[str, ...]  # the universe's symbols in rank order (rank r is names[r - 1])


def generated_names(universe: int) -> Names:
    """The generated universe's symbols by rank (``S0001`` …)."""
    return tuple(mc.sym_of(r, universe) for r in range(1, universe + 1))


def _syms(ranks: Any, names: Names) -> tuple[str, ...]:
    return tuple(sorted(names[int(r) - 1] for r in ranks))


def draw_basket(seed: int, names: Names) -> tuple[str, ...]:
    """B: an equal share of each activity decile by rank (decile k holds the ranks r with
    floor((r - 1) * 10 / N) = k), drawn without replacement."""
    universe = len(names)
    if universe < B_MIN:
        raise MarketParamsError(f"universe {universe}: B draws from ten activity deciles; it needs {B_MIN} instruments")
    rng = stream(seed, STREAM, "B")
    ranks = np.arange(1, universe + 1)
    decile = (ranks - 1) * 10 // universe
    picked: list[int] = []
    for k, share in enumerate(decile_shares(universe)):
        picked += rng.choice(ranks[decile == k], size=share, replace=False).tolist()
    return _syms(picked, names)


def draw_b50(seed: int, names: Names) -> tuple[str, ...]:
    """B50: 45 instruments of the universe and 5 symbols that do not exist (``S`` and a number
    above N, of the universe's width; one that an imported universe holds is passed over), sorted."""
    universe = len(names)
    if universe < B50_DRAWN:
        raise MarketParamsError(f"universe {universe}: B50 draws {B50_DRAWN} instruments; it needs at least that many")
    rng = stream(seed, STREAM, "B50")
    drawn = rng.choice(np.arange(1, universe + 1), size=B50_DRAWN, replace=False)
    missing = rng.choice(np.arange(universe + 1, universe + 1 + 1_000), size=B50_MISSING, replace=False)
    known = set(names)
    absent = [s for s in (mc.sym_of(int(r), universe) for r in missing) if s not in known]
    spare = (mc.sym_of(r, universe) for r in range(universe + 1, universe + 1 + 1_000))
    absent += [s for s in spare if s not in known and s not in absent][:B50_MISSING - len(absent)]
    return tuple(sorted([names[int(r) - 1] for r in drawn] + absent))


def session_ns(day: str, cal: mc.Calendar = mc.GENERATED) -> tuple[int, int]:
    """[open, close) of ``day``'s session in ``cal``, ns since the epoch."""
    return cal.session_ns(day)


def draw_times(seed: int, day: str, user: int = 0, cal: mc.Calendar = mc.GENERATED) -> tuple[int, ...]:
    """T: ten distinct whole-µs times in ``day``'s session, sorted."""
    rng = stream(seed, STREAM, "T", user)
    lo, hi = (x // NS_PER_US for x in session_ns(day, cal))
    picks: set[int] = set()
    while len(picks) < PROBES:
        picks.add(int(rng.integers(lo, hi)))
    return tuple(sorted(p * NS_PER_US for p in picks))


def draw_requests(seed: int, names: Names, day: str, user: int = 0,
                  cal: mc.Calendar = mc.GENERATED) -> tuple[Request, ...]:
    """UI: ten requests, each a basket of |B| instruments of the universe and a window [a, b) in
    ``day``'s session whose length is log-uniform from a minute to the session, in whole µs."""
    rng = stream(seed, STREAM, "UI", user)
    universe = len(names)
    size = basket_size(universe)
    lo, hi = (x // NS_PER_US for x in session_ns(day, cal))
    out = []
    for _ in range(UI_REQUESTS):
        syms = _syms(rng.choice(np.arange(1, universe + 1), size=min(size, universe), replace=False), names)
        length = round(float(np.exp(rng.uniform(np.log(UI_MIN_S), np.log(max(cal.session_s, UI_MIN_S))))) * 1e6)
        length = min(max(length, int(UI_MIN_S * 1e6)), hi - lo)
        start = int(rng.integers(lo, hi - length + 1))
        out.append(Request(syms, start * NS_PER_US, (start + length) * NS_PER_US))
    return tuple(out)


def users_reason(users: int, universe: int) -> str | None:
    """Why the universe cannot give ``users`` M-VWAB-12D users disjoint blocks, or ``None``."""
    size = basket_size(universe)
    if users < 1:
        return f"M-VWAB-12D with {users} users: give at least one"
    if users == 1 and size > universe:
        return f"M-VWAB-12D needs a block of {size} instruments; the universe has {universe:,}"
    if users * size > universe:
        return (f"M-VWAB-12D with {users} users needs {users} disjoint blocks of {size} instruments "
                f"({users * size:,}); the universe has {universe:,} (at most {universe // size} users here)")
    return None


def check_users(users: int, universe: int) -> None:
    """Refuse an M-VWAB-12D user count whose disjoint blocks do not fit in the universe."""
    why = users_reason(users, universe)
    if why is not None:
        raise MarketParamsError(why)


def universe_reasons(universe: int) -> dict[str, str]:
    """The run-wide parameters a universe of ``universe`` instruments cannot serve, each with why
    (``B``, and ``P`` drawn from B's trades; ``B50``; user 0's M-VWAB-12D block, ``VWAB12D``)."""
    out: dict[str, str] = {}
    if universe < B_MIN:
        out["B"] = f"universe {universe}: B draws from ten activity deciles; it needs {B_MIN} instruments"
        out["P"] = f"universe {universe}: P draws from B's trades, and B needs {B_MIN} instruments"
    if universe < B50_DRAWN:
        out["B50"] = f"universe {universe}: B50 draws {B50_DRAWN} instruments; it needs at least that many"
    why = users_reason(1, universe)
    if why is not None:
        out["VWAB12D"] = why
    return out


def _block_or_none(seed: int, names: Names, days: tuple[str, ...], user: int) -> tuple[UserBlock, str | None]:
    """User ``user``'s block, or, where the universe has no room for it, an empty one (its days
    kept, so the bindings stay whole) and why."""
    try:
        return draw_block(seed, names, days, user), None
    except MarketParamsError as exc:
        span = min(VWAB12D_DAYS, len(days))
        return UserBlock((), tuple(days[:span])), str(exc)


def draw_block(seed: int, names: Names, days: tuple[str, ...], user: int) -> UserBlock:
    """User ``user``'s M-VWAB-12D block (its slice of one permutation of the universe, so every
    user's is disjoint from every other's whatever the number of users) and its 12 trading days
    1 + (i mod 9) … 12 + (i mod 9) (of a calendar shorter than 20 days: its first 12, or all of
    a shorter one, starting at 1 + (i mod the offsets that fit))."""
    universe = len(names)
    check_users(user + 1, universe)
    size = basket_size(universe)
    perm = stream(seed, STREAM, "VWAB12D").permutation(np.arange(1, universe + 1))
    span = min(VWAB12D_DAYS, len(days))
    first = user % max(1, min(VWAB12D_OFFSETS, len(days) - span + 1))
    return UserBlock(_syms(perm[user * size:(user + 1) * size], names), tuple(days[first:first + span]))


def draw_trades(seed: int, ds: Dataset, day: str, basket: tuple[str, ...]) -> tuple[tuple[str, str, int], ...]:
    """P: 100 trades of ``day`` of the basket's instruments, drawn without replacement (all of them
    when there are fewer), as (exchange, sym, trade_id) sorted."""
    files = [str(f) for f in ds.files("trades", [day])]
    if not files:
        raise DatasetError(f"{ds.root}: no trades partitions for {day}")
    trades = (pl.scan_parquet(files).filter(pl.col("sym").is_in(list(basket)))
              .select("exchange", "sym", "trade_id").collect(engine="streaming")
              .sort("exchange", "sym", "trade_id"))
    rng = stream(seed, STREAM, "P")
    take = min(THEO_TRADES, trades.height)
    idx = np.sort(rng.choice(trades.height, size=take, replace=False)) if take else np.empty(0, np.int64)
    return tuple((str(e), str(s), int(i)) for e, s, i in trades[idx].iter_rows())


def market_params(ds: Dataset, seed: int, user: int = 0) -> MarketParams:
    """Every parameter of the market suite for ``user`` on the market dataset ``ds``."""
    if ds.kind != MARKET:  # a market suite helper given another kind's dataset
        raise DatasetError(f"{ds.root}: a {ds.kind} dataset; the market suite runs on a market dataset "
                           "(tickbench generate --dataset market)")
    names = universe_names(ds)
    cal = dataset_calendar(ds)
    raw = ds.params
    d = str(raw["D"])
    month = tuple(map(str, raw["M"]))
    unserved = universe_reasons(len(names))
    unserved.pop("VWAB12D", None)  # this user's block, below
    basket = () if "B" in unserved else draw_basket(seed, names)
    block, why = _block_or_none(seed, names, month, user)
    if why is not None:
        unserved["VWAB12D"] = why
    return MarketParams(
        D=d, W=tuple(map(str, raw["W"])), M=month, B=basket, B50=() if "B50" in unserved else draw_b50(seed, names),
        T=draw_times(seed, d, user, cal), P=() if "P" in unserved else draw_trades(seed, ds, d, basket),
        UI=draw_requests(seed, names, d, user, cal), VWAB12D=block, user=user,
        session=(cal.open_s, cal.close_s), venues=cal.venues, unserved=tuple(unserved.items()),
    )


def dataset_calendar(ds: Dataset) -> mc.Calendar:
    """A market dataset's trading days, session and venues (the generated calendar, or the one an
    import derived from its data)."""
    try:
        return mc.calendar_of(ds.manifest.calendar)
    except ValueError as exc:
        raise DatasetError(f"{ds.root}: its manifest's calendar: {exc}") from None


def universe_names(ds: Dataset) -> Names:
    """The dataset's instruments by rank (generated: ``S0001`` …; imported: their own names)."""
    inst = ds.instruments().sort("rank")
    names = tuple(map(str, inst["sym"].to_list()))
    if len(names) != ds.universe:
        raise DatasetError(f"{ds.root}: {len(names)} instruments, its manifest's universe is {ds.universe}")
    return names


def user_params(ds: Dataset, base: MarketParams, seed: int, user: int) -> MarketParams:
    """User ``user``'s parameters from any user's ``base`` of the same run on ``ds``: its own T,
    UI and M-VWAB-12D block and window drawn as :func:`market_params` draws them, the run's D,
    W, M, B, B50 and P kept (so the day's trades are not read again for every user)."""
    names, cal = universe_names(ds), dataset_calendar(ds)
    block, why = _block_or_none(seed, names, base.M, user)
    unserved = {k: v for k, v in base.unserved if k != "VWAB12D"} | ({"VWAB12D": why} if why is not None else {})
    return replace(base, T=draw_times(seed, base.D, user, cal), UI=draw_requests(seed, names, base.D, user, cal),
                   VWAB12D=block, user=user, unserved=tuple(unserved.items()))


def write_params_json(path: Path, params: MarketParams) -> None:
    """Write ``params`` as SPEC §4's ``params.json`` (``answers/<engine>/params.json`` for user 0,
    ``answers/<engine>/users/<i>/params.json`` for user i)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(params.to_json(), indent=1) + "\n")


def read_params_json(path: Path, user: int = 0) -> MarketParams:
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise MarketParamsError(f"{path}: unreadable ({exc})") from None
    if not isinstance(raw, dict):
        raise MarketParamsError(f"{path}: not a JSON object")
    return MarketParams.from_json(raw, user)
