"""chDB's writers: the ingest suites' row client and the stream suite's Arrow path, shared by the
ingest store (``adapter.py``) and the market ingest store (``market.py``). Each writer is a chDB
connection of its own to the process's session path: chDB serialises the statements of one
connection but runs those of different connections concurrently."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from chdb.state.sqlitelike import Connection

from tickbench.datasets.paper.schema import SCHEMAS, TABLES, rows_to_table
from tickbench.engines.base import IngestClient, StreamSender, StreamTarget

INGEST_DB = "tickbench_ingest"
# chDB turns ClickHouse's async_insert on by default; every ingest INSERT says which it uses.
ASYNC_INSERT = {"default": 0, "fsync": 0, "async": 1}
# streaming INSERTs take no query parameters: the statements are constants per table and mode.
INGEST_INSERT = {
    (table, mode): f"INSERT INTO {INGEST_DB}.{table} SETTINGS async_insert = {value}, wait_for_async_insert = 1"
    for table in TABLES for mode, value in ASYNC_INSERT.items()
}
# Below this many rows a write is encoded row by row as RowBinary; from it on, as one Arrow
# stream (columnar: its fixed cost is repaid by the cheaper per-row encoding; see README).
ARROW_MIN_ROWS = 100
_NUMBERS = {"trades": struct.Struct("<ddq"), "book": struct.Struct("<" + "d" * (len(SCHEMAS["book"]) - 3))}
_TS = struct.Struct("<q")


def ipc_stream(batch: pa.Table) -> bytes:
    """``batch`` as one Arrow IPC stream (what ``FORMAT ArrowStream`` reads)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_table(batch)
    return bytes(sink.getvalue())


class Writer(IngestClient):
    """A writer on a chDB connection of its own to the session path."""

    def __init__(self, conn: Connection, mode: str) -> None:
        self.conn, self.mode = conn, mode
        self._strings: dict[str, bytes] = {}

    def _string(self, value: str) -> bytes:
        """RowBinary String: LEB128 length, then the UTF-8 bytes (memoised: few distinct)."""
        out = self._strings.get(value)
        if out is None:
            raw = value.encode()
            n, prefix = len(raw), bytearray()
            while True:
                byte, n = n & 0x7F, n >> 7
                prefix.append(byte | (0x80 if n else 0))
                if not n:
                    break
            out = self._strings[value] = bytes(prefix) + raw
        return out

    def _row_binary(self, table: str, rows: Sequence[tuple[Any, ...]]) -> bytes:
        """RowBinary rows: ts as Int64 nanoseconds (DateTime64(9)'s ticks), strings, numbers."""
        numbers, text = _NUMBERS[table], 4 if table == "trades" else 3
        return b"".join(
            _TS.pack(row[0]) + b"".join(self._string(v) for v in row[1:text]) + numbers.pack(*row[text:])
            for row in rows
        )

    def write(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        if not rows:
            return
        if len(rows) < ARROW_MIN_ROWS:
            fmt, data = "RowBinary", self._row_binary(table, rows)
        else:
            fmt, data = "ArrowStream", ipc_stream(rows_to_table(table, rows))
        # One INSERT; finish() returns when ClickHouse committed its part (or raises).
        with self.conn.send_insert(INGEST_INSERT[table, self.mode], fmt) as insert:
            insert.append(data)
            insert.finish()

    def close(self) -> None:
        self.conn.close()


class ArrowStreamSender(StreamSender):
    """A stream writer on a chDB connection of its own: a payload is one Arrow IPC stream,
    one INSERT in ClickHouse's ``ArrowStream`` format, returned when its part is committed."""

    def __init__(self, conn: Connection, inserts: dict[str, str]) -> None:
        self.conn, self.inserts = conn, inserts

    def send(self, payload: Any) -> None:
        table, data = payload
        with self.conn.send_insert(self.inserts[table], "ArrowStream") as insert:
            insert.append(data)
            insert.finish()

    def close(self) -> None:
        self.conn.close()


class ArrowStreamTarget(StreamTarget):
    """chDB's fastest streaming path: each batch an Arrow IPC stream of ``schemas[table]``
    (encoded before the clock) sent as ``inserts[table]`` (an ``INSERT INTO <db>.<table>
    SETTINGS …``, the data following) by writer threads of the worker, the one process
    holding the session."""

    in_process = True
    path = "Arrow IPC stream per batch, one INSERT … FORMAT ArrowStream each, writer threads in the engine's process"

    def __init__(self, conn_str: str, inserts: dict[str, str], schemas: dict[str, pa.Schema]) -> None:
        self.conn_str, self.inserts, self.schemas = conn_str, inserts, schemas

    def encode(self, table: str, batch: pa.Table) -> Any:
        return table, ipc_stream(batch.cast(self.schemas[table]))

    def wire_bytes(self, payload: Any) -> bytes:
        data: bytes = payload[1]
        return data

    def connect(self) -> StreamSender:
        return ArrowStreamSender(Connection(self.conn_str), self.inserts)
