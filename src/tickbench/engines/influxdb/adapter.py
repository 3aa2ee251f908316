"""InfluxDB 1.x (influxd built from its Go module), one server per run on 127.0.0.1.

Writes go over HTTP ``/write`` as line protocol built column-wise with Polars
(:mod:`.lineprotocol`); queries are InfluxQL files sent to ``/query`` with bound parameters,
whose header comments say how InfluxDB's series become the SPEC's columns (:mod:`.results`).
Query answers come back as MessagePack (``Accept: application/x-msgpack``, decoded in C) over
one kept-alive connection per client thread; the server's own time of each query is the growth
of its HTTP service's ``queryReqDurationNs`` counter (``/debug/vars``), read after the clock.

The ingest capability (tick-latency, stream and durability suites) writes line protocol built
row by row to a database of its own per ingest store, over one keep-alive HTTP connection per
writer; a write returns on InfluxDB's 204, which comes only after the WAL entry holding the
points has been fsynced (see :data:`WAL_FSYNC_DELAYS`).

On an external endpoint (``--endpoint influxdb=HOST:PORT``) tickbench's data go in a database of
its own (default ``tickbench``), marked by a measurement ``tickbench_marker`` written when it is
created; the queries name no database (it is the request's ``db``), so they run as written.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import secrets
import shutil
import string
import subprocess
import urllib.parse
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import msgpack
import polars as pl
import pyarrow as pa
import pyarrow.csv as pacsv

from tickbench.data.schema import SCHEMAS, TABLES, book_level_columns
from tickbench.engines.base import (
    BulkLoad,
    EngineTime,
    EngineUnavailable,
    Ingest,
    IngestClient,
    LoadFigures,
    Storage,
    StreamTarget,
)
from tickbench.engines.influxdb.lineprotocol import BATCH_BYTES, Ties, line_batches
from tickbench.engines.influxdb.market import MARKET_COUNT, InfluxMarket
from tickbench.engines.influxdb.paths import VERSION, bin_dir, du
from tickbench.engines.influxdb.results import (
    Header,
    found,
    influx_bindings,
    ingest_table,
    parse_header,
    statements,
    to_table,
)
from tickbench.engines.influxdb.writer import LineTarget, Session, Writer
from tickbench.engines.server import LOOPBACK, InstallStep, ReaderPool, ServerEngine, run_tool
from tickbench.suites.published import BY_ID

MODULE = "github.com/influxdata/influxdb"
# InfluxData's pkg-config stand-in, the version influxdb's go.mod pins (tools.go): asked by cgo for
# "flux", it builds Flux's Rust library (libflux, from the flux Go module's sources) with cargo.
PKG_CONFIG_MODULE = "github.com/influxdata/pkg-config@v0.3.0"
HERE = Path(__file__).parent
CONFIG = string.Template((HERE / "influxd.toml").read_text())
SCHEMA = string.Template((HERE / "schema.influxql").read_text())
DB = "tickbench"
# Rows written per measurement; point counts equal row counts only if no point overwrote another.
COUNT = f"SELECT count(price) FROM trades; SELECT count(b1price) FROM book; {MARKET_COUNT}"
PARAM = re.compile(r"\$([a-z_0-9]+)")
WRITERS = 3  # concurrent /write requests: the server parses each request on one core
# The measurement that marks a database of an external endpoint as tickbench's own.
MARKER = "tickbench_marker"
INGEST_PREFIX = "ingest_"  # ingest databases are ingest_<random hex>, one per store
MSGPACK = "application/x-msgpack"
# A query connection idle this long is replaced before its next query (one stale after a long
# pause would fail it, and no request is ever sent twice).
QUERY_IDLE_S = 60.0
# The durability settings: the server's [data] wal-fsync-delay, read only at startup.
#
# Why both are durable, from InfluxDB's source (tsdb/engine/tsm1/engine.go and wal.go; these
# functions are the same in 1.8.10 and 1.13.2):
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


class Adapter(InfluxMarket, ServerEngine, BulkLoad, Storage, Ingest, EngineTime):
    server_name = "influxd"
    data_dir = "influxdb"
    port_names = ("http", "rpc")  # the HTTP API, and the RPC (backup) service it cannot switch off
    ingest_marker = "influxdb-ingest"  # JSON naming the store's database
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
    #: Databases written by load() whose compaction the runner waits for.
    _settling: set[str]
    _expected: dict[str, int]  # database -> the rows written into it, until a count shows them all
    _ties: Ties
    #: The benchmark queries' kept-alive connections (one per thread), while connected.
    query_sessions: ReaderPool[Session] | None = None
    #: The HTTP service's (queryReq, queryReqDurationNs) when last read (query_server_ns).
    query_counters: tuple[int, int] | None = None
    query_requests = 1  # the query requests the last run_query sent (a lookback: one a round)
    external_endpoint = True  # a database of its own, marked (see the module docstring)
    namespace_kind = "database"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._settling = set()
        self._expected = {}

    # -- installation -------------------------------------------------------------------

    @classmethod
    def probe(cls) -> str:
        cls.require_installed()
        # "InfluxDB 1.13.2 (git: unknown unknown)" (1.8: "InfluxDB v1.8.10 (…)")
        return run_tool([str(bin_dir() / "influxd"), "version"]).split()[1].lstrip("v")

    @classmethod
    def installed(cls) -> bool:
        return all(os.access(bin_dir() / b, os.X_OK) for b in ("influxd", "influx"))

    @classmethod
    def install_steps(cls, stage: Path) -> list[InstallStep]:
        """Build ``influxd`` (the server) and ``influx`` (its CLI, for the baseline importer)
        from the Go module; the version is stamped in with -ldflags, as InfluxData's release
        build does. Since 1.9 influxd links Flux's Rust library through cgo, so InfluxData's
        pkg-config (built first, from the Go module proxy) builds it with cargo from crates."""
        go, cargo = shutil.which("go"), shutil.which("cargo")
        if go is None or cargo is None:
            raise EngineUnavailable(
                "the Go toolchain (`go` 1.26 or newer) and Rust's `cargo` build influxd and its Flux library")
        tool = stage / "build"
        return [InstallStep([go, "install", PKG_CONFIG_MODULE],
                            "building InfluxData's pkg-config (it builds Flux's library with cargo)",
                            {"GOBIN": str(tool)}),
                InstallStep([go, "install", "-ldflags", f"-X main.version={VERSION}",
                             f"{MODULE}/cmd/influxd@v{VERSION}", f"{MODULE}/cmd/influx@v{VERSION}"],
                            f"building influxd and influx {VERSION} with go install and cargo (about 10 minutes)",
                            # Flux pins its Rust toolchain (rust-toolchain.toml), which rustup would
                            # fetch from outside the package registries; the installed stable one
                            # builds it (RUSTUP_TOOLCHAIN set by the user wins).
                            {"GOBIN": str(stage), "PKG_CONFIG": str(tool / "pkg-config"),
                             "RUSTUP_TOOLCHAIN": os.environ.get("RUSTUP_TOOLCHAIN", "stable")})]

    @classmethod
    def install_staged(cls, stage: Path) -> None:
        bin_dir().mkdir(parents=True, exist_ok=True)
        for name in ("influx", "influxd"):  # the server last: installed() checks both
            os.replace(stage / name, bin_dir() / name)

    # -- server -------------------------------------------------------------------------

    @property
    def http_port(self) -> int:
        return self.ports["http"]

    def prepare(self, user: str | None) -> list[str]:
        for sub in ("meta", "data", "wal"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        conf = self.root / "influxd.toml"
        conf.write_text(CONFIG.substitute(root=self.root, http_port=self.http_port, rpc_port=self.ports["rpc"],
                                          wal_fsync_delay=self.wal_fsync_delay))
        return [str(bin_dir() / "influxd"), "-config", str(conf)]

    def ready(self) -> bool:
        return self._request("GET", "/ping")[0] == 204

    def connect(self) -> None:
        self.query_sessions = ReaderPool(lambda: Session(self.http_port), QUERY_IDLE_S)
        self.query_counters = self._query_counters()

    def disconnect(self) -> None:
        if self.query_sessions is not None:
            self.query_sessions.close()
            self.query_sessions = None
        self.query_counters = None

    def _query_counters(self) -> tuple[int, int] | None:
        """The HTTP service's query requests and their total duration (ns) so far, from
        ``/debug/vars``; ``None`` if it reports none."""
        status, raw = self._request("GET", "/debug/vars")
        if status != 200:
            return None
        for key, stat in json.loads(raw).items():
            if key.startswith("httpd") and isinstance(stat, dict) and stat.get("name") == "httpd":
                values = stat.get("values", {})
                if "queryReq" in values and "queryReqDurationNs" in values:
                    return int(values["queryReq"]), int(values["queryReqDurationNs"])
        return None

    # -- HTTP ---------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: bytes | memoryview | None = None,
                 headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection(self.host, self.http_port, timeout=None)
        try:
            conn.request(method, path, body=body, headers={**self.http_auth(), **(headers or {})})
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    # -- an external endpoint: a database of tickbench's own, marked --------------------------

    @property
    def db(self) -> str:
        """The loaded data's database: ``tickbench``, or the endpoint's namespace."""
        return self.namespace if self.endpoint else DB

    def _measurements(self, db: str) -> list[str]:
        return [v[0] for r in self._query("SHOW MEASUREMENTS", db=db) for s in r.get("series", [])
                for v in s["values"]]

    def foreign_tables(self) -> list[str]:
        if self.namespace not in self._databases():
            return []
        found = self._measurements(self.namespace)
        if MARKER in found:
            return []
        return [f"database {self.namespace}" + (f" (measurements {', '.join(found[:5])})" if found else "")]

    def drop_own(self) -> None:
        if self.namespace in self._databases() and MARKER in self._measurements(self.namespace):
            self._query(f'DROP DATABASE "{self.namespace}"', db="")

    def server_version(self) -> str:
        conn = http.client.HTTPConnection(self.host, self.http_port, timeout=60)
        try:
            conn.request("GET", "/ping", headers=self.http_auth())
            resp = conn.getresponse()
            resp.read()
            return f"InfluxDB {resp.getheader('X-Influxdb-Version', 'unknown')}"
        finally:
            conn.close()

    def _query(self, q: str, db: str = DB, params: dict[str, Any] | None = None,
               session: Session | None = None, packed: bool = False) -> list[dict[str, Any]]:
        """POST ``q`` (one or more statements) and return the per-statement results;
        raise on any error. Times come back as integer nanoseconds (``epoch=ns``). Sent over
        ``session`` when given, else over a connection of its own; ``packed``: the answer as
        MessagePack rather than JSON (same structure, decoded in C)."""
        form = {"q": q, "db": db, "epoch": "ns"}
        if params:
            form["params"] = json.dumps(params)
        request = session.request if session is not None else self._request
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if packed:
            headers["Accept"] = MSGPACK
        status, raw = request("POST", "/query", urllib.parse.urlencode(form).encode(), headers)
        try:
            doc = msgpack.unpackb(raw) if packed else json.loads(raw)
        except ValueError:  # an error the server wrote as text
            raise RuntimeError(f"InfluxDB query failed ({status}): {raw[:500]!r}") from None
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

    def _load_frames(self, db: str, frames: Iterable[tuple[str, pl.DataFrame]], expected: int,
                     create: bool = True) -> int:
        """Write ``(table, frame)`` pairs into a fresh database ``db``; check that every row
        came back as a point (a point with the same series and time would replace another)."""
        if create:
            self._create(db)
        self._write_all(db, line_batches(frames))
        self._expected[db] = expected  # checked by pending_visibility, which the runner calls next
        return expected

    def _parquet_frames(self, table: str, days: list[str]) -> Iterator[tuple[str, pl.DataFrame]]:
        # One file is one (day, exchange, sym) partition: trades tied on ts are all in it.
        for f in self.dataset.files(table, days):
            yield table, pl.read_parquet(f)

    def load(self) -> int:
        days = self.params.load_days()
        expected = self.dataset.sizes(days)["rows"]
        frames = (fr for t in TABLES for fr in self._parquet_frames(t, days))
        if self.endpoint is None:
            rows = self._load_frames(DB, frames, expected)
            self._settling.add(DB)
            return rows
        # The user's server: its files are not ours to watch settle (see METHODOLOGY.md).
        self.check_endpoint()
        self._create(self.db)
        self._write(self.db, f"{MARKER} created=1i".encode())
        return self._load_frames(self.db, frames, expected, create=False)

    def pending_visibility(self) -> bool:
        """Whether a database just written does not yet show every written row as a point.
        InfluxDB acknowledges a write once its points are in the cache and the WAL, but a count
        that runs while the cache is being snapshotted into a TSM file can miss some of them for
        a moment (seen at tiny scale: 541,350 of 547,832); the runner asks again. More points
        than rows, or fewer once the database has settled, means points were lost or replaced
        (a point with the same series and time replaces another): an error."""
        for db, want in list(self._expected.items()):
            # Settled before and after the count: a count taken while the cache was being
            # snapshotted can be short even though the shard looks settled a moment later.
            was_settled = self.endpoint is None and settled(self.root, db)
            got = self._count(db)
            if got == want:
                del self._expected[db]
            elif got > want or (was_settled and settled(self.root, db)):
                del self._expected[db]
                raise RuntimeError(f"{db}: {want} rows written but {got} points read back")
        return bool(self._expected)

    def pending_settle(self) -> bool:
        """Whether a database written by :meth:`load` is not yet
        settled: InfluxDB snapshots its cache to TSM files and fully compacts every shard (one
        generation of TSM files, empty WAL segments), which the configuration makes it do one
        second after a shard's last write. One listing of the databases' files; the runner waits.
        Nothing is pending on an external endpoint: its files are not ours to watch."""
        if not self._settling:
            return False
        if self.server is None or self.server.proc is None or self.server.proc.poll() is not None:
            raise RuntimeError(f"influxd is not running (log {self.log_file})")  # it would never settle
        self._settling = {db for db in self._settling if not settled(self.root, db)}
        return bool(self._settling)

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
        return LoadFigures(rows=rows, input_bytes=nbytes,
                           detail={"database": f"w_{fmt}", "durability": self.w_durability()})

    def w_durability(self) -> str:
        """W's durability (its records' ``detail["durability"]``)."""
        return (f"wal-fsync-delay={self.wal_fsync_delay}: each /write is acknowledged (HTTP 204) only after "
                "the WAL entry holding its points is fsynced, so every row is on disk when W returns")

    def baseline_load(self, fmt: str, scratch: Path) -> LoadFigures:
        """InfluxDB's own importer, ``influx -import``, with its defaults (5000 points per
        request, one request at a time) on a line-protocol file made from the same input:
        InfluxDB 1.x has no CSV or Parquet reader of its own."""
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
        self._expected[db] = expected  # checked by pending_visibility, which the runner calls next
        return LoadFigures(rows=expected, input_bytes=nbytes, detail={
            "database": db, "tool": "influx -import", "line_protocol_bytes": lp_bytes,
            "durability": self.w_durability()})

    def storage_bytes(self) -> dict[str, int]:
        """SE on the loaded database once compactions settled. Its shards are one per day
        (schema.influxql), so the 30-day period is the shards whose day is in it: each one's
        TSM files and ``fields.idx`` under ``data/`` and its WAL directory, as allocated on disk
        (``du``); the multi-exchange day, when outside the period, is a shard of its own and is
        left out. The database's series file (``_series``, the keys of all its series) is
        counted whole. The first key is the total; apparent file sizes follow."""
        if self.endpoint is not None:
            # Why: SE measures files on disk, and an external server's files are not ours to read.
            raise RuntimeError("SE measures InfluxDB's files on disk; an external endpoint's are not visible here")
        # The days with data: a day without any (an outage in a capture) has no shard.
        month = {e["day"] for t in TABLES for e in self.dataset.entries(t, self.params.days("month"))}
        shards_in = [(rp, str(i)) for i, rp, start in self._shards(DB) if start[:10] in month]
        if len(shards_in) != len(month):
            raise RuntimeError(f"SE: {len(shards_in)} of the period's {len(month)} daily shards with data "
                               f"found in {DB}")
        shard_dirs = [self.root / area / DB / rp / i for rp, i in shards_in for area in ("data", "wal")]
        series = self.root / "data" / DB / "_series"
        shards, series_bytes = sum(du(d) for d in shard_dirs), du(series)
        return {"month_shards_and_series_allocated": shards + series_bytes,
                "shards_allocated": shards, "series_file_allocated": series_bytes,
                "month_shards_and_series_apparent": sum(du(d, apparent=True) for d in [*shard_dirs, series])}

    def _shards(self, db: str) -> list[tuple[int, str, str]]:
        """``(id, retention policy, start time)`` of each shard of ``db`` (``SHOW SHARDS``; RFC
        3339 start times). A shard's files are in ``data/<db>/<retention policy>/<id>``."""
        out = []
        for r in self._query("SHOW SHARDS", db=""):
            for s in r.get("series", []):
                if s["name"] == db:
                    col = {name: k for k, name in enumerate(s["columns"])}
                    out += [(int(v[col["id"]]), str(v[col["retention_policy"]]), str(v[col["start_time"]]))
                            for v in s["values"]]
        return out

    # -- queries ------------------------------------------------------------------------

    def run_query(self, qid: str) -> pa.Table:
        text = self.query_text(qid)
        header = parse_header(text)
        if self.query_sessions is None:
            raise RuntimeError("InfluxDB is not started")
        # writer.Session reaches the loopback only, without credentials: an external
        # endpoint's queries go over a connection each (with its host and authentication).
        session = self.query_sessions.get() if self.endpoint is None else None
        try:
            if qid.startswith("M-"):  # the market suite's files (market.py)
                return self.run_market_query(qid, text, session)
            results = self._run_statements(text, header, session)
        except BaseException:
            self.query_sessions.discard()  # a failed request's connection is not reused
            raise
        probes = self.params.bindings()[header.probe[1]] if header.probe else None
        table = to_table(results, header.renames, BY_ID[qid].columns,
                         header.probe[0] if header.probe else None, probes)
        return table.sort_by([(c, "ascending") for c in header.sort]) if header.sort else table

    def _run_statements(self, text: str, header: Header, session: Session | None) -> list[dict[str, Any]]:
        """The per-statement results of a query file: one request, or with a lookback header
        one request per round (see :mod:`.results`), the statements still without a row each
        round asked again over the next, longer window. Sets :attr:`query_requests`."""
        raw = self.params.bindings()
        binds = influx_bindings(raw)
        if header.lookback is None or header.probe is None:
            self.query_requests = 1
            used = {name: binds[name] for name in PARAM.findall(text)}
            return self._query(text, db=self.db, params=used, session=session, packed=True)
        lookback, times = header.lookback, header.probe[1]
        stmts = statements(text)
        if len(raw[times]) != len(stmts):
            raise ValueError(f"a lookback query needs one statement per element of {times}; "
                             f"it has {len(stmts)} statements")
        results: dict[int, dict[str, Any]] = {}
        pending = [(i, int(binds[f"{times}_{i}"])) for i in range(len(stmts))]
        self.query_requests = 0
        for window in (*lookback.windows_ns, None):
            round_binds = {**binds, **lookback.lows(binds, pending, window)}
            q = ";\n".join(stmts[i] for i, _ in pending)
            used = {name: round_binds[name] for name in PARAM.findall(q)}
            answers = self._query(q, db=self.db, params=used, session=session, packed=True)
            self.query_requests += 1
            for (i, _), answer in zip(pending, answers, strict=True):
                results[i] = answer
            pending = [(i, t) for i, t in pending if not found(results[i])]
            if not pending:
                break
        return [results[i] for i in range(len(stmts))]

    def explain(self, qid: str) -> str:
        """``EXPLAIN ANALYZE`` of the query's first statement (InfluxQL explains one SELECT at
        a time; a query of one statement per probe time repeats it with another time), with a
        lookback header as its first round binds it (the shortest window): the iterators, TSM
        blocks and points each read decoded."""
        text = self.query_text(qid)
        if qid.startswith("M-"):
            return self.market_explain(qid, text)
        header = parse_header(text)
        stmts = statements(text)
        binds = influx_bindings(self.params.bindings())
        if header.lookback is not None and header.probe is not None:
            first = [(0, int(binds[f"{header.probe[1]}_0"]))]
            binds |= header.lookback.lows(binds, first, header.lookback.windows_ns[0])
        used = {name: binds[name] for name in PARAM.findall(stmts[0])}
        results = self._query("EXPLAIN ANALYZE " + stmts[0], db=self.db, params=used)
        lines = [str(v[0]) for r in results for s in r.get("series", []) for v in s["values"]]
        more = f"(the first of {len(stmts)} statements, which differ only in their bound values)\n"
        return (more if len(stmts) > 1 else "") + "\n".join(lines)

    def query_server_ns(self) -> int | None:
        """The server's own time of the last query: the growth of ``queryReqDurationNs`` (the
        HTTP handler's time, from the request to the last byte of the answer) since the last
        reading, when exactly the query's own requests ran in between (one, or one per
        lookback round; else ``None``: another client's query, or one of the adapter's own).
        Read after the clock stops."""
        before, now = self.query_counters, self._query_counters()
        self.query_counters = now
        if before is None or now is None or now[0] - before[0] != self.query_requests:
            return None
        return now[1] - before[1]

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
        self.restart_with(wal_fsync_delay=WAL_FSYNC_DELAYS[setting])
        recorded = self.read_marker(store)
        databases = self._databases()
        db = recorded.get("database") if isinstance(recorded, dict) else None
        if db in databases and self.marker_names(store, {"database": db}):
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
        self.write_marker(store, {"database": db})
        self.ingest_db = db
        self._ties = Ties(first_seq)
        self.open_readers(lambda: Session(self.http_port))

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
        return self._query(q, db=self.ingest_db, params=params, session=self.reader())

    def ingest_client(self) -> IngestClient:
        if self.ingest_db is None:
            raise RuntimeError("the ingest store is not open")
        return Writer(Session(self.http_port), self.ingest_db, self._ties)

    def ingest_stream_target(self) -> StreamTarget:
        if self.ingest_db is None:
            raise RuntimeError("the ingest store is not open")
        return LineTarget(self.http_port, self.ingest_db, self._ties)

    def ingest_read(self, table: str, sym: str) -> pa.Table:
        """``sym``'s rows, ordered by (ts, trade_id) for trades: InfluxDB returns the merged
        series (venues, sides, seq tags) in time order, but ties on a time in series order."""
        series = self._ingest_query(INGEST_READ[table], {"sym": sym})[0].get("series", [])
        out = ingest_table(table, series)
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
        super().ingest_close()
        self.ingest_db = None

    def settings(self) -> dict[str, Any]:
        keys = ("index-version", "wal-fsync-delay", "cache-snapshot-write-cold-duration",
                "compact-full-write-cold-duration", "max-concurrent-compactions")
        if self.endpoint is not None:  # the user's server: its configuration is not ours to read
            return {"shard_duration": "1d", "batch_bytes": BATCH_BYTES, "writers": WRITERS, "settled": False}
        conf = (self.root / "influxd.toml").read_text() if (self.root / "influxd.toml").exists() else ""
        found = {k: v.strip().strip('"') for k, v in re.findall(r"^\s*([a-z-]+)\s*=\s*(.+)$", conf, re.M)}
        out: dict[str, Any] = {k: found.get(k, "default") for k in keys}
        out.update({"results": "MessagePack over one kept-alive HTTP connection per client",
                    "server_time": "/debug/vars httpd queryReqDurationNs growth per query",
                    "shard_duration": "1d", "batch_bytes": BATCH_BYTES, "writers": WRITERS,
                    "trade_ties": "tag seq = rank of the trade among those with the same "
                                  "(exchange, sym, side, ts)",
                    "ingest": "line protocol over HTTP /write, one keep-alive connection per writer; "
                              "a database per ingest store; trade ties: seq tag from a registry of "
                              "(exchange, sym, side, ts)"})
        return out


# -- disk ---------------------------------------------------------------------------------

def settled(root: Path, db: str) -> bool:
    """Whether every shard of ``db`` is one generation of TSM files with no compaction
    output pending (``*.tmp``) and no data left in its WAL segments."""
    # data/<db>/<retention policy>/<shard id>/; data/<db>/_series holds the series file.
    if not (root / "data" / db).is_dir():
        return False  # no shard written yet
    shards = [d for rp in (root / "data" / db).iterdir() if rp.name != "_series" and rp.is_dir()
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
