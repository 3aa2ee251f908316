"""What the format readers share: options, streaming CSV/Parquet input, the L2 book rebuild."""

from __future__ import annotations

import gzip
import heapq
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from tickbench.data.dataset import DatasetError
from tickbench.data.schema import TRADES_SCHEMA
from tickbench.datasets.paper.schema import BOOK_SCHEMA, LEVELS
from tickbench.datasets.paper.validate import MISSING_VALUE, TS_OUT_OF_RANGE

NS_PER_US = 1_000
ROW_COL = "_row"
#: A reader's own verdict on a row (a reason, or null), for what the row checks cannot see
#: once the value is converted: a timestamp outside int64 nanoseconds becomes null ts, and this
#: column says why. The writer takes it before its own checks and drops it.
BAD_COL = "_bad"
TS = pl.Datetime("ns", "UTC")
# int64 nanoseconds hold 1677-09-21 … 2262-04-11; a timestamp outside is refused, never wrapped.
NS_MAX = 2**63 - 1
US_MAX = NS_MAX // NS_PER_US

# (bytes of input consumed so far in the current file, its size, rows read so far)
ProgressFn = Callable[[str, int, int], None]


@dataclass
class ReaderOptions:
    """Reader options from the command line (see ``tickbench import --help``)."""

    sample: int | None = None  # one book snapshot per N updates; None = the format's default
    clock: str = "exchange"  # which timestamp becomes ts: "exchange" or "local" (arrival)
    trade_ids: str = "native"  # "native" ids (integers) or a "sequence" per (exchange, sym)
    block_bytes: int = 8 << 20  # CSV bytes per batch
    progress: ProgressFn | None = None
    notes: dict[str, Any] = field(default_factory=dict)  # facts for the manifest
    policy: str = "fail"  # what a reader does with a bad input row it handles itself
    dropped: Counter[str] = field(default_factory=Counter)  # rows a reader dropped, per reason

    def sample_or(self, default: int) -> int:
        n = default if self.sample is None else self.sample
        if n < 1:
            raise DatasetError(f"--sample {n}: must be at least 1")
        return n


@dataclass(frozen=True)
class Chunk:
    """Rows of one table in SPEC §1 layout plus ``_row`` (index of the input row they came from)."""

    table: str
    df: pl.DataFrame
    source: str


def normalize_exchange(col: str | pl.Expr = "exchange") -> pl.Expr:
    """Venue names as in generated data: upper case without separators (``binance-us`` and
    ``BINANCE_US`` both become ``BINANCEUS``)."""
    expr = pl.col(col) if isinstance(col, str) else col
    return expr.str.to_uppercase().str.replace_all(r"[-_ ]", "").alias("exchange")


def us_in_range(us: pl.Expr) -> pl.Expr:
    """True where µs since the epoch (integer or float) fit int64 nanoseconds."""
    return us.is_between(-US_MAX, US_MAX)


def us_to_ns(col: str) -> pl.Expr:
    """Integer µs since the epoch as integer ns; null where they do not fit int64 ns (never a
    silent wrap-around: year 1677 does not become 2262)."""
    us = pl.col(col).cast(pl.Int64)
    return pl.when(us_in_range(us)).then(us * NS_PER_US)


def us_to_ts(col: str) -> pl.Expr:
    """Integer µs since the epoch as a UTC ns timestamp; null where out of range (see
    :func:`us_bad`)."""
    return us_to_ns(col).cast(TS)


def us_bad(col: str) -> pl.Expr:
    """The :data:`BAD_COL` verdict on integer µs timestamps: out of range, or null."""
    us = pl.col(col).cast(pl.Int64)
    return pl.when(us.is_not_null() & ~us_in_range(us)).then(pl.lit(TS_OUT_OF_RANGE)).otherwise(
        pl.lit(None, dtype=pl.String)).alias(BAD_COL)


def check_ts(ts: list[Any], reasons: list[str | None], row0: int, source: str, opts: ReaderOptions) -> None:
    """Book update rows are rebuilt into snapshots, not checked row by row afterwards, so a
    row without a usable timestamp (``ts`` None: missing, non-finite or, as ``reasons`` says,
    out of range) is judged here: it stops the import under ``--policy fail``, naming the row,
    and is counted and left out (:class:`L2Rebuilder` skips it) under ``drop``."""
    bad = [i for i, t in enumerate(ts) if t is None]
    if not bad:
        return
    why = [reasons[i] or MISSING_VALUE for i in bad]
    if opts.policy == "fail":
        raise DatasetError(f"{source} row {row0 + bad[0]}: {why[0]} (a book update's timestamp); nothing was "
                           "written (use --policy drop to drop and count such rows)")
    opts.dropped.update(why)


@contextmanager
def reading(path: Path, what: str) -> Iterator[None]:
    """Turn what a reader or converter raises on a malformed file (a corrupt Parquet page, a
    column of the wrong type, a value no conversion takes) into a one-line DatasetError naming
    the file."""
    try:
        yield
    except DatasetError:
        raise
    except (pl.exceptions.PolarsError, pa.ArrowException, OSError, ValueError, TypeError, OverflowError, EOFError,
            zlib.error) as exc:  # EOFError, zlib.error: a gzip stream cut short or corrupt
        text = " ".join(str(exc).split())
        raise DatasetError(f"{path}: cannot be read as {what} ({type(exc).__name__}: "
                           f"{text[:300]}{'…' if len(text) > 300 else ''})") from exc


#: Bytes a header row may take: a file whose first line is longer (a 2 GB file without a line
#: break) is refused after reading this much, not read whole into memory.
HEADER_MAX_BYTES = 1 << 16


def first_line(path: Path) -> str:
    """The first line of a text file (gzip or plain), without its line break; at most
    :data:`HEADER_MAX_BYTES` are read, and a file whose first line is longer, a corrupt gzip
    stream or bytes that are not UTF-8 are a one-line DatasetError naming the file."""
    opener: Any = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            line = f.readline(HEADER_MAX_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise DatasetError(f"{path}: unreadable ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})") from exc
    if len(line) > HEADER_MAX_BYTES and not line.endswith(b"\n"):
        raise DatasetError(f"{path}: no line break in its first {HEADER_MAX_BYTES:,} bytes: not a file with a "
                           "header row (a CSV or Daily TAQ file); check that it is the file you meant")
    try:
        return line.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: its first line is not text (UTF-8): {exc.reason} at byte {exc.start}") from exc


def header(path: Path) -> list[str]:
    """The column names of a CSV file (gzip or plain), quoted or not (a bounded read:
    :func:`first_line`)."""
    line = first_line(path)
    # a CSV writer may quote the names ("exchange","symbol",…): the names are the same
    return [c.strip().strip('"') for c in line.split(",")] if line else []


class _Counting:
    """A raw input file whose position tells how much of it has been consumed."""

    def __init__(self, path: Path) -> None:
        self.f = pa.OSFile(str(path), "rb")
        self.size = path.stat().st_size

    def stream(self, path: Path) -> Any:
        return pa.CompressedInputStream(self.f, "gzip") if path.suffix == ".gz" else self.f

    def pos(self) -> int:
        return int(self.f.tell())


def csv_batches(
    path: Path, types: dict[str, pa.DataType], opts: ReaderOptions, names: list[str] | None = None,
    parse: pacsv.ParseOptions | None = None,
) -> Iterator[pa.RecordBatch]:
    """Record batches of a CSV file (gzip accepted as is), about ``opts.block_bytes`` each.

    ``names`` gives the columns of a file without a header row, ``parse`` its delimiter (and
    which malformed lines to skip) where not a comma. Columns not in ``types`` are read as
    strings.
    """
    raw = _Counting(path)
    read = pacsv.ReadOptions(block_size=opts.block_bytes, column_names=names, use_threads=False)
    conv = pacsv.ConvertOptions(column_types=types, strings_can_be_null=True,
                                true_values=["true", "True", "TRUE", "1"],
                                false_values=["false", "False", "FALSE", "0"])
    rows = 0
    try:
        reader = pacsv.open_csv(raw.stream(path), read_options=read, convert_options=conv, parse_options=parse)
        for batch in reader:
            rows += batch.num_rows
            if opts.progress:
                opts.progress(path.name, raw.pos(), raw.size)
            yield batch
    except (pa.ArrowException, OSError) as exc:
        raise DatasetError(f"{path}: cannot be read as this format's CSV after {rows} rows "
                           f"({' '.join(str(exc).split())[:300]})") from exc
    finally:
        raw.f.close()


def parquet_batches(path: Path, opts: ReaderOptions, row_bytes: int = 64) -> Iterator[pa.RecordBatch]:
    """Record batches of a Parquet file, about ``opts.block_bytes`` each."""
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise DatasetError(f"{path}: unreadable Parquet ({' '.join(str(exc).split())})") from exc
    done = 0
    size = path.stat().st_size
    batches = pf.iter_batches(batch_size=max(opts.block_bytes // row_bytes, 1024))
    while True:
        try:
            batch = next(batches, None)
        except (pa.ArrowException, OSError) as exc:  # a corrupt page, found when it is read
            raise DatasetError(f"{path}: unreadable Parquet after {done} rows "
                               f"({' '.join(str(exc).split())[:300]})") from exc
        if batch is None:
            return
        done += batch.num_rows
        if opts.progress:
            opts.progress(path.name, int(size * done / max(pf.metadata.num_rows, 1)), size)
        yield batch


def with_row_index(df: pl.DataFrame, offset: int) -> pl.DataFrame:
    return df.with_row_index(ROW_COL, offset=offset).with_columns(pl.col(ROW_COL).cast(pl.Int64))


def assign_sequence_ids(df: pl.DataFrame, counters: dict[tuple[str, str], int], col: str = "trade_id") -> pl.DataFrame:
    """Set ``col`` (``trade_id``, a quote's ``seq``) to 1, 2, 3 … per (exchange, sym) in file
    order, continuing from ``counters`` (updated) across batches and files."""
    n = df.with_columns(_n=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over("exchange", "sym"))
    offs = pl.DataFrame(
        {"exchange": [k[0] for k in counters], "sym": [k[1] for k in counters], "_off": list(counters.values())},
        schema={"exchange": pl.String, "sym": pl.String, "_off": pl.Int64},
    )
    out = n.join(offs, on=["exchange", "sym"], how="left", maintain_order="left")
    out = out.with_columns((pl.col("_n") + pl.col("_off").fill_null(0)).alias(col)).drop("_n", "_off")
    for ex, sym, c in n.group_by("exchange", "sym").agg(c=pl.len()).select("exchange", "sym", "c").iter_rows():
        counters[(ex, sym)] = counters.get((ex, sym), 0) + c
    return out


def group_ends(ts: np.ndarray, next_ts: int | None) -> np.ndarray:
    """True where a row is the last of a run of equal ``ts`` (one update message); the batch's
    last row ends a run when the next batch starts with another ts (``next_ts``; None: the
    file ended)."""
    nxt = np.empty(len(ts), dtype=bool)
    nxt[:-1] = ts[1:] != ts[:-1]
    if len(ts):
        nxt[-1] = next_ts is None or next_ts != ts[-1]
    return nxt


def book_frame(rows: dict[str, list[Any]]) -> pl.DataFrame:
    """A book DataFrame (SPEC order plus ``_row``) from column lists; ts as int ns."""
    schema: dict[str, Any] = {f.name: pl.Float64 for f in BOOK_SCHEMA}
    schema.update({"ts": pl.Int64, "exchange": pl.String, "sym": pl.String, ROW_COL: pl.Int64})
    df = pl.DataFrame(rows, schema=schema)
    return df.with_columns(pl.col("ts").cast(TS)).select([*BOOK_SCHEMA.names, ROW_COL])


def trades_select() -> list[str]:
    return [*TRADES_SCHEMA.names, ROW_COL]


@dataclass
class _Book:
    bids: dict[float, float] = field(default_factory=dict)
    asks: dict[float, float] = field(default_factory=dict)
    last_was_snapshot: bool = False
    synced: bool = False  # a snapshot has been seen
    updates: int = 0


class L2Rebuilder:
    """Rebuild level-2 books from price-level updates and sample snapshots of the top 20.

    Input rows carry (exchange, sym, message key, ts, is_snapshot, side, price, amount) where
    ``amount`` is the level's new size (0 removes it) and the rows of one exchange message share
    the message key. After every ``sample``-th message of a stream, the state after the whole
    message is emitted as one book row stamped with the message's last ``ts``. A snapshot row
    that follows a non-snapshot row starts a new book (a reconnect or a new day's file);
    updates before a stream's first snapshot are skipped and counted.
    """

    def __init__(self, sample: int) -> None:
        self.sample = sample
        self.books: dict[tuple[str, str], _Book] = {}
        self.pending: tuple[str, str, Any] | None = None  # the message being read
        self.pending_ts = 0
        self.pending_row = 0
        self.skipped = 0
        self.out: dict[str, list[Any]] = self._empty()

    @staticmethod
    def _empty() -> dict[str, list[Any]]:
        return {c: [] for c in [*BOOK_SCHEMA.names, ROW_COL]}

    def _end_message(self) -> None:
        if self.pending is None:
            return
        ex, sym, _ = self.pending
        self.pending = None
        book = self.books[(ex, sym)]
        if not book.synced:
            return
        book.updates += 1
        if book.updates % self.sample:
            return
        o = self.out
        o["ts"].append(self.pending_ts)
        o["exchange"].append(ex)
        o["sym"].append(sym)
        o[ROW_COL].append(self.pending_row)
        bids = heapq.nlargest(LEVELS, book.bids.items())
        asks = heapq.nsmallest(LEVELS, book.asks.items())
        for side, levels in (("b", bids), ("a", asks)):
            for i in range(LEVELS):
                price, size = levels[i] if i < len(levels) else (None, None)
                o[f"{side}{i + 1}price"].append(price)
                o[f"{side}{i + 1}size"].append(size)

    def feed(
        self, exchange: list[str], sym: list[str], msg: list[Any], ts: list[int], snapshot: list[bool],
        side: list[str], price: list[float], amount: list[float], row0: int, source: str,
    ) -> None:
        """Apply one batch of update rows (columns as lists; ``row0`` = input index of the first).
        A row that cannot be applied (no side, price or amount) is an error naming the row."""
        for i in range(len(ts)):
            if ts[i] is None:  # out of int64 ns: refused or counted by check_ts, never applied
                continue
            key = (exchange[i], sym[i], msg[i])
            if key != self.pending:
                self._end_message()
                self.pending = key
            book = self.books.get(key[:2])
            if book is None:
                book = self.books[key[:2]] = _Book()
            snap = bool(snapshot[i])
            if snap and not book.last_was_snapshot:
                book.bids.clear()
                book.asks.clear()
                book.synced = True
            book.last_was_snapshot = snap
            self.pending_ts, self.pending_row = ts[i], row0 + i
            if not book.synced:
                self.skipped += 1
                continue
            if side[i] not in ("bid", "ask") or price[i] is None or amount[i] is None or amount[i] < 0:
                raise DatasetError(f"{source} row {row0 + i}: a book update needs side bid/ask, a price and an "
                                   f"amount >= 0 (side={side[i]}, price={price[i]}, amount={amount[i]})")
            levels = book.bids if side[i] == "bid" else book.asks
            if amount[i] == 0:
                levels.pop(price[i], None)
            else:
                levels[price[i]] = amount[i]

    def take(self, final: bool = False) -> pl.DataFrame:
        """The snapshots emitted so far (and, with ``final``, after the last message)."""
        if final:
            self._end_message()
        out, self.out = self.out, self._empty()
        return book_frame(out)
