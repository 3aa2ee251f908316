"""TimescaleDB 2.28 on Debian's PostgreSQL 15: the PostgreSQL engine's server machinery (its
own cluster under ``<workdir>/pgdata``, its own port, the service user, binary COPY from Arrow)
with ``shared_preload_libraries = 'timescaledb'`` and telemetry off, hypertables by day on
``ts`` (``schema.sql``), and the loaded month compressed into the columnstore before the
queries run. The extension is built from its source release by :mod:`.install`.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
from psycopg import sql

from tickbench.data.schema import SCHEMAS
from tickbench.engines.base import EngineUnavailable
from tickbench.engines.postgres import adapter as pg
from tickbench.engines.timescaledb import install as installer

HERE = Path(__file__).parent
SCHEMA = (HERE / "schema.sql").read_text()
INGEST_INDEXES = (HERE / "ingest.sql").read_text()
LATEST = (HERE / "ingest_latest.sql").read_text()
# Every chunk of the table into the columnstore; compress_chunk() is the procedure
# convert_to_columnstore() as a function, so one statement does all of a table's chunks.
COMPRESS = {t: sql.SQL("SELECT count(compress_chunk(c)) FROM show_chunks({}) AS c").format(sql.Literal(t))
            for t in pg.TABLES}
COLUMNSTORE_STATS = ("SELECT coalesce(sum(before_compression_total_bytes), 0), "
                     "coalesce(sum(after_compression_total_bytes), 0) FROM hypertable_columnstore_stats(%s)")


class Adapter(pg.Adapter):
    """PostgreSQL with TimescaleDB: hypertables, the month in the columnstore."""

    @classmethod
    def probe(cls) -> str:
        server = pg.Adapter.probe()
        version = installer.installed_version()
        if version is None:
            raise EngineUnavailable(f"the TimescaleDB extension is not installed for PostgreSQL {server}")
        return f"{version} (PostgreSQL {server})"

    @classmethod
    def install(cls, progress: Callable[[str], None] | None = None, source: Path | None = None) -> str:
        """PostgreSQL 15 (as the postgres engine installs it), then TimescaleDB built from the
        source release ``source`` (or ``$TICKBENCH_TIMESCALEDB_SOURCE``); idempotent."""
        pg.Adapter.install(progress)
        installer.install(source, progress)
        return cls.probe()

    # -- schema and loading -------------------------------------------------------------

    def _create_schema(self, c: psycopg.Connection[Any]) -> str:
        c.execute("CREATE EXTENSION IF NOT EXISTS timescaledb")
        c.execute(SCHEMA)
        return "timescaledb"

    def _compress(self, dbname: str) -> None:
        """Every chunk of both hypertables into the columnstore, a connection per table."""
        def one(table: str) -> None:
            with self._connect(dbname) as c:
                c.execute(COMPRESS[table])

        with ThreadPoolExecutor(len(pg.TABLES)) as pool:
            for f in [pool.submit(one, t) for t in pg.TABLES]:
                f.result()

    def _finish(self, c: psycopg.Connection[Any], variant: str) -> int:
        """The loaded chunks compressed into the columnstore (part of the load, as Timescale
        serves historical data), then statistics and the row count."""
        self._compress(c.info.dbname)
        c.execute("ANALYZE trades, book")
        return pg._count_rows(c)

    # -- SE -------------------------------------------------------------------------------

    def storage_bytes(self) -> dict[str, int]:
        """SE: the 30-day period alone in a fresh database ``se``, loaded and compressed as
        :meth:`load` does, after VACUUM and CHECKPOINT: ``hypertable_size`` of both tables
        (every chunk, compressed data, TOAST and indexes); beside it the same rows' size
        before compression, as the columnstore's statistics record it."""
        db = "se"
        self._fresh_database(db)
        self._load_parquet(db, self.params.days("month"))
        with self._connect(db) as c:
            c.execute("VACUUM trades, book")
            c.execute("CHECKPOINT")
            sizes = {t: int(pg._scalar(c, "SELECT hypertable_size(%s)", [t])) for t in pg.TABLES}
            before = after = 0
            for t in pg.TABLES:
                row = c.execute(COLUMNSTORE_STATS, [t]).fetchone()
                if row is None:
                    raise RuntimeError(f"no columnstore statistics for {t}")
                before, after = before + int(row[0]), after + int(row[1])
        return {"hypertable_size": sum(sizes.values()), **{f"{t}_total": n for t, n in sizes.items()},
                "uncompressed_bytes": before, "compressed_bytes": after}

    # -- ingest -------------------------------------------------------------------------

    def ingest_open(self, store: Path, durability: str | None = None) -> None:
        """PostgreSQL's ingest store with this engine's tables: hypertables kept in the
        rowstore, btree (sym, ts DESC) on each (``ingest.sql``)."""
        setting = self.durability_setting(durability)
        self.ingest_close()
        self._ensure_database(pg.INGEST_DB)
        marker = store / pg.INGEST_MARKER
        with self._connect(pg.INGEST_DB) as c:
            c.execute("CREATE EXTENSION IF NOT EXISTS timescaledb")
            exists = pg._scalar(c, "SELECT count(*) FROM timescaledb_information.hypertables "
                                   "WHERE hypertable_name = ANY(%s)", [list(pg.TABLES)])
            if not marker.exists() or exists != len(pg.TABLES):
                with c.transaction():
                    c.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(
                        sql.SQL(", ").join(sql.Identifier(t) for t in pg.TABLES)))
                    c.execute(SCHEMA)
                    c.execute(INGEST_INDEXES)
        # The tables are made; the rest (marker, reader connections) is PostgreSQL's.
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("ready\n")
        super().ingest_open(store, setting)

    def ingest_latest(self) -> pa.Table:
        with self._reader().cursor() as cur:
            cur.execute(LATEST)
            out = pg._ingest_arrow(None, cur)
        return out.set_column(1, "ts", out.column("ts").cast(SCHEMAS["book"].field("ts").type))

    def settings(self) -> dict[str, Any]:
        out = super().settings()
        c = self._conn()
        rows = c.execute("SELECT hypertable::text, segmentby, orderby "
                         "FROM timescaledb_information.hypertable_columnstore_settings").fetchall()
        out["columnstore"] = {t: {"segmentby": s, "orderby": o} for t, s, o in rows}
        return out
