"""The PostgreSQL ingest writer: one connection, a row as a prepared INSERT, a batch as one
binary COPY (:mod:`.pgcopy`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from tickbench.data.schema import SCHEMAS, TABLES, rows_to_table
from tickbench.engines.base import IngestClient
from tickbench.engines.postgres import pgcopy


def _insert_sql(table: str) -> sql.Composed:
    """One row's INSERT; ``ts`` is sent as integer microseconds since the epoch, which
    ``timestamptz 'epoch' + n * 1 µs`` turns into the timestamp exactly."""
    ts = sql.SQL("TIMESTAMPTZ 'epoch' + {} * INTERVAL '1 microsecond'").format(sql.Placeholder())
    values = [ts] + [sql.Placeholder()] * (len(SCHEMAS[table].names) - 1)
    return sql.SQL("INSERT INTO {} VALUES ({})").format(sql.Identifier(table), sql.SQL(", ").join(values))


INSERT = {t: _insert_sql(t) for t in TABLES}
COPY_BINARY = {t: sql.SQL("COPY {} FROM STDIN (FORMAT binary)").format(sql.Identifier(t)) for t in TABLES}


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
