"""The market suite (SPEC §2.3) on kdb+: the market tables in the same date-partitioned HDB as the
paper's, as kdb+ engineers keep a tick history.

* ``quotes`` and ``trades``: one partition a date (``.Q.dpft``), ``p#`` on ``sym``; within a sym,
  quotes in (ts, seq) order, so an as-of join (``aj``) on ``sym`exchange`ts`` finds, among quotes
  of one venue sharing a ts, the last, the greatest seq; trades in (ts, exchange, trade_id) order,
  SPEC §2.3's order of trades, so ``first``/``last price`` are the open and the close;
* ``instruments``: a splayed table at the HDB's root (mapped with it), enumerated against the
  same ``sym`` domain.

The market query files read ``p``, a dictionary of :meth:`MarketParams.bindings` (times as q
timestamps, names as symbols, lists as vectors) plus the spans as date pairs (``p`d``,
``p`w``, ``p`m``, ``p`vwab``) for ``date=`` and ``date within``.
Written from the documentation of q and PyKX; not yet run against a licensed kdb+.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from tickbench.datasets.market.params import MarketParams
from tickbench.datasets.market.schema import MARKET_SCHEMAS, MARKET_TABLES
from tickbench.engines.base import LoadFigures, storage_figures
from tickbench.engines.kdb.convert import to_q

if TYPE_CHECKING:
    from tickbench.data.dataset import Dataset
    from tickbench.datasets.base import RunParams

# Rows in time order before .Q.dpft's stable sort by sym: quotes tied on ts by seq (the latest
# quote is the last row at or before t), trades in (ts, exchange, trade_id), the order of close.
MARKET_SORT = {"quotes": ["ts", "seq"], "trades": ["ts", "exchange", "trade_id"]}


def m_literal(value: Any) -> str:
    """``value`` as q source text: a name as a symbol built from an escaped string (names are
    data: never code), a list of them as a symbol vector, times, dates and integers as q's."""
    if isinstance(value, str):
        return '`$(),"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        raise TypeError("no market binding is a boolean")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dt.datetime):
        return f"{value:%Y.%m.%d}D{value:%H:%M:%S}.{value.microsecond * 1000:09d}"
    if isinstance(value, dt.date):
        return f"{value:%Y.%m.%d}"
    if isinstance(value, list | tuple):
        if not value:
            raise ValueError("an empty list binding")
        if all(isinstance(v, str) for v in value):
            strings = ";".join('(),"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in value)
            return f"`$({strings})" if len(value) > 1 else f"`$enlist {strings}"
        items = " ".join(m_literal(v) for v in value)
        return items if len(value) > 1 else f"enlist {items}"
    raise TypeError(f"no q literal for {type(value).__name__}")


def market_prelude(params: RunParams) -> str:
    """``p:`name1`name2…!(value1;value2;…)`` for a market query: the bindings and the spans."""
    if not isinstance(params, MarketParams):
        raise TypeError("a market query binds a market dataset's parameters")
    binds: dict[str, Any] = dict(params.bindings())

    def span(days: list[str] | tuple[str, ...]) -> tuple[dt.date, dt.date]:
        return dt.date.fromisoformat(days[0]), dt.date.fromisoformat(days[-1])

    binds["d"] = dt.date.fromisoformat(params.D)
    binds["w"] = list(span(params.W))
    binds["m"] = list(span(params.M))
    binds["vwab"] = list(span(params.VWAB12D.days))
    return "p:" + "".join(f"`{k}" for k in binds) + "!(" + ";".join(m_literal(v) for v in binds.values()) + ")"


def _bytes_under(path: Path) -> int:
    """Bytes of the files under ``path`` (0 when it does not exist)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


class KdbMarket:
    """The kdb+ adapter's part for the market dataset, picked by ``by_kind`` (its embedded q and HDB helpers, lib.q)."""

    if TYPE_CHECKING:  # the adapter's, which this mixin is part of
        dataset: Dataset
        params: RunParams

        @property
        def hdb(self) -> Path: ...
        def _q(self) -> Any: ...
        def _abs(self, path: Path) -> Path: ...
        def _fresh(self, scratch: Path, name: str) -> Path: ...
        def _unmapped(self) -> Any: ...

    @property
    def market(self) -> MarketParams:
        if not isinstance(self.params, MarketParams):
            raise TypeError("the market capabilities run on a market dataset's parameters")
        return self.params

    def _market_day(self, table: str, day: str) -> pa.Table:
        """The dataset's rows of ``table`` on ``day`` (every part file), checked to lie in that
        UTC day: the HDB's date partitions are its day buckets."""
        schema = MARKET_SCHEMAS[table]
        files = [self._abs(f) for f in self.dataset.files(table, [day])]
        data = pa.concat_tables([pq.read_table(f, schema=schema) for f in files]) if files else schema.empty_table()
        if data.num_rows:
            ns = data["ts"].cast(pa.int64()).to_numpy()
            start = (dt.date.fromisoformat(day) - dt.date(1970, 1, 1)).days * 86_400 * 10**9
            if int(ns.min()) < start or int(ns.max()) >= start + 86_400 * 10**9:
                raise ValueError(f"{table} rows filed under {day} lie outside that UTC day")
        return data

    def _market_part(self, kx: Any, hdb: Path, table: str, day: str, data: Any) -> int:
        return int(kx.q(".tb.part", kx.CharVector(str(hdb)), kx.CharVector(day), table, data,
                        kx.SymbolVector(MARKET_SORT[table])).py())

    def _load_market(self) -> int:
        """Every day of M into its date partition of quotes and trades, then the instruments
        splayed at the root; the HDB mapped."""
        kx = self._q()
        kx.q(".tb.close[]")
        shutil.rmtree(self.hdb, ignore_errors=True)
        self.hdb.mkdir(parents=True)
        rows = 0
        for day in self.market.load_days():
            for table in MARKET_TABLES:
                rows += self._market_part(kx, self.hdb, table, day, to_q(kx, self._market_day(table, day)))
        instruments = self.dataset.instruments().to_arrow()
        rows += int(kx.q(".tb.splay", kx.CharVector(str(self.hdb)), "instruments", to_q(kx, instruments)).py())
        kx.q(".tb.open", kx.CharVector(str(self.hdb)))
        return rows

    def _market_csv(self, table: str) -> tuple[Path, str]:
        path = self._abs(self.dataset.csv_file(table))
        types = "".join("P" if pa.types.is_timestamp(f.type) else "S" if pa.types.is_string(f.type)
                        else "J" if pa.types.is_integer(f.type) else "F" for f in MARKET_SCHEMAS[table])
        return path, types

    def _bulk_load_market(self, fmt: str, scratch: Path) -> LoadFigures:
        """Day D's quotes and trades into a fresh HDB in ``scratch``, partitioned and sorted as
        the query HDB is (``.tb.part``); the rows counted back from the written columns."""
        with self._unmapped() as kx:
            store = self._fresh(scratch, f"mw_{fmt}")
            day = self.market.D
            nbytes = 0
            for table in MARKET_TABLES:
                if fmt == "csv":
                    path, types = self._market_csv(table)
                    nbytes += path.stat().st_size
                    data = kx.q(".tb.csv", kx.CharVector(str(path)), kx.CharVector(types),
                                kx.SymbolVector(MARKET_SCHEMAS[table].names))
                elif fmt == "parquet":
                    nbytes += sum(self._abs(f).stat().st_size for f in self.dataset.files(table, [day]))
                    data = to_q(kx, self._market_day(table, day))
                else:
                    raise ValueError(f"unknown format {fmt!r}")
                self._market_part(kx, store, table, day, data)
            rows = sum(int(kx.q(".tb.rows", kx.CharVector(str(store)), kx.CharVector(day), t).py())
                       for t in MARKET_TABLES)
            return LoadFigures(rows=rows, input_bytes=nbytes, detail={"bytes_on_disk": _bytes_under(store)})

    def _baseline_load_market(self, fmt: str, scratch: Path) -> LoadFigures:
        """The simplest durable copy: each table splayed as read, symbols enumerated."""
        with self._unmapped() as kx:
            store = self._fresh(scratch, f"mw_baseline_{fmt}")
            nbytes = rows = 0
            for table in MARKET_TABLES:
                if fmt == "csv":
                    path, types = self._market_csv(table)
                    nbytes += path.stat().st_size
                    data = kx.q("{[f;ty;nm] nm xcol (ty;enlist \",\") 0: hsym `$f}", kx.CharVector(str(path)),
                                kx.CharVector(types), kx.SymbolVector(MARKET_SCHEMAS[table].names))
                else:
                    files = [self._abs(f) for f in self.dataset.files(table, [self.market.D])]
                    nbytes += sum(f.stat().st_size for f in files)
                    data = to_q(kx, self._market_day(table, self.market.D))
                rows += int(kx.q(".tb.splay", kx.CharVector(str(store)), table, data).py())
            return LoadFigures(rows=rows, input_bytes=nbytes)

    def _storage_bytes_market(self) -> dict[str, int]:
        """The 20 date partitions, the sym file and the instruments table, in bytes."""
        days = [dt.date.fromisoformat(d).strftime("%Y.%m.%d") for d in self.market.load_days()]
        parts = sum(_bytes_under(self.hdb / d) for d in days if (self.hdb / d).is_dir())
        sym = (self.hdb / "sym").stat().st_size if (self.hdb / "sym").is_file() else 0
        instruments = _bytes_under(self.hdb / "instruments")
        # An HDB is its column files: p# lives in the column's own file, and nothing is logged.
        return storage_figures("hdb_partitions_sym_instruments", parts + sym + instruments, 0, 0,
                               hdb_partitions=parts, hdb_total=_bytes_under(self.hdb))
