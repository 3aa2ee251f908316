"""InfluxDB's server (:class:`InfluxDBServer`): ``influxd`` 1.x built from its Go module, one
per run on 127.0.0.1 with ``auth-enabled`` (an admin with the run's random password); its install,
``influxd.toml``, readiness, the HTTP transport every part uses (``/query``, ``/write``, and
``/api/v2/query`` for Flux), an external endpoint's database and the settings recorded.

On an external endpoint (``--endpoint influxdb=HOST:PORT``) tickbench's data go in a database of
its own (default ``tickbench``), marked by a measurement ``tickbench_marker`` written when it is
created; the queries name no database (it is the request's ``db``), so they run as written.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import string
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack

from tickbench.engines.base import EngineUnavailable
from tickbench.engines.influxdb.lineprotocol import BATCH_BYTES
from tickbench.engines.influxdb.writer import Session
from tickbench.engines.server import (
    ENDPOINT_TIMEOUT_S,
    InstallStep,
    ReaderPool,
    ServerEngine,
    run_tool,
    tools_dir,
)

VERSION = "1.13.2"  # the newest 1.x release on the Go module proxy (engines/influxdb/README.md)
MODULE = "github.com/influxdata/influxdb"
# InfluxData's pkg-config stand-in, the version influxdb's go.mod pins (tools.go): asked by cgo for
# "flux", it builds Flux's Rust library (libflux, from the flux Go module's sources) with cargo.
PKG_CONFIG_MODULE = "github.com/influxdata/pkg-config@v0.3.0"
HERE = Path(__file__).parent
CONFIG = string.Template((HERE / "influxd.toml").read_text())
SCHEMA = string.Template((HERE / "schema.influxql").read_text())
DB = "tickbench"
WRITERS = 3  # concurrent /write requests: the server parses each request on one core
# The measurement that marks a database of an external endpoint as tickbench's own.
MARKER = "tickbench_marker"
MSGPACK = "application/x-msgpack"
# A query connection idle this long is replaced before its next query (one stale after a long
# pause would fail it, and no request is ever sent twice).
QUERY_IDLE_S = 60.0


def query_results(request: Callable[..., tuple[int, bytes]], q: str, db: str,
                  params: dict[str, Any] | None = None, packed: bool = False) -> list[dict[str, Any]]:
    """POST ``q`` to ``/query`` through ``request`` (``(method, path, body, headers)`` →
    ``(status, body)``) and return the per-statement results; raise on any error."""
    form = {"q": q, "db": db, "epoch": "ns"}
    if params:
        form["params"] = json.dumps(params)
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


def bin_dir() -> Path:
    """Where ``influxd`` and ``influx`` of :data:`VERSION` are installed: another version's
    binaries are not this one (a version change installs anew)."""
    return tools_dir() / "influxdb" / VERSION


class InfluxDBServer(ServerEngine):
    """InfluxDB's server and its HTTP transport; :class:`~tickbench.engines.influxdb.load.InfluxDBLoad`
    (the query store, W, SE), :class:`~tickbench.engines.influxdb.ingest.InfluxDBIngest` (the
    ingest store) and the query path (``adapter.py``) work through it."""

    server_name = "influxd"
    data_dir = "influxdb"
    port_names = ("http", "rpc")  # the HTTP API, and the RPC (backup) service it cannot switch off
    #: auth-enabled: the admin user connect() creates with the run's random password (secret()).
    secret_user = "tickbench"
    #: [data] wal-fsync-delay of the server start() runs (an ingest durability setting's).
    wal_fsync_delay: str = "0s"
    #: The benchmark queries' kept-alive connections (one per thread), while connected.
    query_sessions: ReaderPool[Session] | None = None
    #: The HTTP service's (queryReq, queryReqDurationNs, fluxQueryReq, fluxQueryReqDurationNs)
    #: when last read (query_server_ns).
    query_counters: tuple[int, int, int, int] | None = None
    external_endpoint = True  # a database of its own, marked (see the module docstring)
    namespace_kind = "database"

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
        # A short timeout: an endpoint that accepts and never answers fails the check, not hangs it.
        return self._request("GET", "/ping", timeout=ENDPOINT_TIMEOUT_S)[0] == 204

    def connect(self) -> None:
        if self.endpoint is None and not self.attached:
            # With auth-enabled and no user yet, InfluxDB accepts one request without
            # credentials: creating an admin. Once it exists (a restart over the same meta
            # directory) the same statement, authenticated, changes nothing; a user someone
            # else made first fails it.
            self._query(f"CREATE USER {self.secret_user} WITH PASSWORD '{self.secret()}' WITH ALL PRIVILEGES",
                        db="")
        self.query_sessions = ReaderPool(self._session, QUERY_IDLE_S)
        self.query_counters = self._query_counters()

    def disconnect(self) -> None:
        if self.query_sessions is not None:
            self.query_sessions.close()
            self.query_sessions = None
        self.query_counters = None

    def _query_counters(self) -> tuple[int, int, int, int] | None:
        """The HTTP service's InfluxQL query requests (``/query``) and their total duration (ns)
        so far, then its Flux query requests (``/api/v2/query``) and theirs, from
        ``/debug/vars``; ``None`` if it reports none (Flux's as 0 where it reports none)."""
        status, raw = self._request("GET", "/debug/vars")
        if status != 200:
            return None
        for key, stat in json.loads(raw).items():
            if key.startswith("httpd") and isinstance(stat, dict) and stat.get("name") == "httpd":
                values = stat.get("values", {})
                if "queryReq" in values and "queryReqDurationNs" in values:
                    return (int(values["queryReq"]), int(values["queryReqDurationNs"]),
                            int(values.get("fluxQueryReq", 0)), int(values.get("fluxQueryReqDurationNs", 0)))
        return None

    # -- HTTP ---------------------------------------------------------------------------

    def _session(self) -> Session:
        """A keep-alive connection to the server tickbench started, with its credentials."""
        return Session(self.http_port, self.http_auth())

    def _request(self, method: str, path: str, body: bytes | memoryview | None = None,
                 headers: dict[str, str] | None = None, timeout: float | None = None) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection(self.host, self.http_port, timeout=timeout)
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
        return query_results(session.request if session is not None else self._request, q, db, params, packed)

    def _flux(self, script: str, extern: dict[str, Any], session: Session | None = None) -> str:
        """POST a Flux script with its bound values (``extern``: a Flux AST of assignments the
        server puts in front of the script) to ``/api/v2/query`` and return the answer as
        annotated CSV (``#datatype``); raise on any error. A server without ``flux-enabled``
        refuses it (403)."""
        body = json.dumps({"type": "flux", "query": script, "extern": extern,
                           "dialect": {"annotations": ["datatype"]}}).encode()
        request = session.request if session is not None else self._request
        status, raw = request("POST", "/api/v2/query", body,
                              {"Content-Type": "application/json", "Accept": "application/csv"})
        if status != 200:
            try:
                message = json.loads(raw).get("error", raw[:500])
            except ValueError:
                message = raw[:500]
            raise RuntimeError(f"InfluxDB Flux query failed ({status}): {message}")
        return raw.decode()

    def _write(self, db: str, body: bytes) -> None:
        status, raw = self._request("POST", f"/write?db={db}&precision=ns", body)
        if status != 204:
            raise RuntimeError(f"InfluxDB write failed ({status}): {raw[:500]!r}")

    def _create(self, db: str) -> None:
        self._query(SCHEMA.substitute(db=db), db="")

    def _databases(self) -> list[str]:
        series = self._query("SHOW DATABASES", db="")[0].get("series", [])
        return [str(row[0]) for s in series for row in s.get("values") or []]

    # -- settings -------------------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        keys = ("index-version", "wal-fsync-delay", "cache-snapshot-write-cold-duration",
                "compact-full-write-cold-duration", "max-concurrent-compactions", "flux-enabled")
        if self.endpoint is not None:  # the user's server: its configuration is not ours to read
            return {"shard_duration": "1d", "batch_bytes": BATCH_BYTES, "writers": WRITERS, "settled": False}
        conf = (self.root / "influxd.toml").read_text() if (self.root / "influxd.toml").exists() else ""
        found = {k: v.strip().strip('"') for k, v in re.findall(r"^\s*([a-z-]+)\s*=\s*(.+)$", conf, re.M)}
        out: dict[str, Any] = {k: found.get(k, "default") for k in keys}
        out.update({"results": "MessagePack (InfluxQL), annotated CSV (Flux) over one kept-alive HTTP "
                               "connection per client",
                    "server_time": "/debug/vars httpd queryReqDurationNs growth per query "
                                   "(fluxQueryReqDurationNs for the Flux files)",
                    "shard_duration": "1d", "batch_bytes": BATCH_BYTES, "writers": WRITERS,
                    "trade_ties": "tag seq = rank of the trade among those with the same "
                                  "(exchange, sym, side, ts)",
                    "ingest": "line protocol over HTTP /write, one keep-alive connection per writer; "
                              "a database per ingest store; trade ties: seq tag from a registry of "
                              "(exchange, sym, side, ts)"})
        return out
