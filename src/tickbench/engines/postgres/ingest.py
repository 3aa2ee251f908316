"""PostgreSQL's ingest store (:class:`PostgresIngest`, the tick-latency, stream and durability
suites): database ``ingest`` of the running server, written by :mod:`.writer`'s clients under the
``synchronous_commit`` each durability setting names."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pyarrow as pa
from psycopg import sql

from tickbench.datasets.paper.schema import SCHEMAS, TABLES
from tickbench.engines.base import Ingest, IngestClient, StreamTarget, whole_store
from tickbench.engines.postgres.pgcopy import result_arrow
from tickbench.engines.postgres.server import COUNT, DROP_TABLES, PostgresServer, scalar
from tickbench.engines.postgres.writer import CopyTarget, Writer

INGEST_DB = "ingest"
READ = {t: sql.SQL("SELECT * FROM {} WHERE sym = %s ORDER BY {}").format(
    sql.Identifier(t), sql.SQL("ts, trade_id" if t == "trades" else "ts")) for t in TABLES}
# The durability settings, each applied per connection by ingest_client().
SYNCHRONOUS_COMMIT = {
    "synchronous_commit=on": "SET synchronous_commit = on",
    "synchronous_commit=off": "SET synchronous_commit = off",
}


class PostgresIngest(PostgresServer, Ingest):
    """The ingest capability on the running server: database ``ingest``, its writers and reads."""

    ingest_marker = "postgres-ingest"
    ingest_durability: ClassVar[dict[str, str]] = {
        "synchronous_commit=on": (
            "durable: a commit returns once its WAL is flushed to disk (fsync=on); no acknowledged "
            "row is lost in a crash"),
        "synchronous_commit=off": (
            "not durable: a commit returns before its WAL is flushed (the WAL writer flushes it "
            "within 3 x wal_writer_delay = 600 ms); a crash loses the last acknowledged commits, "
            "never leaving the database inconsistent"),
    }
    #: The settings of ingest_durability under which no acknowledged row may be lost.
    ingest_durable: ClassVar[frozenset[str]] = frozenset({"synchronous_commit=on"})
    ingest_setting: str = "synchronous_commit=on"

    def _ingest_open_paper(self, store: Path, durability: str | None = None) -> None:
        """The ingest store is database ``ingest`` of this server; ``store`` (a directory)
        records whose its tables are: a store without this server's marker is new, and gets
        empty tables (any earlier ones dropped); a store with it reopens the tables as they are."""
        setting = self.durability_setting(durability)
        self._ingest_close_paper()
        self.ingest_setting = setting
        self._ensure_database(INGEST_DB)
        identity = {"database": INGEST_DB}
        with self._connect(INGEST_DB) as c:
            exists = scalar(c, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' "
                                "AND tablename = ANY(%s)", [list(TABLES)])
            if not self.marker_names(store, identity) or exists != len(TABLES):
                with c.transaction():
                    c.execute(DROP_TABLES)
                    self._create_schema(c)
                    c.execute(self.engine_file(self.ingest_index_file))
        self.write_marker(store, identity)
        self.open_readers(lambda: self._connect(INGEST_DB))

    def _ingest_close_paper(self) -> None:
        """Close the read connections (writers close their own); the store's data stay."""
        self.close_readers()

    def ingest_client(self) -> IngestClient:
        if self.readers is None:
            raise RuntimeError("the ingest store is not open")
        conn = self._connect(INGEST_DB)
        conn.execute(SYNCHRONOUS_COMMIT[self.ingest_setting])
        return Writer(conn)

    def _ingest_stream_target_paper(self) -> StreamTarget:
        if self.readers is None:
            raise RuntimeError("the ingest store is not open")
        return CopyTarget(self.conninfo(INGEST_DB), SYNCHRONOUS_COMMIT[self.ingest_setting])

    def ingest_read(self, table: str, sym: str) -> pa.Table:
        with self.reader().cursor() as cur:
            cur.execute(READ[table], [sym])
            return result_arrow(table, cur)

    def _ingest_count_paper(self, table: str, upto_ns: int | None = None) -> int:
        whole_store(upto_ns)
        return int(scalar(self.reader(), COUNT[table]))

    def ingest_latest(self) -> pa.Table:
        with self.reader().cursor() as cur:
            cur.execute(self.engine_file("ingest_latest.sql"))
            out = result_arrow(None, cur)
        return out.set_column(1, "ts", out.column("ts").cast(SCHEMAS["book"].field("ts").type))
