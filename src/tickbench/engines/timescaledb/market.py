"""The market suite (SPEC §2.3) on TimescaleDB: PostgreSQL's market code
(:class:`~tickbench.engines.postgres.market.PostgresMarket`: the same COPY from the day's part
files, M-W and M-SE's shape) over this folder's ``market_schema.sql``: quotes and trades as
hypertables chunked by day, every chunk compressed into the columnstore after the COPY.
"""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

import psycopg

from tickbench.datasets.market.schema import MARKET_TABLES
from tickbench.engines.base import storage_figures
from tickbench.engines.postgres.load import wal_bytes
from tickbench.engines.postgres.market import PostgresMarket

# A hypertable's chunks, and one chunk into the columnstore (compress_chunk: the function form of
# convert_to_columnstore()).
CHUNK_LIST = "SELECT c::text FROM show_chunks(%s::regclass) AS c"
COMPRESS = "SELECT compress_chunk(%s::regclass)"
JIT_OFF = "SET jit = off"
COMPRESS_WORKERS = 2  # chunks compressed at once: one per core
# M-SE: a hypertable's chunks inside [start, end) (compressed data, TOAST and indexes), and the
# rows' bytes before and after compression as the columnstore's statistics record them.
CHUNKS = ("SELECT coalesce(sum(d.total_bytes), 0), coalesce(sum(s.before_compression_total_bytes), 0), "
          "coalesce(sum(s.after_compression_total_bytes), 0), coalesce(sum(d.index_bytes), 0) "
          "FROM timescaledb_information.chunks c "
          "JOIN chunks_detailed_size(%(t)s::regclass) d USING (chunk_schema, chunk_name) "
          "LEFT JOIN chunk_columnstore_stats(%(t)s::regclass) s USING (chunk_schema, chunk_name) "
          "WHERE c.hypertable_name = %(t)s::name AND c.range_start >= %(start)s AND c.range_end <= %(end)s")


class TimescaleMarket(PostgresMarket):
    """The market capabilities of the TimescaleDB adapter: hypertables, no btree index, the
    chunks compressed as part of every market load (M-W's too)."""

    market_schema_file: ClassVar[str] = "market_schema.sql"
    market_index_file: ClassVar[str | None] = None  # compressed chunks index their batches
    market_partitioned: ClassVar[bool] = False  # the hypertables chunk by day themselves
    # Each of tickbench's market sessions with ``jit = off`` (the paper suite keeps the engine's
    # ``jit = on``): the lookups' plans (M-LAST's probe of each pair, over the month's chunks)
    # have estimated costs far above ``jit_above_cost``, and compiling them cost more than the
    # queries (README, Market tables).
    market_session_sql: ClassVar[str | None] = JIT_OFF

    def _market_finish(self, c: psycopg.Connection[Any]) -> None:
        """After the COPY: every chunk of both hypertables compressed, :data:`COMPRESS_WORKERS`
        at a time, each on its own connection (quotes' first, the larger), then the statistics."""
        chunks = [str(r[0]) for t in MARKET_TABLES for r in c.execute(CHUNK_LIST, [t]).fetchall()]

        def one(chunk: str) -> None:
            with self._connect(c.info.dbname) as conn:
                conn.execute(COMPRESS, [chunk])

        with ThreadPoolExecutor(COMPRESS_WORKERS) as pool:
            for f in [pool.submit(one, ch) for ch in chunks]:
                f.result()
        super()._market_finish(c)

    def _storage_bytes_market(self) -> dict[str, int]:
        """M-SE: the 20 days' chunks of both hypertables of the store :meth:`_load_market` built
        and compressed (VACUUMed and CHECKPOINTed there), and the instruments table; beside
        them the rows' bytes before and after compression."""
        days = self.market.load_days()
        start = dt.datetime.combine(dt.date.fromisoformat(days[0]), dt.time(), dt.UTC)
        end = dt.datetime.combine(dt.date.fromisoformat(days[-1]), dt.time(), dt.UTC) + dt.timedelta(days=1)
        c = self._conn()
        out: dict[str, int] = {}
        before = after = index = 0
        for t in MARKET_TABLES:
            row = c.execute(CHUNKS, {"t": t, "start": start, "end": end}).fetchone()
            if row is None:
                raise RuntimeError(f"no chunk sizes for {t}")
            out[f"{t}_total"], before, after = int(row[0]), before + int(row[1]), after + int(row[2])
            index += int(row[3])
        row = c.execute("SELECT pg_total_relation_size('instruments'), pg_indexes_size('instruments')").fetchone()
        out["instruments_total"], instruments_index = (int(row[0]), int(row[1])) if row else (0, 0)
        index += instruments_index
        total = sum(out.values())
        return storage_figures("chunks_total_size", total - index, index, wal_bytes(c), **out,
                               uncompressed_bytes=before, compressed_bytes=after)
