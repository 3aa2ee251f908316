"""Check a market dataset (SPEC §1.3) against its invariants: ``tickbench validate`` on a
directory whose manifest says ``kind: market``.

Every row: values present and finite, prices > 0, each venue's ``bid < ask``, sizes and amounts
> 0, prices on the instrument's tick grid and sizes on its lot grid, ``side`` buy/sell, ``ts``
inside the session of its partition's day (the manifest's calendar: [14:30, 21:00) UTC when
generated), ``sym`` an instrument of the table and of its part file's range. Every (exchange,
sym) stream, across files and days: ``ts`` never going backwards, ``seq`` (quotes) and
``trade_id`` (trades) strictly increasing, so unique. The instruments table: one row per
instrument, ranks 1..N, positive grids, and ``venues`` equal to the number of venues that quote
the instrument (its ``primary`` among them); a trade only on a venue that quotes its instrument.
And every partition's rows hash to its manifest entry.

Partitions are read a batch at a time; what the order checks need from one batch to the next
(each stream's latest ``ts`` and id) is one row per stream.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
from pyarrow import ArrowException

from tickbench.data.dataset import (
    DatasetError,
    Manifest,
    check_rows,
    combine_hashes,
)
from tickbench.data.violations import (
    AMOUNT_NOT_POSITIVE,
    BACKWARDS,
    BAD_SIDE,
    BATCH_ROWS,
    HASH_MISMATCH,
    ID_NOT_INCREASING,
    MISSING_VALUE,
    OUTSIDE_PARTITION,
    SIZE_NOT_POSITIVE,
    ValidationReport,
    Violation,
    hash_parquet,
)
from tickbench.datasets.market import calendar as mc
from tickbench.datasets.market.manifest import check_market_data
from tickbench.datasets.market.schema import INSTRUMENTS_PATH, MARKET_SCHEMAS

VENUE_CROSSED = "a venue's quote locked or crossed (bid >= ask)"
PRICE_NOT_POSITIVE = "price not > 0"
OFF_TICK = "price off the instrument's tick grid"
OFF_LOT = "size off the instrument's lot grid"
OUTSIDE_SESSION = "ts outside the session of its day (the calendar's; generated: [14:30, 21:00) UTC)"
UNKNOWN_SYM = "sym not in the instruments table"
SEQ_NOT_INCREASING = "seq not increasing per (exchange, sym)"
BAD_INSTRUMENT = "instruments table row inconsistent"
VENUES_MISMATCH = "instruments.venues differs from the venues quoting it"
TRADE_WITHOUT_QUOTES = "trade on a venue that never quotes its instrument"
#: Plausible values: a price from the finest tick grid (10^-8) to 10^9 (a thousand times the
#: dearest share traded), a size or amount from 10^-8 to 10^15. Outside them a value is an error
#: in the data (a price of 1e300 makes a standard deviation inf), never a market's.
PRICE_BOUNDS = (1e-8, 1e9)
SIZE_BOUNDS = (1e-8, 1e15)
#: The timestamps every engine holds: QuestDB refuses a designated timestamp before 1970-01-01 and
#: InfluxDB 1.x queries none; int64 nanoseconds (DuckDB, Polars, ArcticDB, DataFusion, chDB's
#: DateTime64(9)) end at 2262-04-11 23:47:16.
ENGINE_TS_RANGE = "1970-01-01 to 2262-04-11"
TS_OUTSIDE_ENGINES = f"ts outside {ENGINE_TS_RANGE}, the times every engine holds"


def implausible(table: str) -> list[tuple[pl.Expr, str]]:
    """(condition, reason) per price and size column of ``table`` outside its plausible bounds."""
    cols = {"quotes": (("bid", "ask"), ("bsize", "asize")), "trades": (("price",), ("amount",))}[table]
    return [(~pl.col(c).is_between(*bounds), f"{c} outside the plausible [{bounds[0]:g}, {bounds[1]:g}]")
            for names, bounds in zip(cols, (PRICE_BOUNDS, SIZE_BOUNDS), strict=True) for c in names]


def _then_implausible(expr: Any, table: str) -> Any:
    for cond, reason in implausible(table):
        expr = expr.when(cond).then(pl.lit(reason))
    return expr

GRID_TOL = 1e-6  # in grid units: a price is on its grid when price / tick is this close to a whole number


def _off_grid(col: str, grid: str) -> pl.Expr:
    x = pl.col(col) / pl.col(grid)
    return (x - x.round()).abs() > GRID_TOL


def _finite(cols: list[str]) -> pl.Expr:
    return pl.any_horizontal([(pl.col(c).is_null() | ~pl.col(c).is_finite()).fill_null(True) for c in cols])


def quotes_reason() -> pl.Expr:
    """The first row-local invariant a quote breaks, or null (needs ``tick``, ``lot``, ``_t0``)."""
    expr = (
        pl.when(pl.any_horizontal([pl.col(c).is_null() for c in ("ts", "exchange", "sym", "seq")])
                | _finite(["bid", "ask", "bsize", "asize"])).then(pl.lit(MISSING_VALUE))
        .when(pl.col("tick").is_null()).then(pl.lit(UNKNOWN_SYM))
        .when((pl.col("bid") <= 0) | (pl.col("ask") <= 0)).then(pl.lit(PRICE_NOT_POSITIVE))
        .when(pl.col("bid") >= pl.col("ask")).then(pl.lit(VENUE_CROSSED))
        .when((pl.col("bsize") <= 0) | (pl.col("asize") <= 0)).then(pl.lit(SIZE_NOT_POSITIVE))
    )
    return (
        _then_implausible(expr, "quotes")
        .when(_off_grid("bid", "tick") | _off_grid("ask", "tick")).then(pl.lit(OFF_TICK))
        .when(_off_grid("bsize", "lot") | _off_grid("asize", "lot")).then(pl.lit(OFF_LOT))
        .when(_outside_session()).then(pl.lit(OUTSIDE_SESSION))
        .otherwise(pl.lit(None, dtype=pl.String))
    )


def trades_reason() -> pl.Expr:
    """The first row-local invariant a trade breaks, or null (needs ``tick``, ``lot``, ``_t0``)."""
    expr = (
        pl.when(pl.any_horizontal([pl.col(c).is_null() for c in ("ts", "exchange", "sym", "side", "trade_id")])
                | _finite(["price", "amount"])).then(pl.lit(MISSING_VALUE))
        .when(pl.col("tick").is_null()).then(pl.lit(UNKNOWN_SYM))
        .when(~pl.col("side").is_in(["buy", "sell"])).then(pl.lit(BAD_SIDE))
        .when(pl.col("price") <= 0).then(pl.lit(PRICE_NOT_POSITIVE))
        .when(pl.col("amount") <= 0).then(pl.lit(AMOUNT_NOT_POSITIVE))
    )
    return (
        _then_implausible(expr, "trades")
        .when(_off_grid("price", "tick")).then(pl.lit(OFF_TICK))
        .when(_off_grid("amount", "lot")).then(pl.lit(OFF_LOT))
        .when(_outside_session()).then(pl.lit(OUTSIDE_SESSION))
        .otherwise(pl.lit(None, dtype=pl.String))
    )


def _outside_session() -> pl.Expr:
    ts = pl.col("ts").cast(pl.Int64)
    return (ts < pl.col("_t0")) | (ts >= pl.col("_t1"))


REASON = {"quotes": quotes_reason, "trades": trades_reason}
ID = {"quotes": "seq", "trades": "trade_id"}
NOT_INCREASING = {"quotes": SEQ_NOT_INCREASING, "trades": ID_NOT_INCREASING}
STATE_SCHEMA = {"exchange": pl.String, "sym": pl.String, "_last_ts": pl.Int64, "_last_id": pl.Int64}


def _values(row: dict[str, Any], table: str) -> dict[str, Any]:
    keys = ["ts", "exchange", "sym", *(("bid", "ask", "bsize", "asize", "seq") if table == "quotes"
                                       else ("side", "price", "amount", "trade_id"))]
    return {k: (row[k].isoformat() if isinstance(row[k], dt.datetime) else row[k]) for k in keys}


def _check_file(root: Path, entry: dict[str, Any], grids: pl.DataFrame, state: pl.DataFrame,
                report: ValidationReport, cal: mc.Calendar) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Stream one part file through the checks; returns the updated per-stream state and the
    (exchange, sym) pairs the file holds."""
    table, rel = entry["table"], entry["path"]
    path = root / rel
    try:
        pf = pq.ParquetFile(path)
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{path}: unreadable Parquet ({exc})") from exc
    if pf.schema_arrow.names != MARKET_SCHEMAS[table].names:
        raise DatasetError(f"{path}: columns {pf.schema_arrow.names} are not the {table} schema of SPEC §1.3")
    t0, t1 = cal.session_ns(entry["day"])
    first, last = entry.get("syms", [None, None])
    idc = ID[table]
    pairs: list[pl.DataFrame] = []
    offset = 0
    for batch in pf.iter_batches(batch_size=BATCH_ROWS):
        raw = pl.from_arrow(batch)
        assert isinstance(raw, pl.DataFrame)
        df = (raw.with_row_index("_row", offset)
              .join(grids, on="sym", how="left", maintain_order="left")
              .with_columns(_t0=pl.lit(t0, pl.Int64), _t1=pl.lit(t1, pl.Int64))
              .with_columns(_reason=REASON[table]()))
        if first is not None:
            outside = pl.col("sym").is_not_null() & ((pl.col("sym") < first) | (pl.col("sym") > last))
            df = df.with_columns(_reason=pl.when(pl.col("_reason").is_null() & outside)
                                 .then(pl.lit(OUTSIDE_PARTITION)).otherwise("_reason"))
        # Order checks over the rows that pass the row-local ones, per (exchange, sym) stream,
        # continuing from the previous batch and file.
        ok = df.filter(pl.col("_reason").is_null()).join(state, on=["exchange", "sym"], how="left",
                                                          maintain_order="left")
        key = ["exchange", "sym"]
        ts = pl.col("ts").cast(pl.Int64)
        prev_ts = pl.coalesce(ts.shift(1).over(key), pl.col("_last_ts"))
        prev_id = pl.coalesce(pl.col(idc).shift(1).over(key), pl.col("_last_id"))
        ordered = ok.with_columns(
            _order=pl.when(ts < prev_ts).then(pl.lit(BACKWARDS))
            .when(pl.col(idc) <= prev_id).then(pl.lit(NOT_INCREASING[table]))
            .otherwise(pl.lit(None, dtype=pl.String)))
        bad = pl.concat([
            df.filter(pl.col("_reason").is_not_null()).select("_row", "_reason"),
            ordered.filter(pl.col("_order").is_not_null()).select("_row", _reason="_order"),
        ]).sort("_row")
        for row_index, reason in bad.iter_rows():
            row = raw.row(int(row_index) - offset, named=True)
            report.add(Violation(rel, int(row_index), reason, _values(row, table)))
        latest = ordered.group_by(key, maintain_order=True).agg(
            _last_ts=ts.last(), _last_id=pl.col(idc).last())
        state = pl.concat([state, latest.cast(STATE_SCHEMA)]).unique(key, keep="last", maintain_order=True)  # type: ignore[arg-type]
        pairs.append(raw.select(key).unique())
        report.rows += raw.height
        offset += raw.height
    report.files += 1
    held = pl.concat(pairs).unique() if pairs else pl.DataFrame(schema={"exchange": pl.String, "sym": pl.String})
    return state, held


def _check_instruments(root: Path, manifest: Manifest, report: ValidationReport, cal: mc.Calendar) -> pl.DataFrame:
    path = root / INSTRUMENTS_PATH
    try:
        inst = pl.read_parquet(path)
    except (OSError, pl.exceptions.ComputeError) as exc:
        raise DatasetError(f"{path}: unreadable Parquet ({exc})") from exc
    if inst.columns != MARKET_SCHEMAS["instruments"].names:
        raise DatasetError(f"{path}: columns {inst.columns} are not the instruments schema of SPEC §1.3")
    report.files += 1
    report.rows += inst.height
    n = manifest.universe if manifest.universe is not None else inst.height
    problems: list[tuple[int, str]] = []
    if inst.height != n:
        problems.append((-1, f"{inst.height} instruments, the manifest's universe is {n}"))
    dup = inst.filter(pl.col("sym").is_duplicated() | pl.col("sym").is_null())
    problems += [(-1, f"sym {s!r} is not unique") for s in dup["sym"].unique().to_list()]
    ranks = inst["rank"].drop_nulls().sort().to_list()
    if ranks != list(range(1, inst.height + 1)):
        problems.append((-1, "ranks are not 1 … N, each once"))
    bad = inst.with_row_index("_row").filter(
        ~(pl.col("tick") > 0).fill_null(False) | ~(pl.col("lot") > 0).fill_null(False)
        | pl.col("primary").is_null() | ~pl.col("venues").is_between(1, len(cal.venues)).fill_null(False))
    problems += [(int(r["_row"]), f"{r['sym']}: tick, lot, primary or venues invalid")
                 for r in bad.iter_rows(named=True)]
    for row, text in problems:
        report.add(Violation(INSTRUMENTS_PATH, row, BAD_INSTRUMENT, {"problem": text}))
    return inst


def validate_market(directory: Path, manifest: Manifest, report: ValidationReport) -> ValidationReport:
    """Check every part file of the market dataset in ``directory`` (see the module docstring)."""
    report.spec = "SPEC §1.3"
    try:
        cal = mc.calendar_of(manifest.calendar)
    except ValueError as exc:
        raise DatasetError(f"{directory}: its manifest's calendar: {exc}") from None
    inst = _check_instruments(directory, manifest, report, cal)
    grids = inst.select("sym", "tick", "lot").unique("sym", keep="first", maintain_order=True)
    hashes: dict[str, str] = {}
    entry_inst = next((e for e in manifest.partitions if e["table"] == "instruments"), None)
    if entry_inst is not None:
        h = hash_parquet(directory / INSTRUMENTS_PATH, MARKET_SCHEMAS["instruments"])
        hashes[entry_inst["path"]] = h
        if h != entry_inst["hash"]:
            report.add(Violation(entry_inst["path"], -1, HASH_MISMATCH, {"manifest": entry_inst["hash"], "rows": h}))
    held: dict[str, list[pl.DataFrame]] = {"quotes": [], "trades": []}
    for table in ("quotes", "trades"):
        state = pl.DataFrame(schema=STATE_SCHEMA)
        entries = sorted((e for e in manifest.partitions if e["table"] == table),
                         key=lambda e: (e["day"], e.get("block", 0), e["path"]))
        for entry in entries:
            if not (directory / entry["path"]).is_file():
                raise DatasetError(f"{directory}: missing {entry['path']} named in its manifest")
            try:
                state, pairs = _check_file(directory, entry, grids, state, report, cal)
                h = hash_parquet(directory / entry["path"], MARKET_SCHEMAS[table])
            except (OSError, ValueError, ArrowException) as exc:  # garbage of a Parquet file's size, say
                raise DatasetError(f"{directory / entry['path']}: unreadable as Parquet of the {table} schema "
                                   f"({' '.join(str(exc).split())[:200]}); the dataset was modified") from None
            held[table].append(pairs)
            hashes[entry["path"]] = h
            if h != entry["hash"]:
                report.add(Violation(entry["path"], -1, HASH_MISMATCH, {"manifest": entry["hash"], "rows": h}))
            else:  # the rows are the manifest's: an entry's row count other than theirs was edited in
                check_rows(directory / entry["path"], entry)
    empty = pl.DataFrame(schema={"exchange": pl.String, "sym": pl.String})
    quoting = pl.concat(held["quotes"]).unique() if held["quotes"] else empty
    trading = pl.concat(held["trades"]).unique() if held["trades"] else empty
    counts = quoting.group_by("sym").agg(n=pl.len(), venues_seen=pl.col("exchange").sort())
    check = inst.join(counts, on="sym", how="left", maintain_order="left").with_columns(pl.col("n").fill_null(0))
    for r in check.filter(pl.col("n") != pl.col("venues")).iter_rows(named=True):
        report.add(Violation(INSTRUMENTS_PATH, r["rank"] - 1, VENUES_MISMATCH,
                             {"sym": r["sym"], "venues": r["venues"], "quoted_on": r["venues_seen"] or []}))
    primary = check.filter(pl.col("n") > 0, ~pl.col("venues_seen").list.contains(pl.col("primary")).fill_null(False))
    for r in primary.iter_rows(named=True):
        report.add(Violation(INSTRUMENTS_PATH, r["rank"] - 1, VENUES_MISMATCH,
                             {"sym": r["sym"], "primary": r["primary"], "quoted_on": r["venues_seen"]}))
    orphan = trading.join(quoting, on=["exchange", "sym"], how="anti").sort("sym", "exchange")
    for r in orphan.iter_rows(named=True):
        report.add(Violation("trades", -1, TRADE_WITHOUT_QUOTES, dict(r)))
    if combine_hashes(hashes) != manifest.content_hash and not report.counts[HASH_MISMATCH]:
        report.add(Violation("manifest.json", -1, HASH_MISMATCH, {"content_hash": manifest.content_hash}))
    if not report.counts[HASH_MISMATCH]:  # the manifest's venues, seed and scale against the data
        check_market_data(directory, manifest, set(quoting["exchange"].to_list()))
    return report
