"""The PostgreSQL ingest writer: one connection, a row as a prepared INSERT, a batch as one
binary COPY (:mod:`.pgcopy`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import psycopg
import pyarrow as pa
from psycopg import sql

from tickbench.datasets.paper.schema import SCHEMAS, TABLES, rows_to_table
from tickbench.engines.base import IngestClient, StreamSender, StreamTarget
from tickbench.engines.postgres import pgcopy


def _insert_sql(table: str) -> sql.Composed:
    """One row's INSERT; ``ts`` is sent as integer microseconds since the epoch, which
    ``timestamptz 'epoch' + n * 1 µs`` turns into the timestamp exactly."""
    ts = sql.SQL("TIMESTAMPTZ 'epoch' + {} * INTERVAL '1 microsecond'").format(sql.Placeholder())
    values = [ts] + [sql.Placeholder()] * (len(SCHEMAS[table].names) - 1)
    return sql.SQL("INSERT INTO {} VALUES ({})").format(sql.Identifier(table), sql.SQL(", ").join(values))


def copy_binary(table: str) -> sql.Composed:
    """``table``'s binary COPY (every column, in the table's order: the Arrow schema's)."""
    return sql.SQL("COPY {} FROM STDIN (FORMAT binary)").format(sql.Identifier(table))


INSERT = {t: _insert_sql(t) for t in TABLES}
COPY_BINARY = {t: copy_binary(t) for t in TABLES}


class Writer(IngestClient):
    """One ingest connection (autocommit): a single row is one prepared INSERT, its own
    transaction; several rows are one binary COPY, one transaction."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def write(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        if len(rows) == 1:
            row = rows[0]
            # µs: the data are whole microseconds, PostgreSQL's resolution.
            self.conn.execute(INSERT[table], (row[0] // 1_000, *row[1:]), prepare=True)
            return
        batch = rows_to_table(table, rows)
        with self.conn.cursor() as cur:
            if pgcopy.encodable(batch):
                with cur.copy(COPY_BINARY[table]) as copy:
                    copy.write(pgcopy.HEADER)
                    for chunk in pgcopy.encode(batch):
                        copy.write(chunk)
                    copy.write(pgcopy.TRAILER)
            else:  # nulls: binary COPY's fixed layout has no room for them
                with self.conn.transaction():
                    cur.executemany(INSERT[table], [(r[0] // 1_000, *r[1:]) for r in rows])

    def close(self) -> None:
        self.conn.close()


class CopySender(StreamSender):
    """One stream writer's connection: a payload is a pre-encoded binary COPY buffer (header,
    tuples, trailer), sent as one ``COPY … FROM STDIN (FORMAT binary)``, one transaction."""

    def __init__(self, conninfo: dict[str, Any], setting_sql: str, tables: Iterable[str] = TABLES) -> None:
        self.conn = psycopg.connect(**conninfo, autocommit=True)
        self.conn.execute(setting_sql)
        self.copies = {t: copy_binary(t) for t in tables}

    def send(self, payload: Any) -> None:
        table, data = payload
        with self.conn.cursor() as cur, cur.copy(self.copies[table]) as copy:
            copy.write(data)

    def close(self) -> None:
        self.conn.close()


class CopyTarget(StreamTarget):
    """PostgreSQL's fastest streaming path: binary COPY (psycopg) of buffers encoded from the
    batch before the clock (:mod:`.pgcopy`); plain data, pickled into writer processes, which
    connect on their own under the store's ``synchronous_commit`` setting. ``schemas`` are the
    tables it writes, each with its Arrow schema (the paper's ingest tables unless given; the
    market ingest store's ``quotes`` and ``trades``), whose column order is the table's."""

    path = "psycopg binary COPY; buffers encoded from Arrow before the clock, one COPY per payload"

    def __init__(self, conninfo: dict[str, Any], setting_sql: str,
                 schemas: Mapping[str, pa.Schema] = SCHEMAS) -> None:
        self.conninfo, self.setting_sql, self.schemas = conninfo, setting_sql, dict(schemas)

    def encode(self, table: str, batch: pa.Table) -> Any:
        batch = batch.cast(self.schemas[table])
        if not pgcopy.encodable(batch):
            raise ValueError(f"{table}: a batch with nulls has no binary COPY layout")
        return table, b"".join([pgcopy.HEADER, *pgcopy.encode(batch), pgcopy.TRAILER])

    def wire_bytes(self, payload: Any) -> bytes:
        return bytes(payload[1])

    def connect(self) -> StreamSender:
        return CopySender(self.conninfo, self.setting_sql, self.schemas)
