"""TimescaleDB 2.28 on Debian's PostgreSQL 15: the PostgreSQL engine's server machinery (its
own cluster under ``<workdir>/pgdata``, its own port, the service user, binary COPY from Arrow)
with ``shared_preload_libraries = 'timescaledb,pg_stat_statements'`` and telemetry off, hypertables by day on
``ts`` (``hypertables.sql``), and the loaded month compressed into the columnstore before the
queries run. The extension is built from its source release by :mod:`.install`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import psycopg
from psycopg import sql

from tickbench.datasets.paper.schema import TABLES
from tickbench.engines.base import EngineUnavailable, storage_figures
from tickbench.engines.postgres import adapter as pg
from tickbench.engines.postgres.load import wal_bytes
from tickbench.engines.timescaledb import install as installer
from tickbench.engines.timescaledb.market import TimescaleMarket

# Every chunk of the table into the columnstore; compress_chunk() is the function form of the
# procedure convert_to_columnstore(), so one statement does all of a table's chunks.
COMPRESS = {t: sql.SQL("SELECT count(compress_chunk(c)) FROM show_chunks({}) AS c").format(sql.Literal(t))
            for t in TABLES}
# SE: a hypertable's chunks inside [start, end): their bytes (compressed data, TOAST, indexes)
# and the rows' bytes before and after compression, as the columnstore's statistics record them.
MONTH_CHUNKS = ("SELECT coalesce(sum(d.total_bytes), 0), coalesce(sum(s.before_compression_total_bytes), 0), "
                "coalesce(sum(s.after_compression_total_bytes), 0), coalesce(sum(d.index_bytes), 0) "
                "FROM timescaledb_information.chunks c "
                "JOIN chunks_detailed_size(%(t)s::regclass) d USING (chunk_schema, chunk_name) "
                "LEFT JOIN chunk_columnstore_stats(%(t)s::regclass) s USING (chunk_schema, chunk_name) "
                "WHERE c.hypertable_name = %(t)s::name AND c.range_start >= %(start)s AND c.range_end <= %(end)s")
COLUMNSTORE_SETTINGS = ("SELECT hypertable::text, segmentby, orderby "
                        "FROM timescaledb_information.hypertable_columnstore_settings")


class Adapter(TimescaleMarket, pg.Adapter):
    """PostgreSQL with TimescaleDB: hypertables, the loaded data in the columnstore. Its files
    (hypertables.sql, ingest.sql, ingest_latest.sql, the queries/ that differ from PostgreSQL's)
    are this folder's; the plain tables are PostgreSQL's schema.sql, the other queries PostgreSQL's
    (``queries_from`` in engine.toml)."""

    server_name = "timescaledb"
    port_env = "TICKBENCH_TIMESCALEDB_PORT"  # a fixed port instead of a free one (refused if taken)
    ingest_marker = "timescaledb-ingest"
    extra_settings: ClassVar[dict[str, str]] = {
        "shared_preload_libraries": "timescaledb,pg_stat_statements",  # the latter: server-side time
        "timescaledb.telemetry_level": "off",
        # JIT on (PostgreSQL's default; the postgres engine turns it off): measured on the 14
        # queries at SF 0.1 over the columnstore, it was the faster setting here (README, Tuning).
        "jit": "on",
    }
    extension = "timescaledb"
    # PostgreSQL's tables (its schema.sql), then this folder's hypertables and columnstore settings.
    table_options_file = "hypertables.sql"
    index_file = None  # the compressed chunks index their batches themselves (hypertables.sql)
    copy_freeze = False  # COPY routes rows into chunks it creates: there is no table to TRUNCATE
    w_durability = (
        "fsync=on, synchronous_commit=on: the COPY (WAL-logged: its rows go into chunks it creates) and "
        "the compression of every chunk commit before W returns, each commit's WAL flushed to disk")
    partition_file = None  # the hypertables chunk by day themselves

    @classmethod
    def probe(cls) -> str:
        server = super().probe()
        version = installer.installed_version()
        if version is None:
            raise EngineUnavailable(f"the TimescaleDB extension is not installed for PostgreSQL {server}")
        return f"{version} (PostgreSQL {server})"

    @classmethod
    def install(cls, progress: Callable[[str], None] | None = None, source: Path | None = None) -> str:
        """PostgreSQL 15 (as the postgres engine installs it), then TimescaleDB built from the
        source release ``source`` (or ``$TICKBENCH_TIMESCALEDB_SOURCE``); idempotent."""
        if not cls.installed():
            pg.Adapter.install(progress)
        installer.install(source, progress)
        return cls.probe()

    # -- loading: the chunks go into the columnstore -----------------------------------------

    def _compress(self, dbname: str) -> None:
        """Every chunk of both hypertables into the columnstore, a connection per table."""
        def one(table: str) -> None:
            with self._connect(dbname) as c:
                c.execute(COMPRESS[table])

        with ThreadPoolExecutor(len(TABLES)) as pool:
            for f in [pool.submit(one, t) for t in TABLES]:
                f.result()

    def _finish(self, c: psycopg.Connection[Any]) -> int:
        """The loaded chunks compressed into the columnstore (part of every load, W's too: it
        is the form in which TimescaleDB serves a finished day), then ANALYZE and the count."""
        self._compress(c.info.dbname)
        return super()._finish(c)

    # -- SE and settings ------------------------------------------------------------------

    def _storage_bytes_paper(self) -> dict[str, int]:
        """SE: the 30-day period's chunks (one a day) of the store :meth:`load` built and
        compressed (VACUUMed and CHECKPOINTed there; the queries since wrote nothing): their
        bytes on disk, and beside them the rows' size before and after compression."""
        b = self.params.bindings()
        start, end = (b[k].replace(tzinfo=dt.UTC) for k in ("month_start", "month_end"))
        c = self._conn()
        out: dict[str, int] = {}
        before = after = index = 0
        for t in TABLES:
            row = c.execute(MONTH_CHUNKS, {"t": t, "start": start, "end": end}).fetchone()
            if row is None:
                raise RuntimeError(f"no chunk sizes for {t}")
            out[f"{t}_total"], before, after = int(row[0]), before + int(row[1]), after + int(row[2])
            index += int(row[3])
        total = sum(out.values())
        return storage_figures("chunks_total_size", total - index, index, wal_bytes(c), **out,
                               uncompressed_bytes=before, compressed_bytes=after)

    def settings(self) -> dict[str, Any]:
        out = super().settings()
        rows = self._conn().execute(COLUMNSTORE_SETTINGS).fetchall()
        out["columnstore"] = {t: {"segmentby": s, "orderby": o} for t, s, o in rows}
        return out
