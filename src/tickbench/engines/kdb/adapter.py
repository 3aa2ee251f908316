"""kdb+ through PyKX: q embedded in the worker process, over a date-partitioned HDB on disk.

kdb+ runs only with a licence from KX, so this module never imports ``pykx`` at import time (the
registry imports every adapter): :meth:`Adapter.probe` checks PyKX and its licence in a child
Python process, and :meth:`Adapter.start` imports PyKX in the worker that runs the engine.

Query contract: ``queries/<ID>.q`` is q script text whose last expression is the answer, an
unkeyed table with the SPEC's columns in order, its rows sorted. The adapter runs
``p:<parameters>;<the file, flattened>`` (see :func:`flatten` and :func:`prelude`): ``p`` is a
dictionary of the run's parameters, so a query reads ``p`sym``, ``p`day`` and so on.
Written from the documentation of q and PyKX; not yet run against a licensed kdb+.

With an external endpoint (``--endpoint kdb=HOST:PORT``: a q process the user runs, e.g.
``q -p 5001``), no local licence is needed: PyKX runs unlicensed (``PYKX_UNLICENSED``), which
allows IPC and conversions only, and every q evaluation happens in that process (:class:`Remote`).
Untested here: no kdb+ and no PyKX on this machine (see the README).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tickbench.data.dataset import Dataset
from tickbench.datasets.paper.params import QueryParams
from tickbench.datasets.paper.schema import SCHEMAS, TABLES
from tickbench.engines.base import (
    BulkLoad,
    Endpoint,
    Engine,
    EngineInfo,
    EngineUnavailable,
    LoadFigures,
    Storage,
    StoreByKind,
    by_kind,
    storage_figures,
)
from tickbench.engines.kdb.convert import to_q
from tickbench.engines.kdb.market import KdbMarket, market_prelude

HERE = Path(__file__).parent
LIB = HERE / "lib.q"
SORT_KEYS = {"trades": ["ts", "trade_id"], "book": ["ts"]}  # time order; ties on ts by trade_id
Q_EPOCH_NS = 946_684_800_000_000_000  # q counts timestamps from 2000.01.01, Arrow from 1970.01.01
Q_EPOCH_DAYS = 10_957
LICENCE = "kdb+ needs a licence from KX"
# What decides whether PyKX finds a licence (PyKX's documentation: the working directory, then
# QLIC, QHOME, then the base64 variables); the probe is redone when one of them, or the working
# directory, changes.
LICENCE_ENV = ("QLIC", "QHOME", "KDB_LICENSE_B64", "KDB_K4LICENSE_B64", "PYKX_UNLICENSED", "PYKX_LICENSED",
               "QARGS")
SPANS = ("day", "week", "month", "multi")  # the prefixes of the *_start/*_end bindings
CHECK_MARK = "tickbench-pykx:"
# Run in a child Python, so that the CLI's and the runner's processes never load q, never take
# PyKX's environment changes, and never meet its interactive licence prompt (no terminal there).
CHECK = f"""
import json
try:
    import pykx as kx
except BaseException as exc:
    print({CHECK_MARK!r} + json.dumps({{"error": type(exc).__name__ + ": " + str(exc)}}))
    raise SystemExit(0)
out = {{"pykx": str(kx.__version__), "licensed": bool(getattr(kx, "licensed", False))}}
if out["licensed"]:
    try:
        out["q"] = bytes(kx.q('" " sv (string .z.K;string .z.k)').py()).decode()
    except Exception as exc:
        out["licensed"] = False
        out["reason"] = type(exc).__name__ + ": " + str(exc)
else:
    try:
        from pykx.config import _get_unlicensed_reason
        out["reason"] = _get_unlicensed_reason()
    except Exception:
        out["reason"] = None
print({CHECK_MARK!r} + json.dumps(out))
"""


def _unavailable(why: str) -> EngineUnavailable:
    return EngineUnavailable(f"not available: {LICENCE} ({why})")


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def pykx_installed() -> bool:
    """Whether ``pykx`` can be imported here, without importing it."""
    try:
        return importlib.util.find_spec("pykx") is not None
    except (ImportError, ValueError):  # a None or broken entry in sys.modules
        return False


@functools.cache
def _check(env: tuple[str | None, ...]) -> dict[str, Any]:
    """PyKX's own verdict on this machine, from a child Python (cached per licence setting)."""
    try:
        done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=180,
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"the PyKX start-up check did not finish: {exc}"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(CHECK_MARK):
            result: dict[str, Any] = json.loads(line[len(CHECK_MARK):])
            return result
    return {"error": f"the PyKX start-up check ended with status {done.returncode}: "
                     f"{_one_line(done.stderr[-2000:] or done.stdout[-2000:])}"}


def _no_licence(check: dict[str, Any]) -> EngineUnavailable:
    """The reason a probe gives when PyKX imports but runs unlicensed."""
    env = os.environ
    if str(env.get("PYKX_UNLICENSED", "")).lower() in ("1", "true"):
        return _unavailable(f"PyKX {check.get('pykx')} runs in unlicensed mode because PYKX_UNLICENSED is set")
    searched = [f"QLIC={env['QLIC']}" if env.get("QLIC") else "QLIC unset",
                f"QHOME={env['QHOME']}" if env.get("QHOME") else "QHOME unset",
                "KDB_LICENSE_B64 set" if env.get("KDB_LICENSE_B64") else "KDB_LICENSE_B64 unset"]
    why = f"PyKX {check.get('pykx')} found no licence ({', '.join(searched)})"
    if check.get("reason"):
        why += f": {_one_line(str(check['reason']))}"
    why += "; it runs in unlicensed mode, which evaluates no q code"
    if env.get("KDB_LICENSE_B64") or env.get("KDB_K4LICENSE_B64"):
        # PyKX 4.2 reads these only in an interactive session, where it offers to write the file.
        why += ("; KDB_LICENSE_B64 is read only by an interactive PyKX session: decode it into "
                "$QLIC/kc.lic (k4.lic for KDB_K4LICENSE_B64)")
    return _unavailable(why)


def _session() -> Any:
    """The embedded q of this process: ``pykx``, imported and licensed."""
    if not pykx_installed():
        raise _unavailable("pykx is not installed")
    try:
        import pykx as kx
    except Exception as exc:  # e.g. PYKX_LICENSED set and no licence: PyKX raises instead of falling back
        raise _unavailable(f"PyKX could not start q: {_one_line(str(exc))}") from exc
    if not getattr(kx, "licensed", False):
        raise _no_licence({"pykx": kx.__version__, "reason": None})
    return kx


# -- query text ---------------------------------------------------------------------------------

TRAILING_COMMENT = re.compile(r"\s/.*$")
PARAM = re.compile(r"\bp`([A-Za-z_][A-Za-z0-9_]*)")


def flatten(text: str) -> str:
    """q script text as one line of ``;``-separated statements, which PyKX evaluates in one call.

    The q script rules this follows: a line whose first non-blank character is ``/`` is a
    comment, and so is the rest of a line from a blank followed by ``/``; a line that starts
    with a blank continues the line before it; any other line starts a new statement. (The
    query files contain no ``/`` inside strings and no ``\\`` block comments or system commands;
    a test checks it.)
    """
    statements: list[str] = []
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith("/"):
            continue
        line = TRAILING_COMMENT.sub("", raw).rstrip()
        if raw[0].isspace() and statements:
            statements[-1] += " " + line.strip()
        else:
            statements.append(line.strip())
    return ";".join(s.rstrip(";").rstrip() for s in statements)


def q_params(bindings: dict[str, Any]) -> dict[str, Any]:
    """What ``p`` holds: :meth:`QueryParams.bindings` (half-open ``*_start``/``*_end`` bounds,
    ``sym``, the probe times) plus, per span, its first and last date, for ``date within``."""
    out = dict(bindings)
    for span in SPANS:
        start, end = bindings[f"{span}_start"], bindings[f"{span}_end"]
        out[span] = (start.date(), (end - dt.timedelta(days=1)).date())
    return out


def q_literal(value: Any) -> str:
    """``value`` as q source text."""
    if isinstance(value, str):
        return '`$"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, dt.datetime):
        return f"{value:%Y.%m.%d}D{value:%H:%M:%S}.{value.microsecond * 1000:09d}"
    if isinstance(value, dt.date):
        return f"{value:%Y.%m.%d}"
    if isinstance(value, list | tuple):
        if not value:
            return '"p"$()'  # only the probe lists can be empty, and they hold timestamps
        items = " ".join(q_literal(v) for v in value)
        return items if len(value) > 1 else f"enlist {items}"
    raise TypeError(f"no q literal for {type(value).__name__}")


def prelude(bindings: dict[str, Any]) -> str:
    """``p:`name1`name2…!(value1;value2;…)``, the statement run before every query."""
    params = q_params(bindings)
    return "p:" + "".join(f"`{k}" for k in params) + "!(" + ";".join(q_literal(v) for v in params.values()) + ")"


def query_params_used(text: str) -> set[str]:
    """The parameter names a query file reads as ``p`name``."""
    return set(PARAM.findall(text))


# -- data between Arrow and q -------------------------------------------------------------------


def to_arrow(kx: Any, table: Any) -> pa.Table:
    """A q table as Arrow, column by column (no pandas in between): timestamps as
    ``timestamp[ns, UTC]``, symbols as strings; q nulls become Arrow nulls."""
    if isinstance(table, kx.KeyedTable):
        table = kx.q("{0!x}", table)
    names = [str(n) for n in table.keys().py()]
    return pa.table({n: _column(kx, v) for n, v in zip(names, table.values(), strict=True)})


def _column(kx: Any, vec: Any) -> pa.Array:
    if isinstance(vec, kx.TimestampVector):
        raw = np.asarray(vec.np(raw=True), dtype=np.int64)
        null = raw == np.iinfo(np.int64).min
        return pa.array(np.where(null, 0, raw + Q_EPOCH_NS), pa.timestamp("ns", "UTC"), mask=null)
    if isinstance(vec, kx.DateVector):
        raw = np.asarray(vec.np(raw=True), dtype=np.int64)
        null = raw == np.iinfo(np.int32).min
        return pa.array(np.where(null, 0, raw + Q_EPOCH_DAYS).astype(np.int32), pa.date32(), mask=null)
    if isinstance(vec, kx.SymbolVector):
        return pa.array([str(s) for s in vec.py()], pa.string())
    if isinstance(vec, kx.EnumVector):  # a query that left a symbol column enumerated
        return _column(kx, kx.q("{`$string x}", vec))
    if isinstance(vec, kx.FloatVector):  # 0n, q's float null, is a NaN: a null (M-SNAP, sd)
        values = vec.np()
        return pa.array(values, pa.float64(), mask=np.isnan(values))
    return pa.array(vec.np())


class Remote:
    """A q process the user runs, over IPC through PyKX's unlicensed mode (PyKX's
    documentation: without a licence, ``pykx.SyncQConnection`` and the conversions work; no
    q is evaluated locally). The HDB is written by that process into ``<namespace>_hdb`` of its
    own working directory and mapped with ``.Q.lo`` (no change of its directory); tickbench's
    names there (``trades``, ``book``, ``sym``, the ``.tb`` functions) are recorded in
    ``.tickbench.owned``, the marker: names that exist without it are the user's, and refused."""

    OWNED = ".tickbench.owned"

    def __init__(self, endpoint: Endpoint) -> None:
        os.environ.setdefault("PYKX_UNLICENSED", "true")  # IPC and conversions need no licence
        import pykx as kx

        self.kx = kx
        self.endpoint = endpoint
        self.conn = kx.SyncQConnection(host=endpoint.host, port=endpoint.port, username=endpoint.user or "",
                                       password=endpoint.password() or "")
        self.hdb = f"{endpoint.namespace or 'tickbench'}_hdb"

    def __call__(self, text: str, *args: Any) -> Any:
        return self.conn(text, *args)

    def foreign(self) -> list[str]:
        present = [str(n) for n in self.conn("{x where x in key `.} `trades`book`sym`tb").py()]
        owned = set(map(str, self.conn(f"@[get;`{self.OWNED};`symbol$()]").py()))
        return [n for n in present if n not in owned]

    def define(self) -> None:
        self.conn(f"{self.OWNED}:distinct {self.OWNED},`tb`trades`book`sym" if self._has_owned()
                  else f"{self.OWNED}:`tb`trades`book`sym")
        self.conn(flatten(LIB.read_text()))

    def _has_owned(self) -> bool:
        return bool(self.conn(f"@[{{not ()~get x}};`{self.OWNED};0b]").py())

    def write(self, day: str, table: str, data: pa.Table) -> int:
        kx = self.kx
        return int(self.conn(".tb.part", kx.CharVector(self.hdb), kx.CharVector(day), kx.SymbolAtom(table),
                             kx.toq(data.to_pandas()), kx.SymbolVector(SORT_KEYS[table])).py())

    def drop(self) -> None:
        """Unmap tickbench's tables, delete its HDB directory (q's hdel, deepest first) and names."""
        if not self._has_owned():
            return
        self.conn(".tb.close[]")
        # A directory's entries first (key of a directory is its names: type 11h), then itself.
        self.conn("{rm:{[d] if[11h=type k:key d; .z.s each ` sv/: d,/:k]; hdel d}; "
                  "d:hsym `$x; if[not ()~key d; rm d]}", self.kx.CharVector(self.hdb))
        self.conn("delete tb from `.; delete owned from `.tickbench")

    def version(self) -> str:
        return "kdb+ " + bytes(self.conn('" " sv (string .z.K;string .z.k)').py()).decode()

    def close(self) -> None:
        self.conn.close()


class Adapter(StoreByKind, KdbMarket, Engine, BulkLoad, Storage):
    external_endpoint = True  # a q process over IPC (Remote), through PyKX unlicensed

    def __init__(self, info: EngineInfo, workdir: Path, dataset: Dataset, params: QueryParams) -> None:
        # \l (the fallback where q has no .Q.lo) moves the process into the HDB, so every path
        # is made absolute against the working directory the adapter was created in.
        self.cwd = Path.cwd()
        super().__init__(info, self._abs(workdir), dataset, params)
        self.kx: Any = None
        self.queries: dict[str, str] = {}
        self.remote: Remote | None = None

    def _abs(self, path: Path) -> Path:
        return path if path.is_absolute() else self.cwd / path

    def _files(self, table: str, day: str) -> list[Path]:
        return [self._abs(f) for f in self.dataset.files(table, [day])]

    def version(self) -> str:
        return self.remote.version() if self.remote is not None else self.probe()

    def endpoint_info(self) -> dict[str, Any] | None:
        if self.endpoint is None or self.remote is None:
            return None
        return {"external": True, "address": self.endpoint.address, "server_version": self.remote.version(),
                "hdb": self.remote.hdb, "kept": self.endpoint.keep}

    def _connect_remote(self, endpoint: Endpoint) -> Remote:
        if not pykx_installed():
            raise EngineUnavailable(f"{endpoint.describe()}: pykx is not installed (pip install pykx: its "
                                    "unlicensed mode is enough for IPC)")
        try:
            remote = Remote(endpoint)
        except Exception as exc:
            raise EngineUnavailable(f"{endpoint.describe()} cannot be used: {type(exc).__name__}: {exc}") from exc
        foreign = remote.foreign()
        if foreign:
            remote.close()
            raise EngineUnavailable(
                f"{endpoint.describe()} already holds {', '.join(foreign)} in its root namespace, which tickbench "
                "did not create (not listed in .tickbench.owned), so tickbench will not overwrite it: give "
                "tickbench a q process of its own (q -p PORT)")
        return remote

    def check_endpoint_only(self) -> None:
        if self.endpoint is not None:
            self._connect_remote(self.endpoint).close()

    @classmethod
    def probe(cls) -> str:
        if not pykx_installed():
            raise _unavailable("pykx is not installed")
        kx = sys.modules.get("pykx")
        if kx is not None and getattr(kx, "licensed", False):  # in the worker, after start()
            return f"kdb+ {_q_version(kx)} (PyKX {kx.__version__})"
        check = _check((os.getcwd(), *(os.environ.get(k) for k in LICENCE_ENV)))
        if "error" in check:
            raise _unavailable(f"PyKX could not start q: {_one_line(str(check['error']))}")
        if not check.get("licensed"):
            raise _no_licence(check)
        return f"kdb+ {check['q']} (PyKX {check['pykx']})"

    @property
    def hdb(self) -> Path:
        return self.workdir / "hdb"

    def _q(self) -> Any:
        if self.kx is None:
            raise RuntimeError("kdb+ is not started")
        return self.kx

    def start(self) -> None:
        if self.endpoint is not None:
            self.remote = self._connect_remote(self.endpoint)
            self.remote.define()
            self.kx = self.remote.kx
            self.queries = {}
            if bool(self.remote(f"@[{{not ()~key hsym `$x,\"/sym\"}};\"{self.remote.hdb}\";0b]").py()):
                self.remote(".tb.open", self.kx.CharVector(self.remote.hdb))
            return
        kx = _session()
        self.workdir.mkdir(parents=True, exist_ok=True)
        kx.q(flatten(LIB.read_text()))
        self.kx = kx
        self.queries = {}
        if (self.hdb / "sym").is_file():  # a loaded store: map it again (the cold protocol)
            kx.q(".tb.open", kx.CharVector(str(self.hdb)))

    def stop(self) -> None:
        if self.remote is not None:  # the user's q process keeps running; tickbench's HDB goes
            if self.endpoint is not None and not self.endpoint.keep:
                self.remote.drop()
            self.remote.close()
            self.remote = self.kx = None
            return
        # Embedded q lives as long as the process: stopping unmaps the HDB and frees the memory.
        if self.kx is not None:
            self.kx.q(".tb.close[]")
            self.kx = None

    def _day(self, table: str, day: str) -> pa.Table:
        """The dataset's rows of ``table`` on ``day``, checked to lie in that UTC day (the HDB's
        date partitions are its day buckets)."""
        files = self._files(table, day)
        schema = SCHEMAS[table]
        data = (pa.concat_tables([pq.read_table(f, schema=schema) for f in files]) if files
                else schema.empty_table())
        if data.num_rows:
            lo, hi = (int(x) for x in (data["ts"].cast(pa.int64()).to_numpy().min(),
                                       data["ts"].cast(pa.int64()).to_numpy().max()))
            start = (dt.date.fromisoformat(day) - dt.date(1970, 1, 1)).days * 86_400 * 10**9
            if lo < start or hi >= start + 86_400 * 10**9:
                raise ValueError(f"{table} rows filed under {day} lie outside that UTC day")
        return data

    def _write(self, kx: Any, hdb: Path, table: str, day: str, data: pa.Table) -> int:
        return int(kx.q(".tb.part", kx.CharVector(str(hdb)), kx.CharVector(day), table,
                        to_q(kx, data), kx.SymbolVector(SORT_KEYS[table])).py())

    def _load_paper(self) -> int:
        if self.remote is not None:
            return self._load_remote(self.remote)
        kx = self._q()
        kx.q(".tb.close[]")
        shutil.rmtree(self.hdb, ignore_errors=True)
        self.hdb.mkdir(parents=True)
        rows = 0
        for day in self.params.load_days():
            for table in TABLES:
                rows += self._write(kx, self.hdb, table, day, self._day(table, day))
        kx.q(".tb.open", kx.CharVector(str(self.hdb)))
        return rows

    def _load_remote(self, remote: Remote) -> int:
        """The same HDB, written by the user's q process into its own directory."""
        remote.drop()
        remote.define()
        rows = sum(remote.write(day, table, self._day(table, day))
                   for day in self.params.load_days() for table in TABLES)
        remote(".tb.open", self.kx.CharVector(remote.hdb))
        return rows

    def run_query(self, qid: str) -> pa.Table:
        kx = self._q()
        text = self.queries.get(qid)
        if text is None:
            head = by_kind(self.dataset, paper=lambda: prelude(self.params.bindings()),
                           market=lambda: market_prelude(self.params))()
            text = self.queries[qid] = head + ";" + flatten(self.query_text(qid))
        if self.remote is not None:  # evaluated by the q process; PyKX converts the answer
            return pa.Table.from_pandas(self.remote(text).pd(), preserve_index=False)
        return to_arrow(kx, kx.q(text))

    # -- W and SE -------------------------------------------------------------------------------

    def _fresh(self, scratch: Path, name: str) -> Path:
        store = self._abs(scratch) / name
        shutil.rmtree(store, ignore_errors=True)
        store.mkdir(parents=True)
        return store

    def _csv(self, table: str) -> tuple[Path, str]:
        """The bulk day's CSV of ``table`` and its q column types, from the dataset's schema."""
        path = self._abs(self.dataset.csv_file(table))
        types = "".join("P" if pa.types.is_timestamp(f.type) else "S" if pa.types.is_string(f.type)
                        else "J" if pa.types.is_integer(f.type) else "F" for f in SCHEMAS[table])
        return path, types

    def _parquet(self, table: str) -> tuple[pa.Table, int]:
        files = self._files(table, self.dataset.bulk_day)
        data = pa.concat_tables([pq.read_table(f, schema=SCHEMAS[table]) for f in files])
        return data, sum(f.stat().st_size for f in files)

    @contextlib.contextmanager
    def _unmapped(self) -> Iterator[Any]:
        """The W stores are written through the same globals as the query HDB (the tables
        ``trades`` and ``book``, whose names name their directories, and the ``sym`` domain), so the
        query HDB is unmapped while they are written and mapped again after."""
        kx = self._q()
        kx.q(".tb.close[]")
        try:
            yield kx
        finally:
            kx.q(".tb.close[]")
            if (self.hdb / "sym").is_file():
                kx.q(".tb.open", kx.CharVector(str(self.hdb)))

    def _bulk_load_paper(self, fmt: str, scratch: Path) -> LoadFigures:
        with self._unmapped() as kx:
            return self._bulk_load(kx, fmt, scratch)

    def _bulk_load(self, kx: Any, fmt: str, scratch: Path) -> LoadFigures:
        store = self._fresh(scratch, f"w_{fmt}")
        day = self.dataset.bulk_day
        nbytes = 0
        kx.q("`.tb.tstext set 0b")
        for table in TABLES:
            if fmt == "csv":
                path, types = self._csv(table)
                nbytes += path.stat().st_size
                data = kx.q(".tb.csv", kx.CharVector(str(path)), kx.CharVector(types),
                            kx.SymbolVector(SCHEMAS[table].names))
                kx.q(".tb.part", kx.CharVector(str(store)), kx.CharVector(day), table, data,
                     kx.SymbolVector(SORT_KEYS[table]))
            else:
                arrow, size = self._parquet(table)
                nbytes += size
                self._write(kx, store, table, day, arrow)
        # Committed and readable: the rows are counted back from the written column files.
        rows = sum(int(kx.q(".tb.rows", kx.CharVector(str(store)), kx.CharVector(day), t).py()) for t in TABLES)
        detail: dict[str, Any] = {"bytes_on_disk": _du(store)}
        if fmt == "csv":
            detail["ts_parsed_as_text"] = bool(kx.q(".tb.tstext").py())
        return LoadFigures(rows=rows, input_bytes=nbytes, detail=detail)

    def _baseline_load_paper(self, fmt: str, scratch: Path) -> LoadFigures:
        with self._unmapped() as kx:
            return self._baseline_load(kx, fmt, scratch)

    def _baseline_load(self, kx: Any, fmt: str, scratch: Path) -> LoadFigures:
        store = self._fresh(scratch, f"baseline_{fmt}")
        nbytes = rows = 0
        for table in TABLES:
            if fmt == "csv":
                path, types = self._csv(table)
                nbytes += path.stat().st_size
                data = kx.q("{[f;ty;nm] nm xcol (ty;enlist \",\") 0: hsym `$f}", kx.CharVector(str(path)),
                            kx.CharVector(types), kx.SymbolVector(SCHEMAS[table].names))
            else:
                arrow, size = self._parquet(table)
                nbytes += size
                data = to_q(kx, arrow)
            rows += int(kx.q(".tb.splay", kx.CharVector(str(store)), table, data).py())
        return LoadFigures(rows=rows, input_bytes=nbytes)

    def _storage_bytes_paper(self) -> dict[str, int]:
        month = {dt.date.fromisoformat(d).strftime("%Y.%m.%d") for d in self.params.days("month")}
        parts = sum(_du(self.hdb / d) for d in month if (self.hdb / d).is_dir())
        sym = (self.hdb / "sym").stat().st_size if (self.hdb / "sym").is_file() else 0
        # An HDB is its column files: p# lives in the column's own file, and nothing is logged.
        return storage_figures("hdb_month_partitions_and_sym", parts + sym, 0, 0, hdb_total=_du(self.hdb))

    def settings(self) -> dict[str, Any]:
        kx = self._q()
        return {"pykx": str(kx.__version__), "q": _q_version(kx),
                "secondary_threads": int(kx.q('system "s"').py()),
                "compression": "gzip level 6, 128 KB blocks (.z.zd 17 2 6, HDB partitions)"}


def _q_version(kx: Any) -> str:
    return bytes(kx.q('" " sv (string .z.K;string .z.k)').py()).decode()


def _du(path: Path) -> int:
    """Bytes of the files under ``path``."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
