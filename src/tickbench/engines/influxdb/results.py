"""InfluxDB's answers as the SPEC's columns: bound parameters, query-file headers, series to
Arrow tables; and the Flux files' bound values and annotated CSV (the end of this module).

A query file may start with header comments that tell the adapter how to turn InfluxDB's series
into the SPEC's columns:

* ``-- columns: time=bucket`` renames result columns (InfluxQL always names the time ``time``);
* ``-- probe: t=ot_times`` says the file holds one statement per element of the list binding
  ``ot_times`` (bound as ``$ot_times_0``, ``$ot_times_1``, …) and that statement ``i``'s rows get
  a column ``t`` holding element ``i``: InfluxQL cannot select a parameter as a column;
* ``-- sort: sym, side, bucket`` makes the adapter sort the rows by these (renamed) columns:
  InfluxQL orders only by time, and returns series ordered by their tag set, whose keys are
  sorted by name (``side=…,sym=…``), so GROUP BY sym, side comes back side first;
* ``-- lookback: lo=month_start, 1m, 1h, 1d`` (with ``probe``) binds ``$lo_i`` to
  ``max(month_start, t_i - window)`` and runs the statements in rounds, one request each: first
  with the shortest window, then only the statements that found no point with the next window,
  and last with ``$lo_i`` = ``month_start`` itself. A statement that finds the newest point
  before ``t_i`` inside a window has found it over the whole range.
"""

from __future__ import annotations

import calendar
import csv
import datetime as dt
import io
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any

import polars as pl
import pyarrow as pa

from tickbench.datasets.paper.schema import SCHEMAS

HEADER = re.compile(r"^--\s*(columns|probe|sort|lookback):\s*(.*)$")
DURATION = re.compile(r"^(\d+)(s|m|h|d)$")
UNIT_NS = {"s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9, "d": 86_400 * 10**9}


def influx_bindings(binds: dict[str, Any]) -> dict[str, Any]:
    """InfluxDB's bound parameters from ``QueryParams.bindings()``: datetimes become integer
    nanoseconds (an integer compared with ``time`` is ns since the epoch), and each list
    ``name`` becomes ``name_0``, ``name_1``, … (InfluxQL has no list parameters)."""
    out: dict[str, Any] = {}
    for name, value in binds.items():
        if isinstance(value, list):
            out.update({f"{name}_{i}": _ns(v) for i, v in enumerate(value)})
        else:
            out[name] = _ns(value) if isinstance(value, dt.datetime) else value
    return out


def _ns(t: dt.datetime) -> int:
    delta = t - dt.datetime(1970, 1, 1)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


@dataclass(frozen=True)
class Lookback:
    """A ``-- lookback:`` header: the bound ``name`` (``$name_i``), the binding it never goes
    below (``floor``, a range start) and the windows tried before it, shortest first (ns)."""

    name: str
    floor: str
    windows_ns: tuple[int, ...]

    def lows(self, binds: dict[str, Any], probes: list[tuple[int, int]],
             window_ns: int | None) -> dict[str, int]:
        """``$name_i`` for each ``(i, t_i)`` of ``probes`` (t in ns; ``binds`` as from
        :func:`influx_bindings`): the window's start, or the floor when ``window_ns`` is None."""
        floor = int(binds[self.floor])
        return {f"{self.name}_{i}": floor if window_ns is None else max(floor, t - window_ns)
                for i, t in probes}


def statements(text: str) -> list[str]:
    """The statements of a query file: its text without comment lines, split at ``;``."""
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in code.split(";") if s.strip()]


def found(result: dict[str, Any]) -> bool:
    """Whether one statement's result holds a row."""
    return any(s.get("values") for s in result.get("series", []))


def parse_lookback(value: str) -> Lookback:
    """``lo=month_start, 1m, 1h, 1d`` → :class:`Lookback` (windows in s, m, h or d)."""
    first, *windows = [p.strip() for p in value.split(",") if p.strip()]
    name, sep, floor = first.partition("=")
    durations = [DURATION.match(w) for w in windows]
    if not sep or not windows or not all(durations):
        raise ValueError(f"bad lookback header {value!r}: want NAME=FLOOR_BINDING, 1m, 1h, …")
    ns = tuple(int(m.group(1)) * UNIT_NS[m.group(2)] for m in durations if m)
    if list(ns) != sorted(set(ns)):
        raise ValueError(f"bad lookback header {value!r}: the windows must grow")
    return Lookback(name.strip(), floor.strip(), ns)


@dataclass(frozen=True)
class Header:
    """What a query file's header comments ask of the adapter (see the module docstring)."""

    renames: dict[str, str] = field(default_factory=dict)
    probe: tuple[str, str] | None = None  # (column, list binding)
    sort: tuple[str, ...] = ()
    lookback: Lookback | None = None


def parse_header(text: str) -> Header:
    renames: dict[str, str] = {}
    probe: tuple[str, str] | None = None
    sort: tuple[str, ...] = ()
    lookback: Lookback | None = None
    for line in text.splitlines():
        m = HEADER.match(line.strip())
        if not m:
            continue
        if m.group(1) == "lookback":
            lookback = parse_lookback(m.group(2))
            continue
        items = [p.strip() for p in m.group(2).split(",") if p.strip()]
        if m.group(1) == "sort":
            sort = tuple(items)
            continue
        pairs = dict(p.split("=", 1) for p in items)
        if m.group(1) == "columns":
            renames.update(pairs)
        else:
            ((col, binding),) = pairs.items()
            probe = (col, binding)
    if lookback is not None and probe is None:
        raise ValueError("a lookback header needs a probe header (the times it looks back from)")
    return Header(renames, probe, sort, lookback)


def to_table(results: list[dict[str, Any]], renames: dict[str, str], columns: tuple[str, ...],
             probe_col: str | None, probes: list[dt.datetime] | None) -> pa.Table:
    """Flatten InfluxDB's statements → series → rows into one table with ``columns``.

    A series' tags become columns; ``time`` (and the probe column) are UTC timestamps, tags
    strings, every other value float64. Rows keep the server's order.
    """
    data: dict[str, list[Any]] = {}
    n = 0
    for i, result in enumerate(results):
        for series in result.get("series", []):
            values = series["values"]
            extra: dict[str, Any] = dict(series.get("tags") or {})
            if probe_col is not None and probes is not None:
                extra[probe_col] = _ns(probes[i])
            for name, value in extra.items():
                data.setdefault(name, [None] * n).extend([value] * len(values))
            for j, name in enumerate(series["columns"]):
                data.setdefault(name, [None] * n).extend(row[j] for row in values)
            n += len(values)
            for col in data.values():
                col.extend([None] * (n - len(col)))
    renamed = {renames.get(k, k): v for k, v in data.items()}
    times = {renames.get("time", "time"), probe_col}
    arrays = []
    for name in columns:
        values = renamed.get(name, [None] * n)
        if name in times:
            arrays.append(pa.array(values, pa.int64()).cast(pa.timestamp("ns", "UTC")))
        elif values and all(v is None or isinstance(v, str) for v in values) and any(
                isinstance(v, str) for v in values):
            arrays.append(pa.array(values, pa.string()))
        else:
            arrays.append(pa.array(values, pa.float64()))
    return pa.table(arrays, names=list(columns))


def ingest_table(table: str, series: list[dict[str, Any]]) -> pa.Table:
    """``table``'s SPEC schema from the series of an ``INGEST_READ`` result (tags and fields
    selected as columns; JSON numbers may come back as integers, e.g. 1 for 1.0)."""
    schema = SCHEMAS[table]
    values = [row for s in series for row in s.get("values") or []]
    if series:
        names = series[0]["columns"]
        pos = {("ts" if n == "time" else n): i for i, n in enumerate(names)}
    else:
        pos = {n: 0 for n in schema.names}
    cols = list(zip(*values, strict=True)) if values else [()] * len(pos)
    arrays = []
    for f in schema:
        data = cols[pos[f.name]]
        if f.name == "ts":
            arrays.append(pa.array(data, pa.int64()).cast(f.type))
        else:
            arrays.append(pa.array(data, f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


# -- Flux ---------------------------------------------------------------------------------
#
# A Flux file (``queries/<ID>.flux``, for what InfluxQL cannot express) is one script, sent as
# written to /api/v2/query with its parameters bound through the request's ``extern``: a Flux
# AST of variable assignments that the server merges in front of the script, so a value is a
# literal node of the AST and never parsed as Flux. A list ``name`` is bound element by element
# (``name_0``, ``name_1``, …, as for InfluxQL), and ``@in(r.sym, b_syms)`` in the script stands
# for ``(r.sym == b_syms_0 or r.sym == b_syms_1 …)``: Flux inlines such identifiers into the
# filter's predicate, which InfluxDB then pushes down to the storage engine (a ``contains()`` of
# an array it cannot). Answers come back as CSV with the ``datatype`` annotation.

#
# A list's elements can also name columns, by their place in the list, never by their value:
# ``@index(r.col, list)`` is the place ("0", "1", …) of the element ``r.col`` equals (an error if
# none: ``die``), which a pivot makes column names of (``b0``, ``b1``, …); ``@fill(b, list)``
# fills each of those columns from the row before (``fill(column: "b0", usePrevious: true) |>
# …``); the line ``@max(m = r.b, list)`` (or ``@min``) in a function's block assigns ``m`` the
# greatest (least) of the row's ``b0``, ``b1``, … that are not null, through ``m0``, ``m1``, …
# (if-expressions, no function calls: Flux evaluates them per row). Prefixes and names are
# lower-case identifiers of the file, places are numbers: no value of the data is ever written
# into the script.

FLUX_IN = re.compile(r"@in\(\s*r\.([A-Za-z_][A-Za-z0-9_]*)\s*,\s*([a-z][a-z0-9_]*)\s*\)")
FLUX_INDEX = re.compile(r"@index\(\s*r\.([A-Za-z_][A-Za-z0-9_]*)\s*,\s*([a-z][a-z0-9_]*)\s*\)")
FLUX_FILL = re.compile(r"@fill\(\s*([a-z][a-z0-9_]*)\s*,\s*([a-z][a-z0-9_]*)\s*\)")
FLUX_EXTREME = re.compile(
    r"^([ \t]*)@(max|min)\(\s*([a-z][a-z0-9_]*)\s*=\s*r\.([a-z][a-z0-9_]*)\s*,\s*([a-z][a-z0-9_]*)\s*\)[ \t]*$", re.M)
FLUX_NAME = re.compile(r"\b[a-z][a-z0-9_]*\b")
FLUX_META = ("", "result", "table")  # the CSV's annotation column and the result and table numbers


def flux_values(binds: dict[str, Any]) -> dict[str, Any]:
    """``name`` → value for each scalar, ``name_0``, ``name_1``, … for each list."""
    out: dict[str, Any] = {}
    for name, value in binds.items():
        if isinstance(value, list):
            out.update({f"{name}_{i}": v for i, v in enumerate(value)})
        else:
            out[name] = value
    return out


def flux_literal(value: Any) -> dict[str, Any]:
    """``value`` as a literal node of Flux's AST (its JSON form): strings, booleans, integers,
    finite floats, and times (a naive datetime is UTC; a date is its 00:00 UTC)."""
    if isinstance(value, bool):
        return {"type": "BooleanLiteral", "value": value}
    if isinstance(value, int | float) and value < 0:  # literals are unsigned: a negation of one
        return {"type": "UnaryExpression", "operator": "-", "argument": flux_literal(-value)}
    if isinstance(value, int):
        return {"type": "IntegerLiteral", "value": str(value)}
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"Flux has no literal for {value}")
        return {"type": "FloatLiteral", "value": value}
    if isinstance(value, str):
        return {"type": "StringLiteral", "value": value}
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return {"type": "DateTimeLiteral", "value": value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
    if isinstance(value, dt.date):
        return {"type": "DateTimeLiteral", "value": f"{value.isoformat()}T00:00:00Z"}
    raise TypeError(f"no Flux literal for {type(value).__name__} {value!r}")


def flux_program(text: str, binds: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A Flux file's script with each ``@in(r.col, list)``, ``@index``, ``@fill``, ``@max`` and
    ``@min`` expanded (see above), and the ``extern`` that
    binds every name of ``binds`` (lists flattened, see :func:`flux_values`) the script uses."""
    values = flux_values(binds)

    def any_of(m: re.Match[str]) -> str:
        col, name = m.groups()
        if name not in binds or not isinstance(binds[name], list):
            raise ValueError(f"{m.group(0)}: {name} is not a list binding")
        if not binds[name]:
            raise ValueError(f"{m.group(0)}: an empty list")
        return "(" + " or ".join(f"r.{col} == {name}_{i}" for i in range(len(binds[name]))) + ")"

    def places(m: re.Match[str], name: str) -> range:
        if name not in binds or not isinstance(binds[name], list):
            raise ValueError(f"{m.group(0)}: {name} is not a list binding")
        if not binds[name]:
            raise ValueError(f"{m.group(0)}: an empty list")
        return range(len(binds[name]))

    def index(m: re.Match[str]) -> str:
        col, name = m.groups()
        chain = " else ".join(f'if r.{col} == {name}_{i} then "{i}"' for i in places(m, name))
        return f'({chain} else die(msg: "{col}: a value not in {name}"))'

    def fill(m: re.Match[str]) -> str:
        prefix, name = m.groups()
        return " |> ".join(f'fill(column: "{prefix}{i}", usePrevious: true)' for i in places(m, name))

    def extreme(m: re.Match[str]) -> str:
        indent, kind, var, prefix, name = m.groups()
        op = ">" if kind == "max" else "<"
        lines = [f"{var}0 = r.{prefix}0"]
        lines += [f"{var}{i} = if not exists {var}{i - 1} or r.{prefix}{i} {op} {var}{i - 1} then r.{prefix}{i} "
                  f"else {var}{i - 1}" for i in places(m, name)[1:]]
        return "\n".join(indent + line for line in [*lines, f"{var} = {var}{len(lines) - 1}"])

    script = FLUX_IN.sub(any_of, text)
    script = FLUX_INDEX.sub(index, script)
    script = FLUX_FILL.sub(fill, script)
    script = FLUX_EXTREME.sub(extreme, script)
    used = sorted(set(FLUX_NAME.findall(script)) & values.keys())
    body = [{"type": "VariableAssignment", "id": {"type": "Identifier", "name": name},
             "init": flux_literal(values[name])} for name in used]
    return script, {"type": "File", "package": None, "imports": None, "body": body}


def _flux_time(text: str) -> int:
    """An RFC 3339 time of Flux's CSV (always UTC, ``Z``) as ns since the epoch."""
    if not text.endswith("Z"):
        raise ValueError(f"not a UTC time: {text!r}")
    whole, _, frac = text[:-1].partition(".")
    return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) * 10**9 + int((frac + "0" * 9)[:9])


FLUX_TYPES: dict[str, tuple[Any, Any]] = {  # a datatype annotation → (how to read a cell, Polars type)
    "string": (str, pl.String), "long": (int, pl.Int64), "unsignedLong": (int, pl.UInt64),
    "double": (float, pl.Float64), "boolean": (lambda v: v == "true", pl.Boolean),
    "dateTime:RFC3339": (_flux_time, pl.Int64), "dateTime:RFC3339Nano": (_flux_time, pl.Int64),
}


def flux_frame(text: str) -> pl.DataFrame:
    """The rows of an answer in Flux's annotated CSV (``#datatype``; a table a block, blocks
    apart by an empty line) as one frame: its columns but the result and table numbers, typed
    by the annotation (times as ns since the epoch), an empty cell null. Raises on the error
    table Flux writes when a query fails after its answer began. (Flux's CSV writes a line
    break inside a string as CRLF; no name of a dataset holds one.)"""
    frames: list[pl.DataFrame] = []
    rows = csv.reader(io.StringIO(text))
    kinds: list[str] | None = None
    for row in rows:
        if not any(row):
            continue  # between tables
        if row[0].startswith("#"):  # an annotation row: #datatype, and any other the server adds
            kinds = row if row[0] == "#datatype" else kinds
            continue
        if kinds is None:
            raise ValueError(f"Flux CSV: a table without its #datatype annotation: {row[:5]!r}")
        header = row
        if "error" in header and "reference" in header:
            message = next(rows, [])
            raise RuntimeError(f"InfluxDB Flux query failed: {message[header.index('error')] if message else ''}")
        cols: dict[str, list[Any]] = {name: [] for name in header if name not in FLUX_META}
        reads = {i: FLUX_TYPES[kinds[i]][0] for i, name in enumerate(header) if name not in FLUX_META}
        for line in rows:
            if not any(line):
                break
            for i, read in reads.items():
                cols[header[i]].append(read(line[i]) if line[i] != "" else None)
        schema = {header[i]: FLUX_TYPES[kinds[i]][1] for i in reads}
        frames.append(pl.DataFrame(cols, schema=schema))
        kinds = None
    return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
