"""Polars as an in-memory columnar engine: the role kdb+'s in-memory RDB plays in the paper.

``load()`` reads the query days' Parquet into a :class:`Store`: one DataFrame per (table,
instrument, venue), each in time order, as a tick store partitions its in-memory tables (kdb+'s
RDB keys them by symbol with a sorted time column; ``xbar``/``bin`` then find a time range by
binary search). A query takes the frames of its instrument and slices each one's time range by
binary search (``search_sorted``) instead of scanning and filtering the whole month; an as-of
lookup is one binary search per frame. There is nothing on disk: a restart reloads
(``kind = "in-memory"``).

The store holds the columns the published queries read, not the 80 price and size columns of
every snapshot: at SF 1 the whole month is about 23 GB in memory, beyond this machine's budget
(16 GiB per process), while the columns read are about 5 GB (see ``HOLD`` and the README).

Query contract: ``queries/<ID>.py`` defines::

    def query(store: Store, params: dict[str, Any]) -> pl.LazyFrame

``params`` is :meth:`QueryParams.bindings` with every datetime made UTC-aware (see
:func:`bindings`). The adapter collects the returned frame, already in the answer's columns and
order, and hands it over as Arrow.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import polars as pl
import pyarrow as pa

from tickbench.data.dataset import Dataset, empty_frame
from tickbench.datasets.paper.params import QueryParams
from tickbench.datasets.paper.schema import SCHEMAS
from tickbench.engines.base import Engine, EngineInfo, StoreByKind, by_kind
from tickbench.engines.polars.market import PolarsMarket

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
TS = pl.Datetime("ns", "UTC")
BOOK_TOP = ["b1price", "a1price", *[f"{s}{i}size" for i in range(1, 6) for s in ("b", "a")]]
PRICE_LEVELS = [f"{s}{i}price" for s in ("b", "a") for i in range(1, 21)]


@dataclass(frozen=True)
class Hold:
    """One in-memory table of the store: which source table, days and columns it holds."""

    source: str  # the dataset's table
    span: tuple[str, ...]  # the QueryParams spans whose days it holds
    columns: tuple[str, ...]  # besides ts; exchange and sym are the frame's key, not columns
    order: tuple[str, ...]  # time order; later keys break ties


# What the published queries read: trades' columns over the month; the book's best prices and
# the five levels' sizes over the month and the multi-venue day; every level's price on D
# (O-S's spread), for every instrument.
HOLD: dict[str, Hold] = {
    "trades": Hold("trades", ("month",), ("side", "price", "amount", "trade_id"), ("ts", "trade_id")),
    "book": Hold("book", ("month", "multi_day"), tuple(BOOK_TOP), ("ts",)),
    "book_depth": Hold("book", ("day",), tuple(PRICE_LEVELS), ("ts",)),
}
QueryFn = Callable[["Store", dict[str, Any]], pl.LazyFrame]


def ns(t: dt.datetime) -> int:
    """A UTC-aware datetime as integer nanoseconds since the epoch (exact to the µs)."""
    return (t - EPOCH) // dt.timedelta(microseconds=1) * 1_000


class Store:
    """Per-(table, sym, exchange) frames, each sorted by ``ts``, found by binary search."""

    def __init__(self) -> None:
        self.frames: dict[tuple[str, str, str], pl.DataFrame] = {}
        self._ts: dict[tuple[str, str, str], pl.Series] = {}  # ts as Int64, for search_sorted

    def add(self, table: str, sym: str, exchange: str, df: pl.DataFrame) -> None:
        key = (table, sym, exchange)
        self.frames[key] = df.set_sorted("ts")
        self._ts[key] = df["ts"].to_physical()

    def rows(self) -> int:
        return sum(df.height for df in self.frames.values())

    def keys(self, table: str, sym: str | None = None, exchange: str | None = None) -> list[tuple[str, str]]:
        """The (sym, exchange) pairs ``table`` holds, filtered by ``sym`` and ``exchange``."""
        return sorted((s, e) for t, s, e in self.frames
                      if t == table and (sym is None or s == sym) and (exchange is None or e == exchange))

    def slice(self, table: str, sym: str, exchange: str, start: dt.datetime, end: dt.datetime) -> pl.DataFrame:
        """The rows of one frame with ``start <= ts < end``: two binary searches, no scan."""
        key = (table, sym, exchange)
        ts = self._ts[key]
        lo = int(ts.search_sorted(ns(start), side="left"))
        hi = int(ts.search_sorted(ns(end), side="left"))
        return self.frames[key].slice(lo, hi - lo)

    def range(self, table: str, start: dt.datetime, end: dt.datetime, sym: str | None = None,
              labels: bool = False) -> pl.LazyFrame:
        """``start <= ts < end`` of every frame of ``table`` (of instrument ``sym``), with
        ``sym`` and ``exchange`` columns if ``labels``; in time order when one frame is read,
        else sorted by ts after the concatenation."""
        slices = [(s, e, self.slice(table, s, e, start, end)) for s, e in self.keys(table, sym)]
        if not slices:  # nothing of this table for sym (a book-only capture's trades): no rows
            empty = held_empty(table)
            return (empty.with_columns(sym=pl.lit(None, pl.String), exchange=pl.lit(None, pl.String))
                    if labels else empty).lazy()
        parts = [df.with_columns(sym=pl.lit(s), exchange=pl.lit(e)) if labels else df
                 for s, e, df in slices if df.height] or [slices[0][2]]
        if len(parts) == 1:
            return parts[0].lazy()
        out = pl.concat(parts).lazy()
        return out if labels else out.sort("ts")

    def asof(self, table: str, sym: str, exchange: str, t: dt.datetime, start: dt.datetime) -> pl.DataFrame:
        """The latest row of one frame with ``start <= ts <= t`` (one binary search), or no row."""
        key = (table, sym, exchange)
        ts = self._ts[key]
        i = int(ts.search_sorted(ns(t), side="right")) - 1
        if i < 0 or ts[i] < ns(start):
            return self.frames[key].clear()
        # gather copies the row; a slice would be a view of the whole frame's buffers, and an
        # answer holding it would carry them (GBs at SF 1) when it is sent to the runner
        return self.frames[key][[i]]


def held_empty(name: str) -> pl.DataFrame:
    """A frame of the held table ``name`` (:data:`HOLD`) with no rows, typed as :meth:`Adapter.load`
    holds it."""
    hold = HOLD[name]
    frame = empty_frame(SCHEMAS[hold.source]).select("ts", *hold.columns)
    return frame.with_columns(pl.col("side").cast(pl.Categorical)) if "side" in frame.columns else frame


def bindings(raw: dict[str, Any]) -> dict[str, Any]:
    """The run's named parameters with naive-UTC datetimes made UTC-aware, because the
    columns are ``Datetime("ns", "UTC")`` and Polars will not compare them with naive values."""

    def aware(v: Any) -> Any:
        if isinstance(v, dt.datetime):
            return v.replace(tzinfo=dt.UTC)
        if isinstance(v, list):
            return [aware(x) for x in v]
        return v

    return {k: aware(v) for k, v in raw.items()}


def load_query(path: Path) -> QueryFn:
    """Import ``queries/<ID>.py`` (not a valid module name, hence by file location)."""
    spec = importlib.util.spec_from_file_location(f"tickbench_polars_query_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn: QueryFn = module.query
    return fn


class Adapter(StoreByKind, PolarsMarket, Engine):
    persistent = False  # the frames live in the process: a restart loads again
    users_limit: ClassVar[str] = (
        "in-memory: the frames live in the engine's process, so the users are threads over them, each with its "
        "own parameters (Polars runs a query in its own thread pool without the GIL; a process per user would "
        "copy the dataset per user, and Polars' docs warn against fork)")

    def __init__(self, info: EngineInfo, workdir: Path, dataset: Dataset, params: QueryParams) -> None:
        super().__init__(info, workdir, dataset, params)
        self.store: Store | None = None
        self.queries: dict[str, QueryFn] = {}

    @classmethod
    def probe(cls) -> str:
        return str(pl.__version__)

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.store = self.market = None

    def stop(self) -> None:
        self.store = self.market = None

    def _load_paper(self) -> int:
        """Read what ``HOLD`` names into RAM, one (table, sym, exchange) frame at a time."""
        store = Store()
        for name, hold in HOLD.items():
            days = [d for span in hold.span for d in self.params.days(span)]
            files: dict[tuple[str, str], list[Path]] = defaultdict(list)
            for r in self.dataset.manifest.partitions:
                if r["table"] == hold.source and r["day"] in days:
                    files[r["sym"], r["exchange"]].append(self.dataset.root / r["path"])
            for (sym, exchange), paths in sorted(files.items()):
                cols = ["ts", *hold.columns]
                df = pl.read_parquet([str(p) for p in sorted(paths)], columns=cols)
                if "side" in df.columns:  # two values: a Categorical, as q holds it as a symbol
                    df = df.with_columns(pl.col("side").cast(pl.Categorical))
                store.add(name, sym, exchange, df.sort(list(hold.order)).rechunk())
        self.store = store
        return sum(df.height for (t, _, _), df in store.frames.items() if t != "book_depth")

    def _query(self, qid: str) -> QueryFn:
        if qid not in self.queries:
            self.queries[qid] = load_query(self.info.query_file(qid))
        return self.queries[qid]

    def _held(self) -> Any:
        """What the queries read: the market tables on a market dataset, else the paper's."""
        store = by_kind(self.dataset, paper=self.store, market=self.market)
        if store is None:
            raise RuntimeError("Polars: nothing loaded since start()")
        return store

    def run_query(self, qid: str) -> pa.Table:
        return self._query(qid)(self._held(), bindings(self.params.bindings())).collect().to_arrow()

    def explain(self, qid: str) -> str:
        """The optimized lazy plan Polars runs (``LazyFrame.explain``) on the held frames."""
        plan: str = self._query(qid)(self._held(), bindings(self.params.bindings())).explain()
        return plan

    def settings(self) -> dict[str, Any]:
        return by_kind(self.dataset, paper=self._paper_settings, market=self.market_settings)()

    def _paper_settings(self) -> dict[str, Any]:
        return {
            "threads": pl.thread_pool_size(),
            "layout": "one frame per (table, sym, exchange), sorted by ts; time ranges by search_sorted",
            "held": {name: {"days": list(h.span), "columns": ["ts", *h.columns]} for name, h in HOLD.items()},
        }
