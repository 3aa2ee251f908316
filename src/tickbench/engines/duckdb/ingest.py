"""DuckDB's writers: the ingest suites' row client and the stream suite's Arrow path, shared by
the ingest store (``adapter.py``) and the market ingest store (``market.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
import pyarrow as pa

from tickbench.datasets.market.schema import MARKET_TABLES
from tickbench.datasets.paper.schema import SCHEMAS, TABLES, rows_to_table
from tickbench.engines.base import IngestClient, StreamSender, StreamTarget


def _insert_sql(table: str) -> str:
    ncols = len(SCHEMAS[table].names)
    return f"INSERT INTO {table} VALUES (make_timestamp_ns(?)" + ", ?" * (ncols - 1) + ")"


INSERT = {t: _insert_sql(t) for t in TABLES}
# One Arrow batch registered as tickbench_batch, scanned by one INSERT (one transaction).
INSERT_ARROW = {t: f"INSERT INTO {t} SELECT * FROM tickbench_batch" for t in (*TABLES, *MARKET_TABLES)}


def insert_arrow(cur: duckdb.DuckDBPyConnection, table: str, batch: pa.Table) -> None:
    """``batch`` into ``table`` by one INSERT (one transaction) scanning it, registered on ``cur``."""
    cur.register("tickbench_batch", batch)
    try:
        cur.execute(INSERT_ARROW[table])
    finally:
        cur.unregister("tickbench_batch")


class Writer(IngestClient):
    """A writer on its own cursor (DuckDB connections are not shared across threads)."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection) -> None:
        self.cur = cursor

    def write(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        if len(rows) <= 8:
            for row in rows:  # one autocommitted INSERT per event, as a trading system writes
                self.cur.execute(INSERT[table], row)
            return
        # A batch goes in as one Arrow scan: one transaction, far fewer round trips.
        insert_arrow(self.cur, table, rows_to_table(table, rows))

    def close(self) -> None:
        self.cur.close()


class ArrowSender(StreamSender):
    """A stream writer on its own cursor: a payload is an Arrow batch, one INSERT (one
    transaction) scanning it."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection) -> None:
        self.cur = cursor

    def send(self, payload: Any) -> None:
        table, batch = payload
        insert_arrow(self.cur, table, batch)

    def close(self) -> None:
        self.cur.close()


class ArrowTarget(StreamTarget):
    """DuckDB's fastest streaming path: Arrow batches (cast to ``schemas[table]`` before the
    clock) inserted by writer threads of the worker, each on its own cursor of ``con``, the one
    connection of the one process that may open the store for writing."""

    in_process = True
    path = "Arrow batch registered and inserted (INSERT … SELECT), writer threads in the engine's process"

    def __init__(self, con: duckdb.DuckDBPyConnection, schemas: dict[str, pa.Schema]) -> None:
        self.con, self.schemas = con, schemas

    def encode(self, table: str, batch: pa.Table) -> Any:
        return table, batch.cast(self.schemas[table]).combine_chunks()

    def payload_bytes(self, payload: Any) -> int:
        return int(payload[1].nbytes)

    def connect(self) -> StreamSender:
        return ArrowSender(self.con.cursor())
