"""InfluxDB line protocol for tickbench's rows: column-wise with Polars for loads, row by row
for the ingest capability's writes.

InfluxDB keeps one point per series and time, so trades tied on (exchange, sym, side, ts) would
replace each other: each trade gets a ``seq`` tag that keeps it a point of its own.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import polars as pl

from tickbench.datasets.paper.schema import book_level_columns

BATCH_BYTES = 4 << 20  # line protocol per /write request


class Ties:
    """The ``seq`` tag of each ingested trade: how many trades with the same (exchange, sym,
    side, ts) the store took before it, plus ``first`` (above every seq of a reopened store).

    InfluxDB keeps one point per series and time, so trades tied on all four would replace
    each other. Ties can reach the store in different writes and from different writers (the
    stream suite replays a day in which about a quarter of the trades tie), so the count is
    kept for the store, across its writers, under a lock. It holds one entry per distinct
    (exchange, sym, side, ts) written since the store was opened."""

    def __init__(self, first: int = 0) -> None:
        self.first = first
        self.lock = threading.Lock()
        self.seen: dict[tuple[str, str, str], dict[int, int]] = {}

    def seqs(self, rows: Sequence[tuple[Any, ...]]) -> list[int]:
        out = []
        with self.lock:
            for r in rows:
                times = self.seen.get((r[1], r[2], r[3]))
                if times is None:
                    times = self.seen[(r[1], r[2], r[3])] = {}
                n = times.get(r[0], 0)
                times[r[0]] = n + 1
                out.append(self.first + n)
        return out


@functools.cache
def _esc(tag: str) -> str:
    """A tag value escaped for line protocol (commas, spaces and equals signs)."""
    return tag.replace(",", "\\,").replace(" ", "\\ ").replace("=", "\\=")


# Floats print with repr (shortest round-trip, scientific notation for very large or small
# values, which line protocol accepts), so they read back equal; trade_id is an integer field.
_TRADE_LINE = "trades,exchange={},sym={},side={},seq={} price={!r},amount={!r},trade_id={}i {}\n"
_BOOK_LINE = "book,exchange={},sym={} " + ",".join(f"{c}={{!r}}" for c in book_level_columns()) + " {}\n"


def ingest_lines(table: str, rows: Sequence[tuple[Any, ...]], ties: Ties) -> bytes:
    """Line protocol for ``rows`` (SPEC order, ``ts`` in integer ns) of ``table``, as
    :func:`line_batches` writes the query data (book rows are unique per (exchange, sym, ts)
    by SPEC §1, so only trades need a ``seq`` tag)."""
    if table == "trades":
        text = "".join(_TRADE_LINE.format(_esc(r[1]), _esc(r[2]), _esc(r[3]), s, float(r[4]), float(r[5]), r[6], r[0])
                       for r, s in zip(rows, ties.seqs(rows), strict=True))
    elif table == "book":
        text = "".join(_BOOK_LINE.format(_esc(r[1]), _esc(r[2]), *map(float, r[3:]), r[0]) for r in rows)
    else:
        raise ValueError(f"unknown table {table!r}")
    return text.encode()


def _tag(col: str) -> pl.Expr:
    """A tag value escaped for line protocol (commas, spaces and equals signs)."""
    return pl.col(col).str.replace_all(r"([ ,=])", r"\$1")


def _trades_lines() -> pl.Expr:
    # Trades can share (exchange, sym, side, ts), and InfluxDB keeps one point per series and
    # time: the tag seq (0 for the first trade at a time, 1 for the next, … by trade_id) keeps
    # each trade a point of its own without altering any value.
    seq = (pl.col("trade_id").rank("ordinal").over("exchange", "sym", "side", "ts") - 1)
    return pl.format(
        "trades,exchange={},sym={},side={},seq={} price={},amount={},trade_id={}i {}\n",
        _tag("exchange"), _tag("sym"), _tag("side"), seq,
        pl.col("price"), pl.col("amount"), pl.col("trade_id"), pl.col("ts").cast(pl.Int64),
    )


def _book_lines() -> pl.Expr:
    cols = book_level_columns()
    fmt = "book,exchange={},sym={} " + ",".join(f"{c}={{}}" for c in cols) + " {}\n"
    return pl.format(fmt, _tag("exchange"), _tag("sym"), *[pl.col(c) for c in cols],
                     pl.col("ts").cast(pl.Int64))


LINES = {"trades": _trades_lines, "book": _book_lines}


def line_batches(frames: Iterable[tuple[str, pl.DataFrame]]) -> Iterator[bytes]:
    """Line protocol for ``(table, frame)`` pairs, in bodies of about ``BATCH_BYTES``.

    Each frame must hold whole (exchange, sym) days, so that trades tied on a timestamp are
    numbered together. Floats print in Polars' shortest round-trip form, so they read back equal.
    """
    pending: list[bytes] = []
    size = 0
    for table, frame in frames:
        lines = frame.select(LINES[table]()).to_series()
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
