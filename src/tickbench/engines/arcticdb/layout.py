"""How tickbench lays its data out in ArcticDB, and the handle its query files receive.

One library, ``tickbench``; one symbol per (table, instrument), named ``<table>.<sym>``
(``book.BTC-USD``; :func:`symbol_name` encodes an instrument name ArcticDB's symbol keys cannot
hold), indexed by ``ts`` (naive datetime64[ns], UTC by convention), holding all
venues' rows in time order with the SPEC's columns, and the venues of each day as its
metadata. Trades are ordered by ``(ts, trade_id)``, so
a resample's ``last`` is the trade with the highest id on a tie; book rows by ``(ts, exchange)``.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl
from arcticdb import DataError, ReadRequest
from arcticdb.version_store.library import Library

from tickbench.datasets.paper.schema import TABLES

LIBRARY = "tickbench"
# The symbol metadata key listing each day's venues: {"2022-07-20": ["BINANCEUS", …], …}.
VENUES = "venues_by_day"
# Row order inside a symbol: ties on ts in trade_id order (C-VT's "last trade" rule).
SORT_KEYS = {"trades": ["ts", "trade_id"], "book": ["ts", "exchange"]}


# ArcticDB's symbol keys hold printable ASCII only, not all of it (it refuses ``*``, ``<`` …), and
# fewer than 255 bytes; names of these characters are kept as they are.
_PLAIN_SYM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")
_ENCODED = "~"


def symbol_name(table: str, sym: str) -> str:
    """The ArcticDB symbol of one (table, instrument): ``<table>.<sym>`` for a plain instrument
    name (``book.BTC-USD``), else ``<table>.~`` and the name's UTF-8 in lowercase base32
    without padding (``book.€`` → ``book.~4kbky``); at most 110 characters for the 64-byte
    names a dataset holds."""
    if _PLAIN_SYM.fullmatch(sym):
        return f"{table}.{sym}"
    return f"{table}.{_ENCODED}{base64.b32encode(sym.encode()).decode().rstrip('=').lower()}"


def split_symbol(name: str) -> tuple[str, str]:
    """(table, instrument) of a symbol :func:`symbol_name` made."""
    table, _, sym = name.partition(".")
    if sym.startswith(_ENCODED):
        text = sym[1:].upper()
        sym = base64.b32decode(text + "=" * (-len(text) % 8)).decode()
    return table, sym


@dataclass
class Store:
    """What a query file works with: the library and its symbols, listed once at start."""

    lib: Library
    by_table: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def open(cls, lib: Library) -> Store:
        by_table: dict[str, dict[str, str]] = {t: {} for t in TABLES}
        for name in sorted(lib.list_symbols()):
            table, sym = split_symbol(name)
            if table in by_table:
                by_table[table][sym] = name
        return cls(lib, by_table)

    def symbols(self, table: str) -> dict[str, str]:
        """``{instrument: symbol}`` of ``table``."""
        return self.by_table[table]

    def symbol(self, table: str, sym: str) -> str:
        return self.by_table[table][sym]

    def read(self, symbol: str, **kwargs: Any) -> pl.DataFrame:
        """``Library.read`` (the library returns Polars); the index comes back as column ``ts``."""
        frame: pl.DataFrame = self.lib.read(symbol, **kwargs).data
        return frame

    def venues(self, symbol: str, days: Sequence[str]) -> set[str]:
        """The venues with rows in ``symbol`` on ``days``, from the metadata written with it
        (one small read)."""
        meta = self.lib.read_metadata(symbol).metadata
        if not isinstance(meta, dict) or VENUES not in meta:
            raise RuntimeError(f"ArcticDB symbol {symbol} has no {VENUES} metadata: it was not "
                               "written by tickbench's load; load the data again")
        return {v for d in days for v in meta[VENUES].get(d, [])}

    def read_batch(self, requests: Sequence[ReadRequest]) -> list[pl.DataFrame]:
        """``Library.read_batch``, raising the first per-symbol error instead of returning it."""
        out: list[pl.DataFrame] = []
        for item in self.lib.read_batch(list(requests)):
            if isinstance(item, DataError):
                raise RuntimeError(f"ArcticDB read of {item.symbol} failed: {item.exception_string}")
            out.append(item.data)
        return out
