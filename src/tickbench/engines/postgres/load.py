"""PostgreSQL's query store (:class:`PostgresLoad`): the load (binary ``COPY FROM STDIN``
encoded from Arrow, :mod:`.pgcopy`, into tables partitioned by day with their indexes), W
(tickbench's path and ``psql \\copy``) and SE (the period's partitions)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from psycopg import sql

from tickbench.datasets.paper.schema import SCHEMAS, TABLES
from tickbench.engines.base import BulkLoad, LoadFigures, Storage, storage_figures
from tickbench.engines.postgres import pgcopy
from tickbench.engines.postgres.server import (
    COUNT,
    DB,
    DROP_TABLES,
    LOOPBACK,
    MARKER,
    SUPERUSER,
    PostgresServer,
    bin_dir,
    partition_name,
    scalar,
)
from tickbench.engines.server import run_tool

COPY_WORKERS = 2  # COPYs at once (of the partitions of both tables): one per core
COPY_CHUNK_BYTES = 8 << 20
# The sizes of a list of partitions (SE).
# The write-ahead log on disk (pg_ls_waldir: superuser or pg_monitor), recycled segments included.
WAL_BYTES = "SELECT coalesce(sum(size), 0) FROM pg_ls_waldir()"
PARTITION_SIZES = ("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0), coalesce(sum(pg_table_size(c.oid)), 0) "
                   "FROM pg_class c WHERE c.oid = ANY(%s::regclass[])")


class PostgresLoad(PostgresServer, BulkLoad, Storage):
    """The query store's load, W and SE, on the running server."""

    def _fresh_schema(self) -> None:
        """Tickbench's schema on the external endpoint (created, with the marker, if absent)
        without tickbench's tables; a table of its names without the marker is refused."""
        self.check_endpoint()
        with self._connect(DB) as c:
            if not c.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [self.namespace]).fetchone():
                c.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.namespace)))
                c.execute(sql.SQL("COMMENT ON SCHEMA {} IS {}").format(sql.Identifier(self.namespace),
                                                                        sql.Literal(MARKER)))
            c.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(
                sql.SQL(", ").join(sql.Identifier(self.namespace, t) for t in TABLES)))

    def _fresh_database(self, name: str) -> None:
        """Database ``name`` with no tables of tickbench's: created if absent, else its tables
        dropped. A DROP DATABASE would force a checkpoint of the whole server (every dirty
        page of earlier loads) into the time of the load that follows."""
        self._ensure_database(name)
        with self._connect(name) as c:
            c.execute(DROP_TABLES)

    # -- schema and loading -------------------------------------------------------------

    def _copy_tables(self, dbname: str, sources: dict[str, Callable[[], Iterator[bytes]]], fmt: str) -> None:
        """COPY each relation's data (``sources[name]()`` yields COPY data in ``fmt``; a table
        or a partition) on its own connection, :data:`COPY_WORKERS` at a time in the order
        given. With :attr:`copy_freeze` the COPY follows a TRUNCATE in the same transaction, so
        it may FREEZE the rows and, with ``wal_level=minimal``, write no WAL."""
        def one(table: str) -> None:
            options = sql.SQL(fmt + (", FREEZE" if self.copy_freeze else ""))
            with self._connect(dbname) as c, c.transaction():
                if self.copy_freeze:
                    c.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(table)))
                stmt = sql.SQL("COPY {} FROM STDIN ({})").format(sql.Identifier(table), options)
                with c.cursor() as cur, cur.copy(stmt) as copy:
                    for chunk in sources[table]():
                        copy.write(chunk)

        with ThreadPoolExecutor(min(COPY_WORKERS, len(sources))) as pool:
            for f in [pool.submit(one, t) for t in sources]:
                f.result()

    def _targets(self, days: list[str]) -> dict[str, tuple[str, list[str]]]:
        """Where a load of ``days`` COPYs: each relation's (table, days), the book's first
        (the larger, so the COPYs end together); a day's partition, or the whole table."""
        tables = sorted(TABLES, key=lambda t: t != "book")
        if not self.partition_file:
            return {t: (t, days) for t in tables}
        return {partition_name(t, d): (t, [d]) for t in tables for d in days}

    def _finish(self, c: psycopg.Connection[Any]) -> int:
        """Indexes (:attr:`index_file`), statistics, and the row count."""
        if self.index_file:
            c.execute(self.engine_file(self.index_file))
        c.execute("ANALYZE trades, book")  # not the whole database: its catalogs need none
        return sum(int(scalar(c, COUNT[t])) for t in TABLES)

    def _parquet_source(self, table: str, days: list[str]) -> Callable[[], Iterator[bytes]]:
        """Binary COPY data of ``table``'s Parquet files for ``days``, in (sym, exchange, ts)
        order: the files are (day, exchange, sym) partitions in time order."""
        entries = sorted(self.dataset.entries(table, days), key=lambda e: (e["sym"], e["exchange"], e["day"]))
        return pgcopy.parquet_chunks([self.dataset.root / e["path"] for e in entries])

    def _load_files(self, dbname: str, days: list[str], sources: dict[str, Callable[[], Iterator[bytes]]],
                    fmt: str) -> int:
        """A fresh schema for ``days`` in ``dbname``, COPYed from ``sources``, indexed and analysed."""
        with self._connect(dbname) as c:
            self._create_schema(c, days)
            self._copy_tables(dbname, sources, fmt)
            return self._finish(c)

    def _load_parquet(self, dbname: str, days: list[str]) -> int:
        sources = {name: self._parquet_source(t, ds) for name, (t, ds) in self._targets(days).items()}
        return self._load_files(dbname, days, sources, "FORMAT binary")

    def _load_paper(self) -> int:
        days = self.params.load_days()
        if self.endpoint is None:
            self._fresh_database(DB)
        else:
            self._fresh_schema()
        rows = self._load_parquet(DB, days)
        # VACUUM resets the tables' insert counters, so autovacuum does not vacuum them in the
        # background during the queries (COPY FREEZE already set the visibility map); the
        # checkpoint leaves nothing for a timed checkpoint to write during them. On the user's
        # server there is no CHECKPOINT: it is server-wide (and needs a privileged role).
        self._conn().execute("VACUUM trades, book")
        if self.endpoint is None:
            self._conn().execute("CHECKPOINT")
        return rows

    # -- W and SE -------------------------------------------------------------------------

    def _bulk_load_paper(self, fmt: str, scratch: Path) -> LoadFigures:
        """W through tickbench's path into a fresh database ``w_<fmt>``: the CSV streamed
        as it is (``COPY … (FORMAT csv, HEADER)``), or the Parquet files as binary COPY;
        both tables in parallel, then the indexes and ANALYZE; committed on return."""
        db = f"w_{fmt}"
        self._fresh_database(db)
        if fmt == "parquet":
            day = [self.dataset.bulk_day]
            files = [f for t in TABLES for f in self.dataset.files(t, day)]
            return LoadFigures(rows=self._load_parquet(db, day), input_bytes=sum(f.stat().st_size for f in files),
                               detail={"database": db, "copy": "binary", "durability": self.w_durability})
        if fmt != "csv":
            raise ValueError(f"unknown format {fmt!r}")
        # The CSV is the one bulk-load day: a row of another day fails its partition's constraint.
        day = [self.dataset.bulk_day]
        paths = {t: self.dataset.csv_file(t) for t in TABLES}
        rows = self._load_files(db, day, {name: file_chunks(paths[t]) for name, (t, _) in self._targets(day).items()},
                                "FORMAT csv, HEADER")
        return LoadFigures(rows=rows, input_bytes=sum(p.stat().st_size for p in paths.values()),
                           detail={"database": db, "copy": "csv", "durability": self.w_durability})

    def _baseline_load_paper(self, fmt: str, scratch: Path) -> LoadFigures:
        """PostgreSQL's own simplest path into a fresh database ``baseline_<fmt>``: the schema,
        then ``psql -c "\\copy table FROM 'file' WITH (FORMAT csv, HEADER)"`` per table (psql
        reads the file, so the server user need not), then the same indexes and ANALYZE.
        PostgreSQL reads no Parquet: for ``parquet`` the files are first written as CSV with
        pyarrow into ``scratch``, and that counts in the time. The tables are partitioned as
        for W; ``\\copy`` into a partitioned table routes each row to its day's partition."""
        db = f"baseline_{fmt}"
        self._fresh_database(db)
        if fmt == "csv":
            paths = {t: self.dataset.csv_file(t) for t in TABLES}
            nbytes = sum(p.stat().st_size for p in paths.values())
        elif fmt == "parquet":
            scratch.mkdir(parents=True, exist_ok=True)
            paths, nbytes = {}, 0
            for t in TABLES:
                files = self.dataset.input_files(t, [self.dataset.bulk_day], scratch)
                nbytes += sum(f.stat().st_size for f in files)
                paths[t] = scratch / f"{t}.csv"
                pacsv.write_csv(pq.read_table(files, schema=SCHEMAS[t]), paths[t])
        else:
            raise ValueError(f"unknown format {fmt!r}")
        with self._connect(db) as c:
            self._create_schema(c, [self.dataset.bulk_day])
            for t, p in paths.items():
                self._psql(db, f"\\copy {t} FROM {psql_quoted(p)} WITH (FORMAT csv, HEADER)")
            rows = self._finish(c)
        return LoadFigures(rows=rows, input_bytes=nbytes, detail={"database": db, "tool": "psql \\copy",
                                                                  "durability": self.w_durability})

    def _psql(self, dbname: str, command: str) -> None:
        env = {"PGPASSWORD": self.password_file.read_text(), "PGTZ": "UTC"}
        run_tool([str(bin_dir() / "psql"), "-X", "-v", "ON_ERROR_STOP=1", "-h", LOOPBACK, "-p", str(self.port),
                  "-U", SUPERUSER, "-d", dbname, "-c", command], env, what=f"psql {command!r}")

    def _storage_bytes_paper(self) -> dict[str, int]:
        """SE: the 30-day period's partitions of the store :meth:`load` built (VACUUMed and
        CHECKPOINTed there; the queries since wrote nothing): heap, TOAST, free-space and
        visibility maps and indexes of each of its days' partitions of both tables, and the heap
        and index split. The other days loaded (the multi-exchange day) have their own partitions."""
        c = self._conn()
        sizes: dict[str, int] = {}
        heap = 0
        for t in TABLES:
            names = [partition_name(t, d) for d in self.params.days("month")]
            total, table = c.execute(PARTITION_SIZES, [names]).fetchone() or (0, 0)
            sizes[t], heap = int(total), heap + int(table)
        total = sum(sizes.values())
        return storage_figures("total_relation_size", heap, total - heap, wal_bytes(c),
                               **{f"{t}_total": n for t, n in sizes.items()})


def wal_bytes(c: psycopg.Connection[Any]) -> int:
    """Bytes of the server's write-ahead log on disk (the whole cluster's: tickbench's own server
    holds only the run's databases); an endpoint's user needs the pg_monitor role to see it."""
    try:
        row = c.execute(WAL_BYTES).fetchone()
    except psycopg.errors.InsufficientPrivilege as exc:
        raise RuntimeError("SE counts the write-ahead log's bytes (pg_ls_waldir): grant the endpoint's user "
                           "the pg_monitor role") from exc
    return int(row[0]) if row else 0


def file_chunks(path: Path) -> Callable[[], Iterator[bytes]]:
    """The file at ``path`` as COPY data, read in chunks."""
    def chunks() -> Iterator[bytes]:
        with open(path, "rb") as f:
            while chunk := f.read(COPY_CHUNK_BYTES):
                yield chunk
    return chunks


def psql_quoted(path: Path) -> str:
    """``path`` as a quoted argument of a psql meta-command (``\\copy … FROM 'file'``): psql
    ends the argument at a quote unless it is doubled (a directory named ``it's``); a line break
    would end the command, so such a path is refused, never passed on."""
    text = str(path)
    if "\n" in text or "\r" in text:
        raise ValueError(f"{text!r}: psql's \\copy cannot take a path with a line break")
    return "'" + text.replace("'", "''") + "'"
