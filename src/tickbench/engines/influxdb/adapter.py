"""InfluxDB 1.8 (influxd built from its Go module), one server per run on 127.0.0.1.

Writes go over HTTP ``/write`` as line protocol built column-wise with Polars; queries are
InfluxQL files sent to ``/query`` with bound parameters. A query file may start with header
comments that tell the adapter how to turn InfluxDB's series into the SPEC's columns:

* ``-- columns: time=bucket`` renames result columns (InfluxQL always names the time ``time``);
* ``-- probe: t=ot_times`` says the file holds one statement per element of the list binding
  ``ot_times`` (bound as ``$ot_times_0``, ``$ot_times_1``, …) and that statement ``i``'s rows get
  a column ``t`` holding element ``i``: InfluxQL cannot select a parameter as a column;
* ``-- sort: sym, side, bucket`` makes the adapter sort the rows by these (renamed) columns:
  InfluxQL orders only by time, and returns series ordered by their tag set, whose keys are
  sorted by name (``side=…,sym=…``), so GROUP BY sym, side comes back side first.

The ingest capability (tick-latency, stream and durability suites) writes line protocol built
row by row to a database of its own per ingest store, over one keep-alive HTTP connection per
writer; a write returns on InfluxDB's 204, which comes only after the WAL entry holding the
points has been fsynced (see :data:`WAL_FSYNC_DELAYS`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import http.client
import json
import os
import pwd
import re
import secrets
import shutil
import stat
import string
import subprocess
import threading
import urllib.parse
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import polars as pl
import pyarrow as pa
import pyarrow.csv as pacsv

from tickbench.data.schema import SCHEMAS, book_level_columns
from tickbench.engines.base import Engine, EngineUnavailable, IngestClient, LoadFigures
from tickbench.engines.server import (
    LOOPBACK,
    ServerProcess,
    chown_tree,
    ensure_service_user,
    free_port,
    tools_dir,
)
from tickbench.suites.published import BY_ID

VERSION = "1.8.10"
MODULE = "github.com/influxdata/influxdb"
HERE = Path(__file__).parent
CONFIG = string.Template((HERE / "influxd.toml").read_text())
SCHEMA = string.Template((HERE / "schema.influxql").read_text())
DB = "tickbench"
TABLES = ("trades", "book")
# Rows written per measurement; point counts equal row counts only if no point overwrote another.
COUNT = "SELECT count(price) FROM trades; SELECT count(b1price) FROM book"
PARAM = re.compile(r"\$([a-z_0-9]+)")
HEADER = re.compile(r"^--\s*(columns|probe|sort):\s*(.*)$")
BATCH_BYTES = 4 << 20  # line protocol per /write request
WRITERS = 3  # concurrent /write requests: the server parses each request on one core
SETTLE_TIMEOUT_S = 3600.0
INGEST_MARKER = "influxdb-ingest"  # in an ingest store's directory: JSON naming its database
INGEST_PREFIX = "ingest_"  # ingest databases are ingest_<random hex>, one per store
# The durability settings: the server's [data] wal-fsync-delay, read only at startup.
#
# Why both are durable, from InfluxDB 1.8.10's source (tsdb/engine/tsm1/engine.go and wal.go):
# Engine.WritePoints puts the points in the cache, then calls WAL.WriteMulti -> writeToLog,
# which encodes the entry, appends it to the segment writer's 16 KB bufio buffer under the
# WAL lock, queues a waiter channel, calls scheduleSync and then blocks on that channel.
# The sync goroutine runs at once (delay 0) or on each tick of a ticker of the delay's period,
# and WAL.sync() flushes the bufio buffer into the segment file and fsyncs it, then answers
# every queued waiter. Only then does WritePoints return, and the HTTP handler answers 204
# after it (services/httpd/handler.go). So an acknowledged point is in the WAL file on disk
# under either setting; the delay only lets one fsync cover the writes of several clients,
# each waiting up to the delay for it (a lone writer waits the whole delay every write).
WAL_FSYNC_DELAYS = {"wal-fsync-delay=0s": "0s", "wal-fsync-delay=100ms": "100ms"}
INGEST_COUNT = {"trades": "SELECT count(price) FROM trades", "book": "SELECT count(b1price) FROM book"}
INGEST_READ = {
    "trades": 'SELECT "exchange", "sym", "side", price, amount, trade_id FROM trades WHERE "sym" = $sym',
    "book": 'SELECT "exchange", "sym", ' + ", ".join(book_level_columns()) + ' FROM book WHERE "sym" = $sym',
}
# A selector alone returns the time of the point it picked, and the other fields named beside
# it come from that same point (two selectors would both get time 0 instead).
INGEST_LATEST = 'SELECT last(b1price) AS b1price, a1price FROM book GROUP BY "sym"'


def bin_dir() -> Path:
    return tools_dir() / "influxdb"


class Adapter(Engine):
    has_server = True
    server: ServerProcess | None = None
    http_port: int = 0
    #: [data] wal-fsync-delay of the server start() runs (an ingest durability setting's).
    wal_fsync_delay: str = "0s"
    ingest_durability: ClassVar[dict[str, str]] = {
        "wal-fsync-delay=0s": (
            "InfluxDB's default: each write's WAL entry is flushed and fsynced at once, and the "
            "write is acknowledged (HTTP 204) after the fsync; no acknowledged row is lost when "
            "the server is killed"),
        "wal-fsync-delay=100ms": (
            "the WAL fsyncs at most every 100 ms (the upper end of InfluxData's advice for "
            "slow disks), one fsync for every write waiting; each write is still acknowledged "
            "only after the fsync covering it, so none acknowledged is lost, and a write waits "
            "up to 100 ms longer"),
    }
    #: Both: a write is acknowledged only once its WAL entry is fsynced (see WAL_FSYNC_DELAYS).
    ingest_durable: ClassVar[frozenset[str]] = frozenset(ingest_durability)
    ingest_db: str | None = None  # the open ingest store's database
    _ties: _Ties
    _readers: threading.local  # per thread: its keep-alive connection for ingest queries
    _reader_conns: list[_Session]  # every reader connection, to close them

    # -- installation -------------------------------------------------------------------

    @classmethod
    def probe(cls) -> str:
        influxd = bin_dir() / "influxd"
        if not os.access(influxd, os.X_OK):
            raise EngineUnavailable("not installed; run `tickbench install influxdb`")
        out = subprocess.run([str(influxd), "version"], capture_output=True, text=True, check=True)
        # "InfluxDB v1.8.10 (git: unknown unknown)"
        return out.stdout.split()[1].lstrip("v")

    @classmethod
    def install(cls, progress: Callable[[str], None] | None = None) -> str:
        """Build ``influxd`` (the server) and ``influx`` (its CLI, for the baseline importer)
        from the Go module into ``tools/influxdb``; a no-op when both are there."""
        if all(os.access(bin_dir() / b, os.X_OK) for b in ("influxd", "influx")):
            return cls.probe()
        go = shutil.which("go")
        if go is None:
            raise EngineUnavailable(
                "the Go toolchain (`go` 1.16 or newer, for `go install pkg@version`) builds influxd")
        if progress:
            progress(f"building influxd and influx {VERSION} with go install (a few minutes)")
        bin_dir().mkdir(parents=True, exist_ok=True)
        # The version is stamped in with -ldflags, as InfluxData's release build does.
        cmd = [go, "install", "-ldflags", f"-X main.version={VERSION}",
               f"{MODULE}/cmd/influxd@v{VERSION}", f"{MODULE}/cmd/influx@v{VERSION}"]
        done = subprocess.run(cmd, env={**os.environ, "GOBIN": str(bin_dir())},
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise EngineUnavailable(f"`{' '.join(cmd)}` failed:\n{done.stderr[-2000:]}")
        return cls.probe()

    # -- server lifecycle ---------------------------------------------------------------

    @property
    def root(self) -> Path:
        return self.workdir / "influxdb"

    def start(self) -> None:
        self.probe()
        for sub in ("meta", "data", "wal"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.http_port = free_port()
        rpc_port = free_port()
        while rpc_port == self.http_port:
            rpc_port = free_port()
        conf = self.root / "influxd.toml"
        conf.write_text(CONFIG.substitute(root=self.root, http_port=self.http_port, rpc_port=rpc_port,
                                          wal_fsync_delay=self.wal_fsync_delay))
        user = ensure_service_user()
        if user is not None:  # influxd runs as the service user: it enters the workdir
            self.workdir.chmod(self.workdir.stat().st_mode | stat.S_IXOTH)
            check_reachable(self.workdir, user)
        chown_tree(self.root, user)
        self.server = ServerProcess(
            "influxd", [str(bin_dir() / "influxd"), "-config", str(conf)],
            log=self.root / "influxd.log", user=user,
        )
        self.server.start()
        self.server.wait_ready(self._ping, timeout=120)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def memory_pids(self) -> list[int]:
        pid = self.server.pid if self.server else None
        return [pid] if pid is not None else []

    # -- HTTP ---------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: bytes | memoryview | None = None,
                 headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection(LOOPBACK, self.http_port, timeout=None)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def _ping(self) -> bool:
        return self._request("GET", "/ping")[0] == 204

    def _query(self, q: str, db: str = DB, params: dict[str, Any] | None = None,
               session: _Session | None = None) -> list[dict[str, Any]]:
        """POST ``q`` (one or more statements) and return the per-statement results;
        raise on any error. Times come back as integer nanoseconds (``epoch=ns``). Sent over
        ``session`` when given, else over a connection of its own."""
        form = {"q": q, "db": db, "epoch": "ns"}
        if params:
            form["params"] = json.dumps(params)
        request = session.request if session is not None else self._request
        status, raw = request(
            "POST", "/query", urllib.parse.urlencode(form).encode(),
            {"Content-Type": "application/x-www-form-urlencoded"})
        doc = json.loads(raw)
        if status != 200 or "error" in doc:
            raise RuntimeError(f"InfluxDB query failed ({status}): {doc.get('error', raw[:500])}")
        results: list[dict[str, Any]] = doc["results"]
        for r in results:
            if "error" in r:
                raise RuntimeError(f"InfluxDB statement {r.get('statement_id')} failed: {r['error']}")
        return results

    def _write(self, db: str, body: bytes) -> None:
        status, raw = self._request("POST", f"/write?db={db}&precision=ns", body)
        if status != 204:
            raise RuntimeError(f"InfluxDB write failed ({status}): {raw[:500]!r}")

    def _write_all(self, db: str, batches: Iterable[bytes]) -> None:
        """Send the batches with up to ``WRITERS`` requests in flight, so the next batch is
        formatted while the server ingests the previous ones."""
        with ThreadPoolExecutor(WRITERS) as pool:
            inflight: deque[Future[None]] = deque()
            for body in batches:
                if len(inflight) >= WRITERS:
                    inflight.popleft().result()
                inflight.append(pool.submit(self._write, db, body))
            for f in inflight:
                f.result()

    def _create(self, db: str) -> None:
        self._query(SCHEMA.substitute(db=db), db="")

    def _count(self, db: str) -> int:
        total = 0
        for r in self._query(COUNT, db=db):
            for s in r.get("series", []):
                total += int(s["values"][0][1])
        return total

    # -- loading ------------------------------------------------------------------------

    def _load_frames(self, db: str, frames: Iterable[tuple[str, pl.DataFrame]], expected: int) -> int:
        """Write ``(table, frame)`` pairs into a fresh database ``db``; check that every row
        came back as a point (a point with the same series and time would replace another)."""
        self._create(db)
        self._write_all(db, line_batches(frames))
        rows = self._count(db)
        if rows != expected:
            raise RuntimeError(f"{db}: {expected} rows written but {rows} points read back")
        return rows

    def _parquet_frames(self, table: str, days: list[str]) -> Iterator[tuple[str, pl.DataFrame]]:
        # One file is one (day, exchange, sym) partition: trades tied on ts are all in it.
        for f in self.dataset.files(table, days):
            yield table, pl.read_parquet(f)

    def load(self) -> int:
        days = self.params.load_days()
        expected = self.dataset.sizes(days)["rows"]
        frames = (fr for t in TABLES for fr in self._parquet_frames(t, days))
        rows = self._load_frames(DB, frames, expected)
        self._settle(DB)
        return rows

    def _settle(self, db: str) -> None:
        """Wait until InfluxDB has snapshotted the cache of ``db`` to TSM files and fully
        compacted every shard (one generation of TSM files, empty WAL segments), which the
        configuration makes it do one second after a shard's last write."""
        if self.server is None:
            raise RuntimeError("InfluxDB is not started")
        self.server.wait_ready(lambda: settled(self.root, db), timeout=SETTLE_TIMEOUT_S)

    def _input_frames(self, fmt: str) -> tuple[list[tuple[str, pl.DataFrame]], int]:
        """The bulk-load day as frames, parsed from ``fmt``, and the input's bytes."""
        frames: list[tuple[str, pl.DataFrame]] = []
        nbytes = 0
        for table in TABLES:
            if fmt == "csv":
                path = self.dataset.csv_file(table)
                nbytes += path.stat().st_size
                opts = pacsv.ConvertOptions(column_types=SCHEMAS[table])
                frames.append((table, pl.from_arrow(pacsv.read_csv(path, convert_options=opts))))  # type: ignore[arg-type]
            elif fmt == "parquet":
                files = self.dataset.files(table, [self.dataset.bulk_day])
                nbytes += sum(f.stat().st_size for f in files)
                frames.extend((table, pl.read_parquet(f)) for f in files)
            else:
                raise ValueError(f"unknown format {fmt!r}")
        return frames, nbytes

    def bulk_load(self, fmt: str, scratch: Path) -> LoadFigures:
        frames, nbytes = self._input_frames(fmt)
        expected = sum(f.height for _, f in frames)
        rows = self._load_frames(f"w_{fmt}", frames, expected)
        return LoadFigures(rows=rows, input_bytes=nbytes, detail={"database": f"w_{fmt}"})

    def baseline_load(self, fmt: str, scratch: Path) -> LoadFigures:
        """InfluxDB's own importer, ``influx -import``, with its defaults (5000 points per
        request, one request at a time) on a line-protocol file made from the same input:
        InfluxDB 1.8 has no CSV or Parquet reader of its own."""
        frames, nbytes = self._input_frames(fmt)
        expected = sum(f.height for _, f in frames)
        db = f"baseline_{fmt}"
        self._create(db)
        scratch.mkdir(parents=True, exist_ok=True)
        path = scratch / f"{db}.lp"
        with open(path, "wb") as out:
            out.write(f"# DML\n# CONTEXT-DATABASE: {db}\n".encode())
            for body in line_batches(frames):
                out.write(body)
        done = subprocess.run(
            [str(bin_dir() / "influx"), "-host", LOOPBACK, "-port", str(self.http_port),
             "-import", "-path", str(path), "-precision", "ns"],
            capture_output=True, text=True)
        lp_bytes = path.stat().st_size
        path.unlink()  # the importer's input, not part of the store
        if done.returncode != 0:
            raise RuntimeError(f"influx -import failed: {done.stderr[-2000:]}")
        rows = self._count(db)
        if rows != expected:
            raise RuntimeError(f"{db}: {expected} rows written but {rows} points read back")
        return LoadFigures(rows=rows, input_bytes=nbytes, detail={
            "database": db, "tool": "influx -import", "line_protocol_bytes": lp_bytes})

    def storage_bytes(self) -> dict[str, int]:
        """The 30-day period alone in a fresh database ``se``, once compactions settled:
        bytes allocated on disk by its data directory (TSM files, series file) and WAL."""
        days = self.params.days("month")
        frames = (fr for t in TABLES for fr in self._parquet_frames(t, days))
        self._load_frames("se", frames, self.dataset.sizes(days)["rows"])
        self._settle("se")
        dirs = [self.root / "data" / "se", self.root / "wal" / "se"]
        return {"data_and_wal_allocated": sum(du(d) for d in dirs),
                "data_and_wal_apparent": sum(du(d, apparent=True) for d in dirs)}

    # -- queries ------------------------------------------------------------------------

    def run_query(self, qid: str) -> pa.Table:
        text = self.query_text(qid)
        header = parse_header(text)
        binds = influx_bindings(self.params.bindings())
        used = {name: binds[name] for name in PARAM.findall(text)}
        results = self._query(text, params=used)
        probes = self.params.bindings()[header.probe[1]] if header.probe else None
        table = to_table(results, header.renames, BY_ID[qid].columns,
                         header.probe[0] if header.probe else None, probes)
        return table.sort_by([(c, "ascending") for c in header.sort]) if header.sort else table

    # -- ingest (tick-latency, stream and durability suites) ------------------------------

    def ingest_open(self, store: Path, durability: str | None = None) -> None:
        """The ingest store is a database ``ingest_<random hex>`` of this server, named by a
        marker file in ``store``: a store whose marker names a database of this server (same
        root) reopens it as it is; any other store gets a new, empty database, and the ingest
        databases of earlier stores are dropped (they would hold the server's memory and disk).

        ``durability`` is a setting of :attr:`ingest_durability`; wal-fsync-delay is
        server-wide and read only at startup, so the server is restarted over the same
        directories (the loaded query data stay; the pid and port change) when the setting
        asked for is not the one it runs with."""
        setting = self.durability_setting(durability)
        self.ingest_close()
        if self.server is None:
            raise RuntimeError("InfluxDB is not started")
        if WAL_FSYNC_DELAYS[setting] != self.wal_fsync_delay:
            self.stop()
            self.wal_fsync_delay = WAL_FSYNC_DELAYS[setting]
            self.start()
        marker = store / INGEST_MARKER
        root = str(self.root.resolve())
        try:
            recorded = json.loads(marker.read_text())
        except (OSError, ValueError):
            recorded = None
        databases = self._databases()
        if isinstance(recorded, dict) and recorded.get("root") == root and recorded.get("database") in databases:
            db = str(recorded["database"])
            # Trades written from now on take seq tags above every one the store holds, so
            # none replaces a trade written before the reopening (the tie registry is new).
            first_seq = self._max_seq(db) + 1
        else:
            for old in databases:
                if old.startswith(INGEST_PREFIX):
                    self._query(f'DROP DATABASE "{old}"', db="")
            db = INGEST_PREFIX + secrets.token_hex(6)
            self._create(db)
            first_seq = 0
        store.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({"root": root, "database": db}))
        self.ingest_db = db
        self._ties = _Ties(first_seq)
        self._readers = threading.local()
        self._reader_conns = []

    def _databases(self) -> list[str]:
        series = self._query("SHOW DATABASES", db="")[0].get("series", [])
        return [str(row[0]) for s in series for row in s.get("values") or []]

    def _max_seq(self, db: str) -> int:
        """The largest ``seq`` tag of ``db``'s trades (-1 when it has none)."""
        series = self._query('SHOW TAG VALUES FROM trades WITH KEY = "seq"', db=db)[0].get("series", [])
        return max((int(row[1]) for s in series for row in s.get("values") or []), default=-1)

    def _ingest_query(self, q: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """``q`` on the ingest store over this thread's keep-alive connection (the stream suite
        polls counts and snapshots from two threads while writers write)."""
        if self.ingest_db is None:
            raise RuntimeError("the ingest store is not open")
        session: _Session | None = getattr(self._readers, "session", None)
        if session is None:
            session = _Session(self.http_port)
            self._readers.session = session
            self._reader_conns.append(session)
        return self._query(q, db=self.ingest_db, params=params, session=session)

    def ingest_client(self) -> IngestClient:
        if self.ingest_db is None:
            raise RuntimeError("the ingest store is not open")
        return _Writer(_Session(self.http_port), self.ingest_db, self._ties)

    def ingest_read(self, table: str, sym: str) -> pa.Table:
        """``sym``'s rows, ordered by (ts, trade_id) for trades: InfluxDB returns the merged
        series (venues, sides, seq tags) in time order, but ties on a time in series order."""
        series = self._ingest_query(INGEST_READ[table], {"sym": sym})[0].get("series", [])
        out = _ingest_table(table, series)
        order = [("ts", "ascending")] + ([("trade_id", "ascending")] if table == "trades" else [])
        return out.sort_by(order)

    def ingest_count(self, table: str) -> int:
        """Points of ``table``'s measurement now, which are its rows: a point is in the cache,
        and visible, before its write is acknowledged, and no trade replaced another."""
        series = self._ingest_query(INGEST_COUNT[table])[0].get("series", [])
        return sum(int(s["values"][0][1]) for s in series)

    def ingest_latest(self) -> pa.Table:
        series = self._ingest_query(INGEST_LATEST)[0].get("series", [])
        rows = sorted((s["tags"]["sym"], *s["values"][0]) for s in series)
        cols = list(zip(*rows, strict=True)) if rows else [(), (), (), ()]
        ts_type = SCHEMAS["book"].field("ts").type
        return pa.table([pa.array(cols[0], pa.string()), pa.array(cols[1], pa.int64()).cast(ts_type),
                         pa.array(cols[2], pa.float64()), pa.array(cols[3], pa.float64())],
                        names=["sym", "ts", "b1price", "a1price"])

    def ingest_close(self) -> None:
        """Close the read connections (writers close their own); the database stays."""
        for session in getattr(self, "_reader_conns", []):
            session.close()
        self._reader_conns = []
        self._readers = threading.local()
        self.ingest_db = None

    def settings(self) -> dict[str, Any]:
        keys = ("index-version", "wal-fsync-delay", "cache-snapshot-write-cold-duration",
                "compact-full-write-cold-duration", "max-concurrent-compactions")
        conf = (self.root / "influxd.toml").read_text() if (self.root / "influxd.toml").exists() else ""
        found = {k: v.strip().strip('"') for k, v in re.findall(r"^\s*([a-z-]+)\s*=\s*(.+)$", conf, re.M)}
        out: dict[str, Any] = {k: found.get(k, "default") for k in keys}
        out.update({"shard_duration": "1d", "batch_bytes": BATCH_BYTES, "writers": WRITERS,
                    "trade_ties": "tag seq = rank of the trade among those with the same "
                                  "(exchange, sym, side, ts)",
                    "ingest": "line protocol over HTTP /write, one keep-alive connection per writer; "
                              "a database per ingest store; trade ties: seq tag from a registry of "
                              "(exchange, sym, side, ts)"})
        return out


# -- ingest -----------------------------------------------------------------------------------

class _Session:
    """One keep-alive HTTP connection to influxd, used by one thread at a time. A request that
    fails raises; it is never sent again (http.client reconnects only for the next request)."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection(LOOPBACK, port, timeout=None)

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        try:
            self.conn.request(method, path, body=body, headers=headers or {})
            resp = self.conn.getresponse()
            return resp.status, resp.read()
        except BaseException:
            self.conn.close()  # a half-read response must not be taken for the next one's
            raise

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


class _Ties:
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


def ingest_lines(table: str, rows: Sequence[tuple[Any, ...]], ties: _Ties) -> bytes:
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


class _Writer(IngestClient):
    """One writer: each write is one POST of line protocol to /write, acknowledged by HTTP 204
    once every point is in the cache and its WAL entry fsynced."""

    def __init__(self, session: _Session, db: str, ties: _Ties) -> None:
        self.session, self.ties = session, ties
        self.path = f"/write?db={db}&precision=ns"

    def write(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        if not rows:
            return
        status, raw = self.session.request("POST", self.path, ingest_lines(table, rows, self.ties))
        if status != 204:
            raise RuntimeError(f"InfluxDB write failed ({status}): {raw[:500]!r}")

    def close(self) -> None:
        self.session.close()


def _ingest_table(table: str, series: list[dict[str, Any]]) -> pa.Table:
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


# -- line protocol ----------------------------------------------------------------------------

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


# -- query parameters and results ------------------------------------------------------------

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
class Header:
    """What a query file's header comments ask of the adapter (see the module docstring)."""

    renames: dict[str, str] = field(default_factory=dict)
    probe: tuple[str, str] | None = None  # (column, list binding)
    sort: tuple[str, ...] = ()


def parse_header(text: str) -> Header:
    renames: dict[str, str] = {}
    probe: tuple[str, str] | None = None
    sort: tuple[str, ...] = ()
    for line in text.splitlines():
        m = HEADER.match(line.strip())
        if not m:
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
    return Header(renames, probe, sort)


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


# -- disk ---------------------------------------------------------------------------------

def check_reachable(path: Path, user: str) -> None:
    """Raise if ``user`` cannot reach ``path``: every directory above it must be searchable
    by others (``chmod o+x``) or belong to that user."""
    uid = pwd.getpwnam(user).pw_uid
    for parent in path.resolve().parents:
        st = parent.stat()
        if st.st_uid != uid and not st.st_mode & stat.S_IXOTH:
            raise EngineUnavailable(
                f"influxd runs as {user!r}, which cannot enter {parent} (mode "
                f"{stat.S_IMODE(st.st_mode):o}); use a working directory it can reach")


def settled(root: Path, db: str) -> bool:
    """Whether every shard of ``db`` is one generation of TSM files with no compaction
    output pending (``*.tmp``) and no data left in its WAL segments."""
    # data/<db>/<retention policy>/<shard id>/; data/<db>/_series holds the series file.
    shards = [d for rp in (root / "data" / db).iterdir() if rp.name != "_series"
              for d in rp.iterdir() if d.is_dir()]
    if not shards:
        return False
    for shard in shards:
        if any(shard.glob("*.tmp")):
            return False
        # TSM files are named <generation>-<sequence>.tsm; a full compaction leaves one generation.
        if len({f.name.split("-")[0] for f in shard.glob("*.tsm")}) != 1:
            return False
    return all(seg.stat().st_size == 0 for seg in (root / "wal" / db).glob("*/*/*.wal"))


def du(path: Path, apparent: bool = False) -> int:
    """Bytes under ``path``: allocated on disk (as ``du``), or the files' apparent sizes."""
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            total += st.st_size if apparent else st.st_blocks * 512
    return total
