"""QuestDB's ingest store (:class:`QuestDBIngest`, the tick-latency, stream and durability
suites): tables ``ingest_trades`` and ``ingest_book`` of the running server, written over ILP/HTTP
by :mod:`.writer`'s clients, under the ``cairo.commit.mode`` each durability setting names."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
from questdb import Sender

from tickbench.datasets.paper.schema import SCHEMAS
from tickbench.engines.base import Ingest, IngestClient, StreamTarget, whole_store
from tickbench.engines.questdb.schema import INGEST, SYMBOLS, bind
from tickbench.engines.questdb.server import LOOPBACK, READER_IDLE_S, QuestDBServer
from tickbench.engines.questdb.writer import IlpTarget, Writer

INGEST_READ = {
    "trades": "SELECT * FROM ingest_trades WHERE sym = $sym ORDER BY ts, trade_id",
    "book": "SELECT * FROM ingest_book WHERE sym = $sym ORDER BY ts",
}
INGEST_COUNT = {t: f"SELECT count() FROM {name}" for t, name in INGEST.items()}
INGEST_LATEST = " ".join(line for line in (Path(__file__).parent / "ingest_latest.sql").read_text().splitlines()
                         if not line.lstrip().startswith("--")).strip()
# The durability settings: QuestDB's cairo.commit.mode, server-wide and read at startup.
COMMIT_MODES = {"commit_mode=nosync": "nosync", "commit_mode=async": "async", "commit_mode=sync": "sync"}
# A writer's ILP/HTTP request may take this long (ms): the runner owns timeouts, and a stalled
# commit must show as latency, not be cut by the client's own 10 s default into an error.
ILP_REQUEST_TIMEOUT_MS = 600_000


class QuestDBIngest(QuestDBServer, Ingest):
    """The ingest capability on the running server: the store's tables, its writers and reads."""

    ingest_marker = "questdb-ingest.json"
    ingest_durability: ClassVar[dict[str, str]] = {
        "commit_mode=nosync": (
            "QuestDB's default cairo.commit.mode=nosync: acknowledged once the write's WAL transaction "
            "is committed (written to the table's WAL segment and its sequencer's transaction log "
            "through mmap), nothing flushed to disk: survives a crash of the server process, not an "
            "OS crash or a power loss"),
        "commit_mode=async": (
            "cairo.commit.mode=async: as nosync, and each commit also schedules a flush of the WAL files "
            "it wrote (msync MS_ASYNC) without waiting for it: survives a crash of the server process; "
            "an OS crash can lose the last acknowledged commits"),
        "commit_mode=sync": (
            "cairo.commit.mode=sync: each commit waits for the flush (msync MS_SYNC) of the WAL files it "
            "appended and of the sequencer's transaction log before it is acknowledged: survives a crash "
            "of the server process, and an OS crash as far as the disk honours the flush"),
    }
    # Every mode writes through mmap into the page cache, which outlives a killed process, so
    # none loses an acknowledged row when the server's processes are killed (QuestDB's docs:
    # every commit mode survives a crash of the QuestDB process); they differ only on an OS
    # crash or a power loss, which the durability suite does not cause.
    ingest_durable: ClassVar[frozenset[str]] = frozenset(ingest_durability)
    ingest_setting: str | None = None  # the open ingest store's durability setting

    def _ingest_open_paper(self, store: Path, durability: str | None = None) -> None:
        """The ingest store is the tables ``ingest_trades`` and ``ingest_book`` of this server;
        ``store`` (a directory) holds a marker naming the server root and the tables' directories
        (QuestDB gives each created table a new one). A store whose marker names the tables as
        they are reopens them (visible once their WAL is applied: after a crash QuestDB applies
        the committed transactions again when restarted); any other store gets empty tables,
        earlier ones dropped.

        ``durability`` is a cairo.commit.mode setting of :attr:`ingest_durability`. The mode is
        server-wide and read only at startup, so the server is restarted (its process changes)
        when the mode asked for is not the one it runs with."""
        setting = self.durability_setting(durability)
        self._ingest_close_paper()
        self.restart_with(commit_mode=COMMIT_MODES[setting])
        if self.marker_names(store, self._ingest_identity()):
            self._await(INGEST.values())
        else:
            for table, name in INGEST.items():
                self._create(table, name)
        self.write_marker(store, self._ingest_identity())
        self.open_readers(self._conn, READER_IDLE_S)
        self.ingest_setting = setting

    def _ingest_identity(self) -> dict[str, Any]:
        """Each ingest table's directory (None for a table that does not exist)."""
        dirs = {r["table_name"]: r["directoryName"]
                for r in self._rows("SELECT table_name, directoryName FROM tables()")}
        return {"tables": {n: dirs.get(n) for n in INGEST.values()}}

    def ingest_client(self) -> IngestClient:
        if self.ingest_setting is None:
            raise RuntimeError("the ingest store is not open")
        # ILP over HTTP, as load(): answered after the commit, with errors; protocol 2 sends
        # doubles in binary; retry_timeout=0: a failed write is an error, never sent twice;
        # no auto-flush: each write() flushes itself.
        sender = Sender.from_conf(
            f"http::addr={LOOPBACK}:{self.ports['http']};protocol_version=2;retry_timeout=0;{self.ilp_auth()}"
            f"auto_flush=off;request_timeout={ILP_REQUEST_TIMEOUT_MS};")
        sender.establish()
        return Writer(self, sender)

    def _ingest_stream_target_paper(self) -> StreamTarget:
        if self.ingest_setting is None:
            raise RuntimeError("the ingest store is not open")
        return IlpTarget(LOOPBACK, self.ports["http"], ILP_REQUEST_TIMEOUT_MS, self.ilp_auth())

    def ingest_bulk(self, table: str, batch: pa.Table) -> None:
        """W's path: ``Sender.dataframe`` of the whole batch, one request per 64 MiB."""
        with self._sender() as sender:
            sender.dataframe(batch.to_pandas(), table_name=INGEST[table], symbols=SYMBOLS[table], at="ts")
            sender.flush()
        self._await([INGEST[table]])  # visible once the WAL apply reaches this commit

    def ingest_read(self, table: str, sym: str) -> pa.Table:
        return self._export(bind(INGEST_READ[table], {"sym": sym}), keep=True).cast(SCHEMAS[table])

    def _ingest_count_paper(self, table: str, upto_ns: int | None = None) -> int:
        """The rows of ``table`` visible now: those of the WAL transactions applied so far."""
        whole_store(upto_ns)
        return int(self._exec(INGEST_COUNT[table], keep=True)["dataset"][0][0])

    def ingest_latest(self) -> pa.Table:
        return self._export(INGEST_LATEST, keep=True)

    def _ingest_close_paper(self) -> None:
        self.close_readers()
        self.ingest_setting = None
