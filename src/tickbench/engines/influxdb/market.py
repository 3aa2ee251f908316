"""The market suite (SPEC §2.3) on InfluxDB 1.x: a measurement per table, the names as tags,
the numbers as fields, shards of one day, written as line protocol over HTTP ``/write``.

The schema (see README "Market tables"):

* ``quotes,exchange=…,sym=…,tie=… bid,ask,bsize,asize,seq`` — a series per (exchange, sym), so
  "the latest quote of a venue" is ``last(seq)`` per series. A venue can quote twice at one ts,
  and InfluxDB keeps one point per series and time: the tag ``tie`` (0 for the first quote at a
  time, 1 for the next, … by seq) keeps each one. Merged in ``GROUP BY exchange, sym``, ``last()``
  breaks a tie on time by the greater value (``IntegerLastReduce`` in query/call_iterator.go), so
  ``last(seq)`` is the quote with the greatest (ts, seq), and the fields beside it are its own.
* ``trades,exchange=…,side=…,sym=…,tie=… price,amount,trade_id,ord`` — ``tie`` as for quotes (by
  trade_id). ``ord`` is the trade's place in its instrument-day's tape, ordered by (ts, exchange,
  trade_id) as SPEC §2.3 orders trades: InfluxDB orders points by time alone, so trades sharing
  a ts on several venues need it to know which is first and last (``min(ord)``/``max(ord)``
  select the open and the close, with their price beside them).
* ``instruments,sym=… rank,tick,lot,primary,venues`` at the first loaded day's 00:00 UTC.

A market query file is InfluxQL with a few header comments the adapter expands
(:func:`expand`): ``-- each: t=t_times`` runs the file's statements once per element of a list
binding (``$t_times[]`` is that element, and the answer gets a column ``t`` holding it);
``@in(sym, b_syms)`` is ``("sym" = $b_syms_0 OR "sym" = $b_syms_1 …)`` — the names are bound
parameters, never code; ``@in(sym, ui_pair_sym by ui_pair_req)`` takes the elements paired with
the current ``each`` element; ``-- key:`` the columns joining the statements of one element;
``-- grid: sym=b_syms`` keeps a row for every (element, name); ``-- columns: time=day`` renames;
``-- rank: rank=-notional, sym`` numbers the rows in that order; ``-- nan: sd`` reads NaN as null (``stddev()`` of
one point is NaN); ``-- marks: h=1, 10, …`` with a ``-- then`` line makes a mark-out file of two
rounds (see :meth:`InfluxMarket._markout_rounds`). Rows are sorted by the SPEC's order (InfluxQL
orders only by time).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa
import pyarrow.csv as pacsv

from tickbench.data.dataset import Dataset
from tickbench.datasets.market.params import MarketParams
from tickbench.datasets.market.reference import COLUMNS, SORT  # the answers' columns, types and row order
from tickbench.datasets.market.schema import MARKET_SCHEMAS, MARKET_TABLES
from tickbench.engines.base import LoadFigures
from tickbench.engines.influxdb.lineprotocol import BATCH_BYTES
from tickbench.engines.influxdb.load import shard_storage
from tickbench.engines.influxdb.writer import Session

if TYPE_CHECKING:
    from tickbench.datasets.base import RunParams

HEADER = re.compile(r"^--\s*(each|key|grid|columns|rank|nan|marks):\s*(.*)$")
THEN = re.compile(r"^--\s*then\s*$", re.M)  # a mark-out file's second round follows this line
MARK_VALUES = ("at", "sign", "price", "amount")  # what a trade's row binds in the second round
IN = re.compile(r"@in\(\s*([a-z_]+)\s*,\s*([a-z0-9_]+)(?:\s+by\s+([a-z0-9_]+))?\s*\)")
ITEM = re.compile(r"\$([a-z0-9_]+)\[\]")
PARAM = re.compile(r"\$([a-z0-9_]+)")
TS = pl.Datetime("ns", "UTC")
DAY_NS = 86_400 * 10**9
ELEMENT = "__element"  # the column of a shaped answer holding its row's each element


# -- line protocol ---------------------------------------------------------------------------

def _tag(col: str) -> pl.Expr:
    """A tag value escaped for line protocol (commas, spaces and equals signs)."""
    return pl.col(col).str.replace_all(r"([ ,=])", r"\$1")


def _ns(col: str = "ts") -> pl.Expr:
    return pl.col(col).cast(pl.Int64)


def quote_ties(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame``'s quotes with ``tie``: their number among the quotes of one (exchange, sym, ts),
    by seq (0 for the first). ``frame`` must hold whole (exchange, sym) days."""
    return frame.with_columns(tie=pl.col("seq").rank("ordinal").over("exchange", "sym", "ts") - 1)


def trade_tape(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame``'s trades with ``tie``, their number among the trades of one (exchange, sym,
    side, ts) by trade_id, and ``ord``, each trade's place in its (sym, UTC day)'s (ts, exchange,
    trade_id) order. ``frame`` must hold whole (sym, day)s."""
    day = pl.col("ts").dt.date()
    return frame.sort("sym", "ts", "exchange", "trade_id").with_columns(
        ord=pl.int_range(pl.len(), dtype=pl.Int64).over("sym", day),
        tie=pl.col("trade_id").rank("ordinal").over("exchange", "sym", "side", "ts") - 1)


def quote_lines(frame: pl.DataFrame) -> pl.Series:
    """Line protocol of quotes, with their ``tie`` (:func:`quote_ties`, unless ``frame`` has it)."""
    if "tie" not in frame.columns:
        frame = quote_ties(frame)
    return frame.select(pl.format(
        "quotes,exchange={},sym={},tie={} bid={},ask={},bsize={},asize={},seq={}i {}\n",
        _tag("exchange"), _tag("sym"), pl.col("tie"), pl.col("bid"), pl.col("ask"), pl.col("bsize"),
        pl.col("asize"), pl.col("seq"), _ns())).to_series()


def trade_lines(frame: pl.DataFrame) -> pl.Series:
    """Line protocol of trades, with their ``tie`` and ``ord`` (:func:`trade_tape`, unless
    ``frame`` has them)."""
    if "ord" not in frame.columns:
        frame = trade_tape(frame)
    return frame.select(pl.format(
        "trades,exchange={},side={},sym={},tie={} price={},amount={},trade_id={}i,ord={}i {}\n",
        _tag("exchange"), _tag("side"), _tag("sym"), pl.col("tie"), pl.col("price"), pl.col("amount"),
        pl.col("trade_id"), pl.col("ord"), _ns())).to_series()


def instrument_lines(frame: pl.DataFrame, at_ns: int) -> pl.Series:
    """Line protocol of the instruments table, every point at ``at_ns``."""
    primary = pl.col("primary").str.replace_all(r'(["\\])', r"\$1")
    return frame.select(pl.format(
        'instruments,sym={} rank={}i,tick={},lot={},primary="{}",venues={}i ' + str(int(at_ns)) + "\n",
        _tag("sym"), pl.col("rank"), pl.col("tick"), pl.col("lot"), primary, pl.col("venues"))).to_series()


LINES = {"quotes": quote_lines, "trades": trade_lines}


def batches(series: Iterable[pl.Series]) -> Iterator[bytes]:
    """Line-protocol series joined into request bodies of about ``BATCH_BYTES``."""
    pending: list[bytes] = []
    size = 0
    for lines in series:
        total = int(lines.str.len_bytes().sum())
        step = max(1, len(lines) * BATCH_BYTES // max(1, total))
        for chunk in lines.to_frame().iter_slices(step):
            body = chunk.to_series().str.join("").item().encode()
            pending.append(body)
            size += len(body)
            if size >= BATCH_BYTES:
                yield b"".join(pending)
                pending, size = [], 0
    if pending:
        yield b"".join(pending)


# -- query files -----------------------------------------------------------------------------

@dataclass(frozen=True)
class MarketHeader:
    """A market query file's header comments (see the module docstring)."""

    each: tuple[str, str] | None = None  # (column, list binding)
    key: tuple[str, ...] = ()
    grid: tuple[str, str] | None = None  # (column, list binding)
    renames: dict[str, str] = field(default_factory=dict)
    rank: tuple[str, tuple[str, ...]] | None = None  # (column, the order it numbers)
    nan: tuple[str, ...] = ()
    marks: tuple[str, tuple[int, ...]] | None = None  # (column, the horizons in seconds)


def parse_market_header(text: str) -> MarketHeader:
    found: dict[str, str] = {}
    for line in text.splitlines():
        m = HEADER.match(line.strip())
        if m:
            found[m.group(1)] = m.group(2)

    def items(name: str) -> list[str]:
        return [p.strip() for p in found.get(name, "").split(",") if p.strip()]

    def pair(name: str) -> tuple[str, str] | None:
        if name not in found:
            return None
        col, sep, binding = found[name].partition("=")
        if not sep:
            raise ValueError(f"bad {name} header {found[name]!r}: want COLUMN=LIST_BINDING")
        return col.strip(), binding.strip()

    renames = dict(p.split("=", 1) for p in items("columns"))
    rank = None
    if "rank" in found:
        col, sep, order = found["rank"].partition("=")
        by = tuple(c.strip() for c in order.split(",") if c.strip())
        if not sep or not by:
            raise ValueError(f"bad rank header {found['rank']!r}: want COLUMN=-col, col")
        rank = (col.strip(), by)
    marks = None
    if "marks" in found:
        col, sep, hs = found["marks"].partition("=")
        marks = (col.strip(), tuple(int(h) for h in hs.split(",") if h.strip()))
        if not sep or not marks[1]:
            raise ValueError(f"bad marks header {found['marks']!r}: want COLUMN=1, 10, …")
    return MarketHeader(pair("each"), tuple(items("key")), pair("grid"),
                        {k.strip(): v.strip() for k, v in renames.items()}, rank, tuple(items("nan")), marks)


def statements(text: str) -> list[str]:
    """The statements of a query file: its text without comment lines, split at ``;``."""
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in code.split(";") if s.strip()]


def bound_value(v: Any) -> Any:
    """A binding as InfluxDB takes it: a time as integer ns since the epoch (a date: its
    00:00 UTC), names and numbers as they are."""
    if isinstance(v, dt.datetime):
        delta = v - dt.datetime(1970, 1, 1)
        return (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1_000
    if isinstance(v, dt.date):
        return (v - dt.date(1970, 1, 1)).days * DAY_NS
    return v


def flat_bindings(binds: dict[str, Any]) -> dict[str, Any]:
    """``name`` for each scalar, ``name_0``, ``name_1``, … for each list (InfluxQL has no lists)."""
    out: dict[str, Any] = {}
    for name, value in binds.items():
        if isinstance(value, list):
            out.update({f"{name}_{i}": bound_value(v) for i, v in enumerate(value)})
        else:
            out[name] = bound_value(value)
    return out


def expand(stmt: str, binds: dict[str, Any], item: int | None, each_value: Any = None) -> str:
    """``stmt`` with ``$list[]`` as the ``item``-th element and each ``@in(tag, list [by keys])``
    as an OR of the tag's equality with each element's bound parameter."""
    def element(m: re.Match[str]) -> str:
        if item is None:
            raise ValueError(f"{m.group(0)} outside an each-query")
        return f"${m.group(1)}_{item}"

    def any_of(m: re.Match[str]) -> str:
        tag, name, by = m.groups()
        values = binds[name]
        picked = [j for j in range(len(values)) if by is None or binds[by][j] == each_value]
        if not picked:
            raise ValueError(f"@in({tag}, {name}): an empty list")
        return "(" + " OR ".join(f'"{tag}" = ${name}_{j}' for j in picked) + ")"

    return IN.sub(any_of, ITEM.sub(element, stmt))


def statement_rows(results: Iterable[tuple[int, dict[str, Any]]], renames: dict[str, str]) -> pl.DataFrame:
    """Statements' series as one frame, built once: for each ``(element, result)``, every
    series' values with its tags beside them and ``element`` in column ``__element`` (columns
    renamed by ``renames``; ``time`` dropped unless renamed). Collected as Python lists, column by
    column, across every series and element (a GROUP BY sym answer is a series per sym: a frame
    each would cost more than the query)."""
    cols: dict[str, list[Any]] = {ELEMENT: []}
    n = 0
    for element, result in results:
        for series in result.get("series", []):
            values = series.get("values") or []
            if not values:
                continue
            for j, name in enumerate(series["columns"]):
                name = renames.get(name, name)
                if name == "time":
                    continue
                cols.setdefault(name, [None] * n).extend(row[j] for row in values)
            for name, v in (series.get("tags") or {}).items():
                cols.setdefault(renames.get(name, name), [None] * n).extend([v] * len(values))
            cols[ELEMENT].extend([element] * len(values))
            n += len(values)
            for got in cols.values():  # a column this series lacks: null on its rows
                if len(got) < n:
                    got.extend([None] * (n - len(got)))
    return pl.DataFrame(cols, strict=False) if n else pl.DataFrame()


def shape(qid: str, frame: pl.DataFrame, header: MarketHeader) -> pa.Table:
    """The answer of ``qid``: the SPEC's columns and types, in its row order."""
    cols = COLUMNS[qid]
    out = []
    for name, kind in cols.items():
        if name not in frame.columns:
            out.append(pl.lit(None, kind).alias(name))
        elif kind == TS:
            out.append(pl.col(name).cast(pl.Int64).cast(TS))
        elif kind == pl.Date():
            out.append(pl.col(name).cast(pl.Int64).cast(TS).dt.date())
        elif name in header.nan:
            out.append(pl.col(name).cast(pl.Float64).fill_nan(None))
        else:
            out.append(pl.col(name).cast(kind))
    done = frame.select(out) if frame.height else pl.DataFrame(schema=cols)
    if header.rank is not None:  # numbered in the header's order ("-notional": largest first)
        name, by = header.rank
        done = done.sort([c.lstrip("-") for c in by], descending=[c.startswith("-") for c in by]).with_columns(
            pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias(name))
    return done.sort(list(SORT[qid])).to_arrow()


class InfluxMarket:
    """The market capabilities of the InfluxDB adapter (its HTTP write and query paths)."""

    if TYPE_CHECKING:  # the adapter's, which this mixin is part of
        dataset: Dataset
        params: RunParams
        host: str
        query_requests: int
        _settling: set[str]
        _expected: dict[str, int]

        @property
        def db(self) -> str: ...
        @property
        def http_port(self) -> int: ...
        def _create(self, db: str) -> None: ...
        def _write_all(self, db: str, batches: Iterable[bytes]) -> None: ...
        def _query(self, q: str, db: str = ..., params: dict[str, Any] | None = None,
                   session: Session | None = None, packed: bool = False) -> list[dict[str, Any]]: ...
        def _shards(self, db: str) -> list[tuple[int, str, str]]: ...
        def w_durability(self) -> str: ...
        def credentials(self) -> tuple[str, str] | None: ...
        def _influx_import(self, db: str, bodies: Iterable[bytes], scratch: Path) -> int: ...

    @property
    def market(self) -> MarketParams:
        params = self.params
        if not isinstance(params, MarketParams):
            raise TypeError("the market capabilities run on a market dataset's parameters")
        return params

    # -- loading ------------------------------------------------------------------------

    def _market_write(self, db: str, series: Iterable[pl.Series], expected: int) -> int:
        """A fresh database ``db`` (shards of one day) holding ``series``' lines; the rows are
        checked against the points read back by pending_visibility, which the runner calls next."""
        self._create(db)
        self._write_all(db, batches(series))
        self._expected[db] = expected
        return expected

    def _day_lines(self, days: list[str]) -> Iterator[pl.Series]:
        # A part file holds one day of a block of instruments, every venue: ties and each
        # instrument-day's tape order are all inside it.
        for table in MARKET_TABLES:
            for f in self.dataset.files(table, days):
                yield LINES[table](pl.read_parquet(f))

    def _load_market(self) -> int:
        days = self.market.load_days()
        instruments = self.dataset.instruments()
        rows = instruments.height + sum(int(e["rows"]) for t in MARKET_TABLES for e in self.dataset.entries(t, days))
        first = bound_value(dt.date.fromisoformat(min(days)))
        series = [instrument_lines(instruments, first), *self._day_lines(days)]
        self._market_write(self.db, series, rows)
        self._settling.add(self.db)
        return rows

    def _day_frames(self, fmt: str) -> tuple[dict[str, pl.DataFrame], int]:
        """Day D's quotes and trades parsed from ``fmt``, and the input's bytes."""
        frames: dict[str, pl.DataFrame] = {}
        nbytes = 0
        for table in MARKET_TABLES:
            if fmt == "csv":
                path = self.dataset.csv_file(table)
                nbytes += path.stat().st_size
                opts = pacsv.ConvertOptions(column_types=MARKET_SCHEMAS[table])
                frames[table] = pl.from_arrow(pacsv.read_csv(path, convert_options=opts))  # type: ignore[assignment]
            elif fmt == "parquet":
                files = self.dataset.files(table, [self.market.D])
                nbytes += sum(f.stat().st_size for f in files)
                frames[table] = pl.concat([pl.read_parquet(f) for f in files]) if files else pl.DataFrame(
                    schema=pl.from_arrow(MARKET_SCHEMAS[table].empty_table()).schema)  # type: ignore[union-attr]
            else:
                raise ValueError(f"unknown format {fmt!r}")
        return frames, nbytes

    def _bulk_load_market(self, fmt: str, scratch: Path) -> LoadFigures:
        """Day D into a fresh database ``mw_<fmt>`` built as the query store is (shards of a
        day), through the same line-protocol writers."""
        frames, nbytes = self._day_frames(fmt)
        expected = sum(f.height for f in frames.values())
        db = f"mw_{fmt}"
        self._market_write(db, (LINES[t](f) for t, f in frames.items()), expected)
        return LoadFigures(rows=expected, input_bytes=nbytes,
                           detail={"database": db, "durability": self.w_durability()})

    def _baseline_load_market(self, fmt: str, scratch: Path) -> LoadFigures:
        """InfluxDB's own importer, ``influx -import`` with its defaults, on a line-protocol file
        made from the same input (InfluxDB 1.x reads neither CSV nor Parquet)."""
        frames, nbytes = self._day_frames(fmt)
        expected = sum(f.height for f in frames.values())
        db = f"mw_baseline_{fmt}"
        self._create(db)
        scratch.mkdir(parents=True, exist_ok=True)
        lp_bytes = self._influx_import(db, batches(LINES[t](f) for t, f in frames.items()), scratch)
        self._expected[db] = expected
        return LoadFigures(rows=expected, input_bytes=nbytes, detail={
            "database": db, "tool": "influx -import", "line_protocol_bytes": lp_bytes,
            "durability": self.w_durability()})

    def _storage_bytes_market(self) -> dict[str, int]:
        """The loaded database's shards (one a day) and its series file, split as SE's
        (:func:`~tickbench.engines.influxdb.load.shard_storage`)."""
        root: Path = self.root  # type: ignore[attr-defined]
        shards = self._shards(self.db)
        days = set(self.market.load_days())
        if {start[:10] for _, _, start in shards} - days or len(shards) != len(days):
            raise RuntimeError(f"M-SE: {len(shards)} shards in {self.db}, expected one per loaded day ({len(days)})")
        return shard_storage(root, self.db, [(rp, str(i)) for i, rp, _ in shards])

    # -- queries ------------------------------------------------------------------------

    def market_statements(self, qid: str, text: str, market: MarketParams | None = None
                          ) -> tuple[MarketHeader, list[tuple[Any, str]]]:
        """The statements of a market query file, each with its ``each`` element (or None),
        bound to ``market`` (default: the adapter's parameters)."""
        header = parse_market_header(text)
        binds = (market or self.market).bindings()
        stmts = statements(text)
        if header.each is None:
            return header, [(None, expand(s, binds, None)) for s in stmts]
        values = binds[header.each[1]]
        return header, [(v, expand(s, binds, i, v)) for i, v in enumerate(values) for s in stmts]

    def run_market_query(self, qid: str, text: str, session: Session | None, market: MarketParams | None = None,
                         db: str | None = None) -> pa.Table:
        """Run a market query file (all its statements in one request) and shape its answer;
        bound to ``market`` on database ``db`` (defaults: the adapter's parameters, the loaded
        database; a market ingest reader passes its user's and the store's)."""
        market, db = market or self.market, db or self.db
        if THEN.search(text):
            return self._run_markouts(qid, text, session, market, db)
        header, stmts = self.market_statements(qid, text, market)
        binds = flat_bindings(market.bindings())
        q = ";\n".join(s for _, s in stmts)
        used = {name: binds[name] for name in PARAM.findall(q)}
        results = self._query(q, db=db, params=used, session=session, packed=True)
        self.query_requests = 1
        return shape(qid, self._merge(header, stmts, results, market), header)

    def _markout_rounds(self, text: str, session: Session | None, explain: bool = False,
                        market: MarketParams | None = None, db: str | None = None
                        ) -> tuple[MarketHeader, list[tuple[int, int, str]], list[dict[str, Any]], str]:
        """A mark-out file's two rounds (M-THEOPL: InfluxQL has no joins). First, one statement
        per element of the ``each`` list: the trade's own row (its time, price, amount and
        side tag). Then, per trade found and per horizon h of ``-- marks:``, the statements
        after ``-- then`` with ``$at[]`` = its time + h s (within its UTC day), ``$sign[]``
        (+1 buy, -1 sell), ``$price[]`` and ``$amount[]`` bound: InfluxDB finds the quote and
        computes the mark-out. Returns the header, each lookup's (element, h, statement), the
        second round's results, and (``explain``) the plans of both rounds' first statements."""
        header = parse_market_header(text)
        if header.each is None or header.marks is None:
            raise ValueError("a mark-out file needs an each header and a marks header")
        first_text, then_text = THEN.split(text, maxsplit=1)
        market, db = market or self.market, db or self.db
        binds = market.bindings()
        flat = flat_bindings(binds)
        n = len(binds[header.each[1]])
        lookups = [expand(st, binds, i) for i in range(n) for st in statements(first_text)]
        if len(lookups) != n:
            raise ValueError("a mark-out file's first round is one statement per trade")
        rows = self._query(";\n".join(lookups), db=db, session=session, packed=True,
                           params={k: flat[k] for k in PARAM.findall(";".join(lookups))})
        day_end = int(flat["d_end"]) - 1
        marks: list[tuple[int, int, str]] = []
        for i, result in enumerate(rows):
            found = [(series.get("tags") or {}, dict(zip(series["columns"], v, strict=True)))
                     for series in result.get("series", []) for v in series.get("values") or []]
            if not found:
                continue  # not a trade of D: no mark-out
            if len(found) > 1:
                raise RuntimeError(f"{len(found)} trades match element {i} of {header.each[1]}")
            tags, row = found[0]
            for h in header.marks[1]:
                k = len(marks)
                flat |= {f"at_{k}": min(int(row["time"]) + h * 10**9, day_end),
                         f"sign_{k}": 1.0 if tags.get("side") == "buy" else -1.0,
                         f"price_{k}": float(row["price"]), f"amount_{k}": float(row["amount"])}
                for st in statements(then_text):
                    for name in MARK_VALUES:
                        st = st.replace(f"${name}[]", f"${name}_{k}")
                    marks.append((i, h, expand(st, binds, i)))
        plan = ""
        if explain:
            out = []
            for st in (lookups[0], marks[0][2]) if marks else (lookups[0],):
                used = {k: flat[k] for k in PARAM.findall(st)}
                res = self._query("EXPLAIN ANALYZE " + st, db=db, params=used)
                out += [str(v[0]) for r in res for s in r.get("series", []) for v in s["values"]]
            return header, marks, [], "\n".join(out)
        q = ";\n".join(st for _, _, st in marks)
        results = self._query(q, db=db, session=session, packed=True,
                              params={k: flat[k] for k in PARAM.findall(q)}) if marks else []
        self.query_requests = 2 if marks else 1
        return header, marks, results, plan

    def _run_markouts(self, qid: str, text: str, session: Session | None, market: MarketParams,
                      db: str) -> pa.Table:
        header, marks, results, _ = self._markout_rounds(text, session, market=market, db=db)
        assert header.each is not None and header.marks is not None
        binds = market.bindings()
        out: dict[str, list[Any]] = {"exchange": [], "sym": [], header.each[0]: [], header.marks[0]: [], "pnl": []}
        for (i, h, _), result in zip(marks, results, strict=True):
            values = [v for series in result.get("series", []) for v in series.get("values") or []]
            if not values:
                continue  # no quote of the venue before ts + h on that day: no row
            cols = result["series"][0]["columns"]
            out["exchange"].append(binds["p_exchanges"][i])
            out["sym"].append(binds["p_syms"][i])
            out[header.each[0]].append(binds[header.each[1]][i])
            out[header.marks[0]].append(h)
            out["pnl"].append(values[0][cols.index("pnl")])
        return shape(qid, pl.DataFrame(out, strict=False), header)

    def _merge(self, header: MarketHeader, stmts: list[tuple[Any, str]],
               results: list[dict[str, Any]], market: MarketParams) -> pl.DataFrame:
        """The statements' rows, those of one ``each`` element joined on the key columns (the
        grid's rows kept where a statement found nothing), every element's at once: one frame
        per statement of the file (:func:`statement_rows`, the element a column), joined on
        (element, key)."""
        col = header.each[0] if header.each else None
        binds = market.bindings()
        values = binds[header.each[1]] if header.each else [None]
        per = len(stmts) // len(values)  # the file's statements, repeated per element in order
        keys = [ELEMENT, *(k for k in header.key if k != col)]
        joined: pl.DataFrame | None = None
        if header.grid is not None:
            gcol, glist = header.grid
            joined = pl.DataFrame({ELEMENT: range(len(values))}, schema={ELEMENT: pl.Int64}).join(
                pl.DataFrame({gcol: binds[glist]}, schema={gcol: pl.String}), how="cross")
        for p in range(per):
            fr = statement_rows(((i // per, results[i]) for i in range(p, len(results), per)), header.renames)
            if fr.width == 0:
                continue  # no series for any element: nothing found
            fr = fr.with_columns(pl.col(ELEMENT).cast(pl.Int64))
            joined = fr if joined is None else joined.join(
                fr, on=keys, how="left" if header.grid else "full", coalesce=True)
        if joined is None or not joined.height:
            return pl.DataFrame()
        if col is not None:
            each = pl.Series(col, [bound_value(v) for v in values], strict=False)
            joined = joined.with_columns(each.gather(joined[ELEMENT]))
        return joined.drop(ELEMENT)

    def market_explain(self, qid: str, text: str) -> str:
        """``EXPLAIN ANALYZE`` of each statement of the query's first ``each`` element (InfluxQL
        explains one SELECT at a time; the other elements differ only in their bound values)."""
        if THEN.search(text):
            return self._markout_rounds(text, None, explain=True)[3]
        _, stmts = self.market_statements(qid, text)
        binds = flat_bindings(self.market.bindings())
        first = [s for v, s in stmts if v == stmts[0][0]]
        out = [f"(the first {len(first)} of {len(stmts)} statements)"] if len(first) < len(stmts) else []
        for stmt in first:
            used = {name: binds[name] for name in PARAM.findall(stmt)}
            results = self._query("EXPLAIN ANALYZE " + stmt, db=self.db, params=used)
            out += [str(v[0]) for r in results for s in r.get("series", []) for v in s["values"]]
        return "\n".join(out)
