"""Write imported quotes and trades of many instruments as a market dataset (SPEC §1.3's layout):
:func:`write_market`, this kind's :meth:`~tickbench.datasets.base.DatasetKind.import_into`.

Two passes, memory bounded by the day (not the capture):

1. The readers' rows (``quotes``: ts, exchange, sym, bid, ask, bsize, asize, seq; ``trades``: the
   paper's trades columns, ``side`` null where the source does not say it) are checked row by
   row (values present and finite, names, prices and sizes > 0, each venue's ``bid < ask``) and per
   (exchange, sym) stream in input order (``ts`` never backwards, ``seq`` / ``trade_id`` strictly
   increasing), under the policy (``fail``: stop at the first bad row, naming it; ``drop``: drop
   and count it). Kept rows are spilled to Parquet per (table, day); what the instruments table
   needs (trade counts, venues quoting each instrument, the finest price and size grids its
   values need) and the calendar (days with data, the earliest and latest time of day) are
   counted on the way.
2. The instruments table is derived: rank by trade count (most first, ties by name in byte
   order), ``tick`` and ``lot`` the coarsest of the usual grids every value of the instrument lies
   on, ``primary`` the venue with the most trades (then quotes), ``venues`` how many quote it.
   A trade on a venue that never quotes its instrument (an off-exchange print) breaks §1.3's
   invariant: refused under ``fail``, dropped and counted under ``drop``. A trade without a side
   gets one by the quote rule (above its venue's prevailing mid: buy; below: sell; at the mid or
   unquoted: the tick rule against the instrument's previous trade). The part files are written a
   day and a block of instruments at a time (contiguous in byte order of ``sym``, about
   :data:`BLOCK_ROWS` rows a day each, the same blocks every day), rows by (sym, ts, exchange,
   seq / trade_id) as the generator writes them; then day D's CSV, the calendar (the session
   from the 5-minute boundary at or before the earliest time to the end of the latest minute
   with data, UTC) and the manifest.

Everything is written into the caller's staging directory, then renamed into place.
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from tickbench.data.dataset import (
    DatasetError,
    Manifest,
    bulk_csv,
    combine_hashes,
    csv_path,
    csv_size,
    hash_table,
    name_problem,
)
from tickbench.data.importers import MARKET_READERS, ImportResult, coalesce, finish_stage
from tickbench.data.importers.common import BAD_COL, ROW_COL, Chunk, ReaderOptions
from tickbench.data.importers.writer import ImportFailure
from tickbench.data.violations import (
    AMOUNT_NOT_POSITIVE,
    BAD_SIDE,
    ID_NOT_INCREASING,
    MISSING_VALUE,
    SIZE_NOT_POSITIVE,
    Violation,
)
from tickbench.datasets.market import calendar as mc
from tickbench.datasets.market.params import MARKET
from tickbench.datasets.market.schema import INSTRUMENTS_PATH, MARKET_ROW_GROUP, MARKET_SCHEMAS, MARKET_TABLES
from tickbench.datasets.market.validate import (
    PRICE_NOT_POSITIVE,
    SEQ_NOT_INCREASING,
    TRADE_WITHOUT_QUOTES,
    TS_OUTSIDE_ENGINES,
    VENUE_CROSSED,
    implausible,
)
from tickbench.datasets.paper.validate import StreamState, flagged, order_reasons

NS_PER_DAY = mc.NS_PER_DAY
NS_PER_MIN = 60 * mc.NS_PER_S
BLOCK_ROWS = 1_000_000  # rows of a part file, a day, about: readers skip whole files by sym range
TICKS = (0.01, 0.0001, 1e-6, 1e-8)  # the price grids tried, coarsest first
LOTS = (1.0, 0.01, 0.0001, 1e-6, 1e-8)  # the size grids tried
GRID_TOL = 1e-6  # as market_validate's: a value is on a grid when value / grid is this close to whole
BAD_NAME = "exchange or sym not a name tickbench takes"
ID = {"quotes": "seq", "trades": "trade_id"}
PRICES = {"quotes": ("bid", "ask"), "trades": ("price",)}
SIZES = {"quotes": ("bsize", "asize"), "trades": ("amount",)}


def _row_reason(table: str) -> pl.Expr:
    """The first row-local invariant of §1.3 a row breaks (grids and session aside: the import
    derives those from the data), or null."""
    cols = {"quotes": ["ts", "exchange", "sym", "bid", "ask", "bsize", "asize", "seq"],
            "trades": ["ts", "exchange", "sym", "price", "amount", "trade_id"]}[table]
    floats = [*PRICES[table], *SIZES[table]]
    missing = pl.any_horizontal([pl.col(c).is_null() for c in cols]
                                + [~pl.col(c).is_finite().fill_null(False) for c in floats])
    prices = pl.any_horizontal([pl.col(c) <= 0 for c in PRICES[table]])
    sizes = pl.any_horizontal([pl.col(c) <= 0 for c in SIZES[table]])
    expr = pl.when(missing).then(pl.lit(MISSING_VALUE)).when(prices).then(pl.lit(PRICE_NOT_POSITIVE))
    if table == "quotes":
        expr = expr.when(pl.col("bid") >= pl.col("ask")).then(pl.lit(VENUE_CROSSED))
        expr = expr.when(sizes).then(pl.lit(SIZE_NOT_POSITIVE))
    else:
        expr = expr.when(pl.col("side").is_not_null() & ~pl.col("side").is_in(["buy", "sell"])).then(pl.lit(BAD_SIDE))
        expr = expr.when(sizes).then(pl.lit(AMOUNT_NOT_POSITIVE))
    for cond, reason in implausible(table):
        expr = expr.when(cond).then(pl.lit(reason))
    expr = expr.when(pl.col("ts").cast(pl.Int64) < 0).then(pl.lit(TS_OUTSIDE_ENGINES))
    return expr.otherwise(pl.lit(None, dtype=pl.String))


def _grid_index(values: pl.Expr, grids: tuple[float, ...]) -> pl.Expr:
    """Per row, the index in ``grids`` of the coarsest grid ``values`` lies on (len(grids): none)."""
    on = [((values / g) - (values / g).round()).abs() <= GRID_TOL for g in grids]
    expr = pl.lit(len(grids), pl.Int32)
    for i in reversed(range(len(grids))):
        expr = pl.when(on[i]).then(pl.lit(i, pl.Int32)).otherwise(expr)
    return expr


@dataclass
class MarketBuilder:
    """Collects checked rows in ``stage/.spill`` and writes the dataset into ``stage``."""

    stage: Path
    policy: str
    dropped: Counter[str] = field(default_factory=Counter)
    rows_in: Counter[str] = field(default_factory=Counter)
    states: dict[tuple[str, str, str], StreamState] = field(default_factory=dict)
    spills: dict[tuple[str, str], list[Path]] = field(default_factory=lambda: defaultdict(list))
    trades_by: Counter[tuple[str, str]] = field(default_factory=Counter)  # (sym, exchange)
    quotes_by: Counter[tuple[str, str]] = field(default_factory=Counter)
    rows_by_sym: Counter[str] = field(default_factory=Counter)
    tick_index: dict[str, int] = field(default_factory=dict)
    lot_index: dict[str, int] = field(default_factory=dict)
    orphans: set[tuple[str, str]] = field(default_factory=set)  # (sym, exchange) of trades never quoted
    first_tod: int | None = None  # ns of the UTC day
    last_tod: int | None = None

    def add(self, chunk: Chunk) -> None:
        """Check one chunk of the readers' rows and spill the kept ones (pass 1)."""
        table, df = chunk.table, chunk.df
        if df.height == 0:
            return
        self.rows_in[table] += df.height
        reason = _row_reason(table)
        if BAD_COL in df.columns:  # the reader's verdict first: it saw the value before conversion
            reason = pl.coalesce(pl.col(BAD_COL), reason)
        df = df.with_columns(_reason=reason).drop(BAD_COL, strict=False)
        names_bad = [name_problem(n) is not None for n in df["exchange"].to_list()]
        names_bad = [a or name_problem(n) is not None for a, n in zip(names_bad, df["sym"].to_list(), strict=True)]
        if any(names_bad):
            df = df.with_columns(_reason=pl.when(pl.Series(names_bad) & pl.col("_reason").is_null())
                                 .then(pl.lit(BAD_NAME)).otherwise("_reason"))
        kept: list[pl.DataFrame] = []
        idc = ID[table]
        for (exchange, sym), part in df.partition_by(["exchange", "sym"], maintain_order=True, as_dict=True).items():
            local = part["_reason"].to_numpy()
            ok = ~flagged(local)
            if exchange is not None and sym is not None:
                state = self.states.setdefault((table, str(exchange), str(sym)), StreamState())
                ts = part["ts"].cast(pl.Int64).fill_null(0).to_numpy()
                ids = part[idc].fill_null(0).to_numpy()
                ordered = order_reasons(ts, ok, state, unique_ts=False, ids=ids)
                if table == "quotes":
                    ordered = np.where(ordered == ID_NOT_INCREASING, SEQ_NOT_INCREASING, ordered)
                reasons = np.where(ok, ordered, local)
            else:
                reasons = local
            bad = flagged(reasons)
            if bad.any():
                if self.policy == "fail":
                    i = int(np.flatnonzero(bad)[0])
                    row = part.row(i, named=True)
                    values = {k: (v.isoformat() if isinstance(v, dt.datetime) else v) for k, v in row.items()
                              if not k.startswith("_")}
                    raise ImportFailure(Violation(chunk.source, int(row[ROW_COL]), str(reasons[i]), values))
                self.dropped.update(str(r) for r in reasons[bad])
                part = part.filter(pl.Series(~bad))
            if part.height:
                kept.append(part.drop("_reason", ROW_COL))
        if kept:
            self._spill(table, pl.concat(kept))

    def _spill(self, table: str, rows: pl.DataFrame) -> None:
        ns = rows["ts"].cast(pl.Int64)
        tod = ns % NS_PER_DAY
        lo, hi = int(tod.min()), int(tod.max())  # type: ignore[arg-type]
        self.first_tod = lo if self.first_tod is None else min(self.first_tod, lo)
        self.last_tod = hi if self.last_tod is None else max(self.last_tod, hi)
        grids = rows.group_by("sym").agg(
            _tick=pl.max_horizontal([_grid_index(pl.col(c), TICKS) for c in PRICES[table]]).max(),
            _lot=pl.max_horizontal([_grid_index(pl.col(c), LOTS) for c in SIZES[table]]).max(),
            _n=pl.len())
        for sym, tick, lot, n in grids.iter_rows():
            self.tick_index[sym] = max(self.tick_index.get(sym, 0), int(tick))
            self.lot_index[sym] = max(self.lot_index.get(sym, 0), int(lot))
            self.rows_by_sym[sym] += int(n)
        counts = self.trades_by if table == "trades" else self.quotes_by
        for sym, exchange, n in rows.group_by("sym", "exchange").agg(_n=pl.len()).iter_rows():
            counts[(sym, exchange)] += int(n)
        days = (ns // NS_PER_DAY).to_numpy()
        for d in np.unique(days):
            day = (mc.EPOCH + dt.timedelta(days=int(d))).isoformat()
            files = self.spills[(table, day)]
            dest = self.stage / ".spill" / table / day / f"{len(files)}.parquet"
            dest.parent.mkdir(parents=True, exist_ok=True)
            rows.filter(pl.Series(days == d)).write_parquet(dest, compression="lz4")
            files.append(dest)

    # -- pass 2 ---------------------------------------------------------------------------------

    def _instruments(self) -> pl.DataFrame:
        quoting: dict[str, list[str]] = defaultdict(list)
        for sym, exchange in self.quotes_by:
            quoting[sym].append(exchange)
        if not quoting:
            raise DatasetError("no quotes were imported (empty input, or every quote was dropped): a market "
                               "dataset needs quotes and trades")
        orphans = sorted(k for k in self.trades_by if k not in self.quotes_by)
        if orphans and self.policy == "fail":
            sym, exchange = orphans[0]
            raise DatasetError(f"trades of {sym!r} on {exchange!r}, a venue that never quotes it "
                               f"({TRADE_WITHOUT_QUOTES}; {len(orphans)} such (sym, exchange) pairs, e.g. "
                               "off-exchange prints); nothing was written (use --policy drop to drop and count them)")
        for k in orphans:
            self.dropped[TRADE_WITHOUT_QUOTES] += self.trades_by.pop(k)
        if not self.trades_by:
            raise DatasetError("no trades were imported (no trades file among the input, or every trade was "
                               "dropped): a market dataset needs quotes and trades; add the trades files of the "
                               "same days")
        self.orphans = set(orphans)
        trades = Counter[str]()
        for (sym, _), n in self.trades_by.items():
            trades[sym] += n
        syms = sorted(quoting, key=lambda s: (-trades[s], s.encode()))

        def primary(sym: str) -> str:
            return min(quoting[sym], key=lambda e: (-self.trades_by[(sym, e)], -self.quotes_by[(sym, e)], e.encode()))

        return pl.DataFrame({
            "sym": syms, "rank": list(range(1, len(syms) + 1)),
            "tick": [TICKS[min(self.tick_index[s], len(TICKS) - 1)] for s in syms],
            "lot": [LOTS[min(self.lot_index[s], len(LOTS) - 1)] for s in syms],
            "primary": [primary(s) for s in syms], "venues": [len(quoting[s]) for s in syms],
        }, schema={"sym": pl.String, "rank": pl.Int32, "tick": pl.Float64, "lot": pl.Float64,
                   "primary": pl.String, "venues": pl.Int32})

    def _blocks(self, syms: list[str], days: int) -> list[list[str]]:
        """Instruments in byte order, cut into runs of about BLOCK_ROWS rows a day."""
        blocks: list[list[str]] = [[]]
        rows = 0.0
        for s in sorted(syms, key=str.encode):
            per_day = self.rows_by_sym[s] / max(days, 1)
            if blocks[-1] and rows + per_day > BLOCK_ROWS:
                blocks.append([])
                rows = 0.0
            blocks[-1].append(s)
            rows += per_day
        return blocks

    def finish(self, fmt: str, notes: dict[str, Any]) -> Manifest:
        """Pass 2: derive the instruments and calendar, write the part files, day D's CSV and the
        manifest into the stage; returns the manifest (also written)."""
        inst = self._instruments()
        keep = set(inst["sym"].to_list())
        days = sorted({day for (_, day) in self.spills})
        assert self.first_tod is not None and self.last_tod is not None
        open_s = self.first_tod // (5 * NS_PER_MIN) * 300  # on a 5-minute boundary: M-VOLCURV's buckets start there
        close_s = min(86_400, (self.last_tod // NS_PER_MIN + 1) * 60)
        venues = sorted({e for (_, e) in self.quotes_by}, key=str.encode)
        cal = mc.Calendar(tuple(days), int(open_s), int(close_s), tuple(venues))
        params = mc.params_of(cal)
        inst_t = inst.to_arrow().cast(MARKET_SCHEMAS["instruments"])
        pq.write_table(inst_t, self.stage / INSTRUMENTS_PATH, compression="zstd")
        entries: list[dict[str, Any]] = [{
            "table": "instruments", "day": None, "path": INSTRUMENTS_PATH, "rows": inst_t.num_rows,
            "bytes": (self.stage / INSTRUMENTS_PATH).stat().st_size, "csv_bytes": csv_size(inst_t),
            "hash": hash_table(inst_t)}]
        blocks = self._blocks(sorted(keep), len(days))
        for day in days:
            for table in MARKET_TABLES:
                rows = self._day(table, day, keep)
                if table == "trades":
                    rows = self._with_sides(rows, self._day("quotes", day, keep))
                for b, syms in enumerate(blocks):
                    entries.append(self._write_block(table, day, b, syms, rows, self.orphans))
        entries.sort(key=lambda e: e["path"])
        d_rels = {t: [e["path"] for e in sorted(entries, key=lambda e: e.get("block", -1))
                      if e["table"] == t and e["day"] == params["D"]] for t in MARKET_TABLES}
        csv_info = {t: bulk_csv(self.stage, t, d_rels[t], csv_path(t, dt.date.fromisoformat(str(params["D"]))))
                    for t in MARKET_TABLES}
        return Manifest(
            scale=1.0, seed=0, symbols=0, content_hash=combine_hashes({e["path"]: e["hash"] for e in entries}),
            partitions=entries, csv=csv_info, params=params, source=f"import:{fmt}", generator_version="",
            kind=MARKET, universe=inst.height, calendar=cal.to_dict(),
            extra={"import": {"format": fmt, "rows_read": dict(self.rows_in), "dropped": dict(self.dropped),
                              **notes}},
        )

    def _day(self, table: str, day: str, keep: set[str]) -> pl.DataFrame:
        files = self.spills.get((table, day), [])
        schema = MARKET_SCHEMAS[table]
        if not files:
            return pl.DataFrame(schema.empty_table())
        df = pl.concat([pl.read_parquet(f) for f in files]).filter(pl.col("sym").is_in(list(keep)))
        return df.sort("sym", "ts", "exchange", ID[table], maintain_order=True)

    @staticmethod
    def _with_sides(trades: pl.DataFrame, quotes: pl.DataFrame) -> pl.DataFrame:
        """Sides where the source gave none: the quote rule against the trade's venue's prevailing
        quote (at or before the trade), at the mid or unquoted the tick rule."""
        if trades.height == 0 or trades["side"].null_count() == 0:
            return trades
        q = quotes.select("exchange", "sym", pl.col("ts").alias("_qts"), _mid=(pl.col("bid") + pl.col("ask")) / 2)
        marked = trades.with_row_index("_i").sort("ts").join_asof(
            q.sort("_qts"), left_on="ts", right_on="_qts", by=["exchange", "sym"], strategy="backward",
            check_sortedness=False).sort("_i")
        prev = pl.col("price").shift(1).over("sym")
        tick = pl.when(pl.col("price") > prev).then(pl.lit("buy")).when(pl.col("price") < prev).then(
            pl.lit("sell")).otherwise(None).forward_fill().over("sym").fill_null("buy")
        quote_rule = pl.when(pl.col("price") > pl.col("_mid")).then(pl.lit("buy")).when(
            pl.col("price") < pl.col("_mid")).then(pl.lit("sell"))
        return marked.with_columns(side=pl.coalesce(pl.col("side"), quote_rule, tick)).select(trades.columns)

    def _write_block(self, table: str, day: str, b: int, syms: list[str], rows: pl.DataFrame,
                     orphans: set[tuple[str, str]]) -> dict[str, Any]:
        mine = rows.filter(pl.col("sym").is_in(syms))
        if table == "trades" and orphans:
            pairs = pl.DataFrame(sorted(orphans), schema={"sym": pl.String, "exchange": pl.String}, orient="row")
            mine = mine.join(pairs, on=["sym", "exchange"], how="anti", maintain_order="left")
        t = mine.to_arrow().cast(MARKET_SCHEMAS[table])
        rel = f"{table}/{day}/block-{b}.parquet"
        dest = self.stage / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(t, dest, compression="zstd", use_dictionary=["exchange", "sym", "side"],
                       row_group_size=MARKET_ROW_GROUP)
        return {"table": table, "day": day, "block": b, "syms": [syms[0], syms[-1]], "path": rel,
                "rows": t.num_rows, "bytes": dest.stat().st_size, "csv_bytes": csv_size(t), "hash": hash_table(t)}


def chunks_of(tables: set[str], source: Iterator[Chunk]) -> Iterator[Chunk]:
    """The reader's chunks, refusing a table that is not one of the market dataset's."""
    for c in source:
        if c.table not in tables:
            raise DatasetError(f"{c.source}: {c.table} rows cannot go into a market dataset (quotes and trades)")
        yield c


def write_market(fmt: str, paths: list[Path], out: Path, stage: Path, opts: ReaderOptions, limit: int,
                 sample: int | None, trade_ids: str) -> ImportResult:
    """A market dataset (SPEC §1.3) from quotes and trades files (``fmt``'s market reader), into
    ``stage``, then ``out``: this kind's :meth:`~tickbench.datasets.base.DatasetKind.import_into`."""
    if sample is not None:
        raise DatasetError("--sample: a market dataset keeps every quote (the option samples order books)")
    builder = MarketBuilder(stage, opts.policy)
    for chunk in coalesce(chunks_of({"quotes", "trades"}, MARKET_READERS[fmt](paths, opts)), limit // 16):
        builder.add(chunk)
    builder.dropped.update(opts.dropped)  # rows a reader left out itself (TAQ's corrected trades)
    manifest = builder.finish(fmt, {"files": sorted(p.name for p in paths), "policy": opts.policy,
                                    "clock": opts.clock, "trade_ids": trade_ids, **opts.notes})
    shutil.rmtree(stage / ".spill", ignore_errors=True)
    finish_stage(stage, out, manifest)
    return ImportResult(manifest, dict(builder.dropped), dict(builder.rows_in))
