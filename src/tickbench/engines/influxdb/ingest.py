"""InfluxDB's ingest store (:class:`InfluxDBIngest`, the tick-latency, stream and durability
suites): line protocol built row by row to a database of its own per ingest store, over one
keep-alive HTTP connection per writer (:mod:`.writer`); a write returns on InfluxDB's 204, which
comes only after the WAL entry holding the points has been fsynced (see :data:`WAL_FSYNC_DELAYS`)."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from tickbench.datasets.paper.schema import SCHEMAS, book_level_columns
from tickbench.engines.base import Ingest, IngestClient, StreamTarget, whole_store
from tickbench.engines.influxdb.lineprotocol import Ties
from tickbench.engines.influxdb.results import ingest_table
from tickbench.engines.influxdb.server import InfluxDBServer
from tickbench.engines.influxdb.writer import LineTarget, Writer

INGEST_PREFIX = "ingest_"  # ingest databases are ingest_<random hex>, one per store
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


class InfluxDBIngest(InfluxDBServer, Ingest):
    """The ingest capability on the running server: a database per store, its writers and reads."""

    ingest_marker = "influxdb-ingest"  # JSON naming the store's database
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
    _ties: Ties

    def _ingest_open_paper(self, store: Path, durability: str | None = None) -> None:
        """The ingest store is a database ``ingest_<random hex>`` of this server, named by a
        marker file in ``store``: a store whose marker names a database of this server (same
        root) reopens it as it is; any other store gets a new, empty database, and the ingest
        databases of earlier stores are dropped (they would hold the server's memory and disk).

        ``durability`` is a setting of :attr:`ingest_durability`; wal-fsync-delay is
        server-wide and read only at startup, so the server is restarted over the same
        directories (the loaded query data stay; the pid and port change) when the setting
        asked for is not the one it runs with."""
        setting = self.durability_setting(durability)
        self._ingest_close_paper()
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
        self.open_readers(self._session)

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
        return Writer(self._session(), self.ingest_db, self._ties)

    def _ingest_stream_target_paper(self) -> StreamTarget:
        if self.ingest_db is None:
            raise RuntimeError("the ingest store is not open")
        return LineTarget(self.http_port, self.ingest_db, self._ties, self.http_auth())

    def ingest_read(self, table: str, sym: str) -> pa.Table:
        """``sym``'s rows, ordered by (ts, trade_id) for trades: InfluxDB returns the merged
        series (venues, sides, seq tags) in time order, but ties on a time in series order."""
        series = self._ingest_query(INGEST_READ[table], {"sym": sym})[0].get("series", [])
        out = ingest_table(table, series)
        order = [("ts", "ascending")] + ([("trade_id", "ascending")] if table == "trades" else [])
        return out.sort_by(order)

    def _ingest_count_paper(self, table: str, upto_ns: int | None = None) -> int:
        """Points of ``table``'s measurement now, which are its rows: a point is in the cache,
        and visible, before its write is acknowledged, and no trade replaced another."""
        whole_store(upto_ns)
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

    def _ingest_close_paper(self) -> None:
        self.close_readers()
        self.ingest_db = None
