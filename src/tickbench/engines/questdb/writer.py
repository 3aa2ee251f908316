"""The QuestDB ingest writer: one ILP/HTTP sender, a write one WAL transaction."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from questdb import Sender, TimestampNanos

from tickbench.engines.base import IngestClient
from tickbench.engines.questdb.schema import INGEST, ROW_LAYOUT


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
