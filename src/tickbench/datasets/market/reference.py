"""The market suite's reference implementation (SPEC §2.3): one plain function per query id.

Written straight from SPEC §2.3 over the market dataset's Parquet files with Polars, and out of
core like the published suite's reference: each query scans only the days and columns it reads,
filtered to its instruments (pushed down to the Parquet reader: the part files are ordered by
sym, so whole row groups are skipped), and the per-instrument and per-day work is done one
instrument or one day at a time, so the runner's memory is bounded by one instrument-day
(M-NBBO) or one day (M-LAST) of quotes, never the month.

The rules, as SPEC §2.3 gives them: the session is [14:30, 21:00) UTC and "same day" the UTC
date; the latest quote of a venue at t is the one with the greatest (ts, seq) with ts <= t on that
day; trades are ordered by (ts, exchange, trade_id), exchange compared as bytes (Polars compares
strings by their UTF-8 bytes); a group with no rows has no row, except M-SNAP's (t, sym) grid;
missing values are null; counts, ``h``, ``bucket`` (M-VOLCURV), ``rank`` and ``req`` are Int64;
``day`` is a Date; times and buckets are ``Datetime("ns", "UTC")``; everything else is Float64.
:data:`COLUMNS` holds each answer's exact columns and types (also those of ``--save-answers``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import polars as pl

from tickbench.data.dataset import Dataset, DatasetError
from tickbench.datasets.market.params import MarketParams, Request

TS = pl.Datetime("ns", "UTC")
F, INT, S = pl.Float64(), pl.Int64(), pl.String()
NS_PER_S = 1_000_000_000
MINUTE = 60 * NS_PER_S
HORIZONS_S = (1, 10, 60, 300)  # M-THEOPL's h
TOP_N = 20  # M-TOPN
TRADE_ORDER = ("ts", "exchange", "trade_id")
_STATS = {"n": INT, "volume": F, "vwap": F, "open": F, "high": F, "low": F, "close": F, "sd": F}

COLUMNS: dict[str, dict[str, pl.DataType]] = {
    "M-HIBID-D": {"sym": S, "max_bid": F},
    "M-HIBID-W": {"sym": S, "max_bid": F},
    "M-HIBID-M": {"sym": S, "max_bid": F},
    "M-VWAB-D": {"sym": S, "vwab": F},
    "M-VWAB-12D": {"sym": S, "day": pl.Date(), "vwab": F},
    "M-NBBO": {"sym": S, "n_changes": INT, "mean_spread": F, "n_locked": INT},
    "M-SNAP": {"t": TS, "sym": S, "last_price": F, "last_amount": F, "nbb": F, "nbo": F},
    "M-THEOPL": {"exchange": S, "sym": S, "trade_id": INT, "h": INT, "pnl": F},
    "M-VOLCURV": {"sym": S, "bucket": INT, "avg_volume": F},
    "M-STATS": {"sym": S, **_STATS},
    "M-STATS-UI": {"req": INT, "sym": S, **_STATS},
    "M-ASOF": {"sym": S, "n": INT, "eff_spread": F},
    "M-OHLCV": {"sym": S, "bucket": TS, "open": F, "high": F, "low": F, "close": F, "volume": F},
    "M-LAST": {"sym": S, "exchange": S, "ts": TS, "bid": F, "bsize": F, "ask": F, "asize": F},
    "M-TOPN": {"rank": INT, "sym": S, "notional": F},
}
SORT: dict[str, tuple[str, ...]] = {
    **{q: ("sym",) for q in ("M-HIBID-D", "M-HIBID-W", "M-HIBID-M", "M-VWAB-D", "M-NBBO", "M-STATS", "M-ASOF")},
    "M-VWAB-12D": ("sym", "day"), "M-SNAP": ("t", "sym"), "M-THEOPL": ("exchange", "sym", "trade_id", "h"),
    "M-VOLCURV": ("sym", "bucket"), "M-STATS-UI": ("req", "sym"), "M-OHLCV": ("sym", "bucket"),
    "M-LAST": ("sym", "exchange"), "M-TOPN": ("rank",),
}

MarketReference = Callable[[Dataset, MarketParams], pl.DataFrame]
REFERENCES: dict[str, MarketReference] = {}


def reference(qid: str) -> Callable[[MarketReference], MarketReference]:
    def register(fn: MarketReference) -> MarketReference:
        REFERENCES[qid] = fn
        return fn

    return register


def _scan(ds: Dataset, table: str, days: Sequence[str], cols: list[str],
          syms: Sequence[str] | None = None) -> pl.LazyFrame:
    """``cols`` of ``table`` over ``days`` (and the instruments ``syms``), lazily."""
    files = [str(f) for f in ds.files(table, list(days))]
    if not files:
        raise DatasetError(f"{ds.root}: no {table} partitions for days {list(days)}")
    lf = pl.scan_parquet(files)
    if syms is not None:
        lf = lf.filter(pl.col("sym").is_in(list(syms)))
    return lf.select(cols)


def _collect(lf: pl.LazyFrame) -> pl.DataFrame:
    """Run ``lf`` on the streaming engine: batch by batch, not the whole input in memory."""
    return lf.collect(engine="streaming")


def _shape(qid: str, df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with exactly the columns and types of SPEC §2.3 for ``qid``, sorted."""
    cols = COLUMNS[qid]
    return df.select([pl.col(c).cast(t) for c, t in cols.items()]).sort(list(SORT[qid]))


def _empty(qid: str) -> pl.DataFrame:
    return pl.DataFrame(schema=COLUMNS[qid])


def _hibid(ds: Dataset, days: Sequence[str], syms: Sequence[str], qid: str) -> pl.DataFrame:
    q = _scan(ds, "quotes", days, ["sym", "bid"], syms)
    return _shape(qid, _collect(q.group_by("sym").agg(max_bid=pl.col("bid").max())))


@reference("M-HIBID-D")
def m_hibid_d(ds: Dataset, p: MarketParams) -> pl.DataFrame:
    return _hibid(ds, [p.D], p.B, "M-HIBID-D")


@reference("M-HIBID-W")
def m_hibid_w(ds: Dataset, p: MarketParams) -> pl.DataFrame:
    return _hibid(ds, p.W, p.B, "M-HIBID-W")


@reference("M-HIBID-M")
def m_hibid_m(ds: Dataset, p: MarketParams) -> pl.DataFrame:
    return _hibid(ds, p.M, p.B, "M-HIBID-M")


VWAB = (pl.col("bid") * pl.col("bsize")).sum() / pl.col("bsize").sum()


@reference("M-VWAB-D")
def m_vwab_d(ds: Dataset, p: MarketParams) -> pl.DataFrame:
    q = _scan(ds, "quotes", [p.D], ["sym", "bid", "bsize"], p.B)
    return _shape("M-VWAB-D", _collect(q.group_by("sym").agg(vwab=VWAB)))


@reference("M-VWAB-12D")
def m_vwab_12d(ds: Dataset, p: MarketParams) -> pl.DataFrame:
    """The user's own block over its own 12 days (``p`` is that user's parameters)."""
    q = _scan(ds, "quotes", p.VWAB12D.days, ["ts", "sym", "bid", "bsize"], p.VWAB12D.syms)
    return _shape("M-VWAB-12D", _collect(q.group_by("sym", day=pl.col("ts").dt.date()).agg(vwab=VWAB)))


def nbbo_steps(quotes: pl.DataFrame) -> pl.DataFrame:
    """One instrument's quotes applied one at a time in (ts, exchange, seq) order, with (nbb, nbo)
    over each venue's latest quote so far after each step, and whether the step changed them (the
    first step does)."""
    q = quotes.sort("ts", "exchange", "seq")
    venues = sorted(q["exchange"].unique().to_list())
    held = [pl.when(pl.col("exchange") == v).then(pl.col(side)).forward_fill().alias(f"{side}:{v}")
            for v in venues for side in ("bid", "ask")]
    steps = q.with_columns(held).with_columns(
        nbb=pl.max_horizontal([f"bid:{v}" for v in venues]),
        nbo=pl.min_horizontal([f"ask:{v}" for v in venues]))
    changed = pl.col("nbb").ne_missing(pl.col("nbb").shift(1)) | pl.col("nbo").ne_missing(pl.col("nbo").shift(1))
    return steps.select("ts", "exchange", "seq", "nbb", "nbo", changed=changed)


@reference("M-NBBO")
def m_nbbo(ds: Dataset, p: MarketParams) -> pl.DataFrame:
    rows = []
    for sym in p.B:  # one instrument-day of quotes in memory at a time
        q = _collect(_scan(ds, "quotes", [p.D], ["ts", "exchange", "sym", "seq", "bid", "ask"], [sym]))
        if q.height == 0:
            continue
        ch = nbbo_steps(q).filter("changed")
        rows.append({"sym": sym, "n_changes": ch.height, "mean_spread": (ch["nbo"] - ch["nbb"]).mean(),
                     "n_locked": int((ch["nbo"] <= ch["nbb"]).sum())})
    if not rows:
        return _empty("M-NBBO")
    return _shape("M-NBBO", pl.DataFrame(rows, schema=COLUMNS["M-NBBO"]))


def _latest_quotes(quotes: pl.LazyFrame) -> pl.LazyFrame:
    """Per (sym, exchange), the quote with the greatest (ts, seq)."""
    return quotes.group_by("sym", "exchange").agg(pl.all().sort_by(["ts", "seq"]).last())


@reference("M-SNAP")
def m_snap(ds: Dataset, p: MarketParams) -> pl.DataFrame:
    trades = _collect(_scan(ds, "trades", [p.D], ["ts", "exchange", "sym", "trade_id", "price", "amount"], p.B))
    quotes = _scan(ds, "quotes", [p.D], ["ts", "exchange", "sym", "seq", "bid", "ask"], p.B)
    parts = []
    for t in p.T:
        at = pl.lit(t).cast(TS)
        last = trades.filter(pl.col("ts") <= at).group_by("sym").agg(
            last_price=pl.col("price").sort_by(list(TRADE_ORDER)).last(),
            last_amount=pl.col("amount").sort_by(list(TRADE_ORDER)).last())
        book = _collect(_latest_quotes(quotes.filter(pl.col("ts") <= at)).group_by("sym").agg(
            nbb=pl.col("bid").max(), nbo=pl.col("ask").min()))
        grid = pl.DataFrame({"sym": list(p.B)}, schema={"sym": S}).with_columns(t=at)
        parts.append(grid.join(last, on="sym", how="left").join(book, on="sym", how="left"))
    if not parts:
        return _empty("M-SNAP")
    return _shape("M-SNAP", pl.concat(parts))


def _asof_quotes(ds: Dataset, day: str, syms: Sequence[str]) -> pl.DataFrame:
    """The day's quotes of ``syms`` with one row per (exchange, sym, ts): the greatest seq, so an
    as-of lookup by ts finds the latest quote by (ts, seq)."""
    q = _scan(ds, "quotes", [day], ["ts", "exchange", "sym", "seq", "bid", "ask"], syms)
    return _collect(q.group_by("exchange", "sym", "ts").agg(pl.all().sort_by("seq").last())).sort("ts")


@reference("M-THEOPL")
def m_theopl(ds: Dataset, p: MarketParams) -> pl.DataFrame:
    if not p.P:
        return _empty("M-THEOPL")
    wanted = pl.DataFrame(list(p.P), schema={"exchange": S, "sym": S, "trade_id": INT}, orient="row")
    syms = sorted({s for _, s, _ in p.P})
    trades = _collect(_scan(ds, "trades", [p.D], ["ts", "exchange", "sym", "trade_id", "side", "price", "amount"],
                            syms)).join(wanted, on=["exchange", "sym", "trade_id"], how="semi")
    quotes = _asof_quotes(ds, p.D, syms)
    probes = pl.concat([trades.with_columns(h=pl.lit(h, INT), at=pl.col("ts") + pl.duration(seconds=h, time_unit="ns"))
                        for h in HORIZONS_S]).sort("at")
    marked = probes.join_asof(quotes.rename({"ts": "qts"}), left_on="at", right_on="qts", by=["exchange", "sym"],
                              strategy="backward", check_sortedness=False)
    sign = pl.when(pl.col("side") == "buy").then(1.0).otherwise(-1.0)
    mark = (pl.col("bid") + pl.col("ask")) / 2
    out = marked.filter(pl.col("qts").is_not_null()).with_columns(
        pnl=sign * pl.col("amount") * (mark - pl.col("price")))
    return _shape("M-THEOPL", out)


@reference("M-VOLCURV")
def m_volcurv(ds: Dataset, p: MarketParams) -> pl.DataFrame:
    t = _scan(ds, "trades", p.M, ["ts", "sym", "amount"], p.B)
    minute = (pl.col("ts").cast(pl.Int64) % (24 * 60 * MINUTE)) // MINUTE - p.session[0] // 60
    bucket = (minute // 5) * 5
    out = t.group_by("sym", bucket.alias("bucket")).agg(avg_volume=pl.col("amount").sum() / len(p.M))
    return _shape("M-VOLCURV", _collect(out))


def _stats(lf: pl.LazyFrame, keys: list[str]) -> pl.LazyFrame:
    """M-STATS's columns per ``keys``; open and close in (ts, exchange, trade_id) order."""
    price = pl.col("price")
    ordered = price.sort_by(list(TRADE_ORDER))
    return lf.group_by(keys).agg(
        n=pl.len(), volume=pl.col("amount").sum(),
        vwap=(price * pl.col("amount")).sum() / pl.col("amount").sum(),
        open=ordered.first(), high=price.max(), low=price.min(), close=ordered.last(),
        sd=price.std(ddof=1))


STATS_COLS = ["ts", "exchange", "sym", "trade_id", "price", "amount"]


@reference("M-STATS")
def m_stats(ds: Dataset, p: MarketParams) -> pl.DataFrame:
    return _shape("M-STATS", _collect(_stats(_scan(ds, "trades", [p.D], STATS_COLS), ["sym"])))


def stats_ui(ds: Dataset, day: str, requests: Sequence[Request]) -> pl.DataFrame:
    parts = []
    for req, r in enumerate(requests):
        t = _scan(ds, "trades", [day], STATS_COLS, r.syms).filter(
            pl.col("ts") >= pl.lit(r.start).cast(TS), pl.col("ts") < pl.lit(r.end).cast(TS))
        parts.append(_collect(_stats(t, ["sym"])).with_columns(req=pl.lit(req, INT)))
    if not parts:
        return _empty("M-STATS-UI")
    return _shape("M-STATS-UI", pl.concat(parts))


@reference("M-STATS-UI")
def m_stats_ui(ds: Dataset, p: MarketParams) -> pl.DataFrame:
    return stats_ui(ds, p.D, p.UI)


@reference("M-ASOF")
def m_asof(ds: Dataset, p: MarketParams) -> pl.DataFrame:
    trades = _collect(_scan(ds, "trades", [p.D], ["ts", "exchange", "sym", "price"], p.B50)).sort("ts")
    quotes = _asof_quotes(ds, p.D, p.B50)
    joined = trades.join_asof(quotes.rename({"ts": "qts"}), left_on="ts", right_on="qts", by=["exchange", "sym"],
                              strategy="backward", check_sortedness=False).filter(pl.col("qts").is_not_null())
    mid = (pl.col("bid") + pl.col("ask")) / 2
    out = joined.group_by("sym").agg(n=pl.len(), eff_spread=(2 * (pl.col("price") - mid).abs() / mid).mean())
    return _shape("M-ASOF", out)


@reference("M-OHLCV")
def m_ohlcv(ds: Dataset, p: MarketParams) -> pl.DataFrame:
    t = _scan(ds, "trades", [p.D], ["ts", "exchange", "sym", "trade_id", "price", "amount"], p.B50)
    width = 5 * MINUTE
    bucket = ((pl.col("ts").cast(pl.Int64) // width) * width).cast(TS)
    ordered = pl.col("price").sort_by(list(TRADE_ORDER))
    out = t.group_by("sym", bucket.alias("bucket")).agg(
        open=ordered.first(), high=pl.col("price").max(), low=pl.col("price").min(), close=ordered.last(),
        volume=pl.col("amount").sum())
    return _shape("M-OHLCV", _collect(out))


@reference("M-LAST")
def m_last(ds: Dataset, p: MarketParams) -> pl.DataFrame:
    cols = ["ts", "exchange", "sym", "seq", "bid", "bsize", "ask", "asize"]
    found: pl.DataFrame | None = None
    for day in sorted(p.M, reverse=True):  # one day in memory at a time; a later day's quote wins
        latest = _collect(_latest_quotes(_scan(ds, "quotes", [day], cols)))
        if found is not None:
            latest = latest.join(found.select("sym", "exchange"), on=["sym", "exchange"], how="anti")
            latest = pl.concat([found, latest.select(found.columns)])
        found = latest
    if found is None:
        return _empty("M-LAST")
    return _shape("M-LAST", found)


@reference("M-TOPN")
def m_topn(ds: Dataset, p: MarketParams) -> pl.DataFrame:
    t = _scan(ds, "trades", [p.D], ["sym", "price", "amount"])
    top = _collect(t.group_by("sym").agg(notional=(pl.col("price") * pl.col("amount")).sum())).sort(
        ["notional", "sym"], descending=[True, False]).head(TOP_N)
    return _shape("M-TOPN", top.with_columns(rank=pl.int_range(1, top.height + 1, dtype=INT)))


QUERIES = tuple(COLUMNS)


def answer(qid: str, ds: Dataset, p: MarketParams) -> pl.DataFrame:
    """The reference answer of market query ``qid`` with the parameters ``p`` (a user's own,
    for M-VWAB-12D, M-SNAP and M-STATS-UI)."""
    return REFERENCES[qid](ds, p)
