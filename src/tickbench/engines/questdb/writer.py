"""The QuestDB ingest writer: one ILP/HTTP sender, a write one WAL transaction."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import pyarrow as pa
from questdb import Sender, TimestampNanos

from tickbench.engines.base import IngestClient, StreamSender, StreamTarget
from tickbench.engines.questdb.schema import INGEST, ROW_LAYOUT, SYMBOLS

with warnings.catch_warnings():
    # An explicit Buffer (filled before the clock, flushed later) is importable only from the
    # legacy module name, which warns.
    warnings.simplefilter("ignore", DeprecationWarning)
    from questdb.ingress import Buffer


class WalState(Protocol):
    """What the writer asks the server about its WAL (the adapter answers)."""

    def wal_txns(self, tables: Iterable[str]) -> dict[str, int]: ...

    def wal_pending(self, target: dict[str, int]) -> bool: ...


class Writer(IngestClient):
    """One ingest writer: an ILP/HTTP sender of its own (one keep-alive connection).

    A write is one HTTP request holding rows of one table, which QuestDB commits as one WAL
    transaction before it answers; ``flush`` returns with that answer, so the rows are
    committed (under the server's ``cairo.commit.mode``) when :meth:`write` returns. They become
    visible to queries once QuestDB's WAL apply job has applied the transaction, a little later:
    :meth:`pending_visibility` says whether it has.
    """

    def __init__(self, wal: WalState, sender: Sender) -> None:
        self.wal = wal
        self.sender = sender
        self.written: set[str] = set()
        self.target: dict[str, int] | None = None

    def write(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        name = INGEST[table]
        symbols, columns = ROW_LAYOUT[table]
        row = self.sender.row
        # Row by row into the sender's buffer: at these write sizes it encodes faster than
        # Sender.dataframe, whose pandas frame costs ~1 ms before its first row.
        for r in rows:
            row(name, symbols={n: r[i] for i, n in symbols}, columns={n: r[i] for i, n in columns},
                at=TimestampNanos(r[0]))
        self.written.add(name)
        self.target = None
        # transactional: the client refuses a buffer spanning tables, so one write is exactly
        # one WAL transaction; a failed flush clears the buffer, and nothing is sent twice.
        self.sender.flush(transactional=True)

    def pending_visibility(self) -> bool:
        """Whether this writer's transactions, as of the first call after its last write, are
        not all applied yet."""
        if self.target is None:
            self.target = self.wal.wal_txns(self.written)
        return self.wal.wal_pending(self.target)

    def close(self) -> None:
        self.sender.close(flush=False)  # every write flushed itself; never send implicitly


def _conf(host: str, port: int, timeout_ms: int, auth: str) -> str:
    # ILP over HTTP as ingest_client(): answered after the WAL commit, with errors; protocol 2
    # sends doubles in binary; retry_timeout=0: a failed request is an error, never sent twice.
    return (f"http::addr={host}:{port};protocol_version=2;retry_timeout=0;auto_flush=off;{auth}"
            f"request_timeout={timeout_ms};")


class IlpSender(StreamSender):
    """One stream writer's ILP/HTTP sender: a payload is a pre-encoded buffer, flushed as one
    request (one WAL transaction), kept so a payload could be sent again by the caller."""

    def __init__(self, conf: str) -> None:
        self.sender = Sender.from_conf(conf)
        self.sender.establish()

    def send(self, payload: Any) -> None:
        self.sender.flush(payload, clear=False, transactional=True)

    def close(self) -> None:
        self.sender.close(flush=False)


class IlpTarget(StreamTarget):
    """QuestDB's fastest streaming path: ILP over HTTP with the C-backed sender; each payload
    a ``Buffer`` filled from the batch by ``Buffer.dataframe`` before the clock (plain data:
    pickled into writer processes, which connect on their own). A batch of ``table`` goes to
    the server's table ``names[table]`` with the columns ``symbols[table]`` as SYMBOLs: by
    default the ingest store's (:data:`~.schema.INGEST`), or the market ingest store's."""

    path = ("ILP/HTTP, questdb C-backed Sender; Buffer.dataframe encoded before the clock, one "
            "transactional flush (one WAL transaction) per payload")

    def __init__(self, host: str, port: int, timeout_ms: int, auth: str = "",
                 names: dict[str, str] | None = None, symbols: dict[str, list[str]] | None = None) -> None:
        #: ``auth``: the server's basic authentication as Sender configuration (``username=…;password=…;``).
        self.host, self.port, self.timeout_ms, self.auth = host, port, timeout_ms, auth
        self.names = INGEST if names is None else names
        self.symbols = SYMBOLS if symbols is None else symbols

    def encode(self, table: str, batch: pa.Table) -> Any:
        buf = Buffer(protocol_version=2)
        frame = batch.to_pandas()
        buf.dataframe(frame, table_name=self.names[table], symbols=self.symbols[table], at="ts")
        return buf

    def wire_bytes(self, payload: Any) -> bytes:
        return bytes(payload)

    def payload_bytes(self, payload: Any) -> int:
        return len(payload)

    def connect(self) -> StreamSender:
        return IlpSender(_conf(self.host, self.port, self.timeout_ms, self.auth))

    def connect_sink(self, host: str, port: int) -> StreamSender | None:
        # The sink answers any POST with 204, as QuestDB's /write does: the same sender and
        # buffers go to it.
        return IlpSender(_conf(host, port, self.timeout_ms, self.auth))
