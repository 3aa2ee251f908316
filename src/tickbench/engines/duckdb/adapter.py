"""DuckDB, in-process, over one database file in the run's working directory."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar

import duckdb
import pyarrow as pa

from tickbench.datasets.paper.schema import SCHEMAS, TABLES
from tickbench.engines.base import (
    BulkLoad,
    Engine,
    Ingest,
    IngestByKind,
    IngestClient,
    LoadFigures,
    SharedReaders,
    Storage,
    StoreByKind,
    StreamTarget,
    whole_store,
)
from tickbench.engines.duckdb.ingest import ArrowTarget, Writer
from tickbench.engines.duckdb.market import DURABILITY, PARAM, DuckDBMarket, duckdb_storage, run_bound

SCHEMA = (Path(__file__).parent / "schema.sql").read_text()
# The layout the queries rely on: row groups in this order, so zone maps prune by instrument
# and time. Every store (the query store, W's, SE's) is built in it, inside the clock.
SORT_KEY = "sym, exchange, ts"
# Each instrument's venues per day, from the book just written (see schema.sql).
VENUES = "INSERT INTO venues SELECT DISTINCT CAST(ts AS DATE), sym, exchange FROM book"
# DuckDB's memory budget, as a share of the machine's RAM (its default is 80 %): a sort larger
# than the budget spills to temp_directory instead of growing the process (the month's book
# sort peaked at 20 GB resident at SF 1 with the default).
MEMORY_SHARE = 0.4


def memory_budget() -> str:
    """``MEMORY_SHARE`` of physical RAM, in DuckDB's setting syntax (MiB)."""
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return f"{int(ram * MEMORY_SHARE) // 2**20}MiB"


def connect(path: Path, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open ``path`` under the memory budget, spilling to a directory beside it."""
    return duckdb.connect(str(path), read_only=read_only, config={
        "memory_limit": memory_budget(),
        "temp_directory": str(path.with_suffix(".tmp")),
    })


class Adapter(StoreByKind, IngestByKind, Engine, BulkLoad, Storage, Ingest, SharedReaders, DuckDBMarket):
    # Concurrency clients are processes, each opening the file read-only (start_shared).
    con: duckdb.DuckDBPyConnection | None = None
    ingest: duckdb.DuckDBPyConnection | None = None
    ingest_durability: ClassVar[dict[str, str]] = {
        "default": "autocommit: each write is a transaction, logged to the WAL at commit"}
    # The WAL is written before a commit returns, so a killed process loses no acknowledged row.
    ingest_durable: ClassVar[frozenset[str]] = frozenset({"default"})
    # An INSERT's rows are visible to every cursor of the connection once it commits.
    ingest_visible_on_commit: ClassVar[bool] = True
    ingest_one_process: ClassVar[str] = (
        "DuckDB lets one process open a database file for writing, and no other process open it meanwhile: "
        "writers and watcher are threads of the engine's process")
    users_limit: ClassVar[str] = (
        "one read-write process or several read-only ones (DuckDB's concurrency docs): the loaded store's "
        "read-write open is closed while the users, each a read-only open in a process of its own, run")

    @classmethod
    def probe(cls) -> str:
        return str(duckdb.__version__)

    @property
    def db_path(self) -> Path:
        return self.workdir / "tickbench.duckdb"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.con = connect(self.db_path)

    def start_shared(self) -> None:
        """Open the loaded file read-only, so several client processes (the concurrency suite)
        can open it together; a read-write open takes an exclusive file lock."""
        self.con = connect(self.db_path, read_only=True)

    def stop(self) -> None:
        if self.con is not None:
            self.con.close()
            self.con = None

    def _conn(self) -> duckdb.DuckDBPyConnection:
        if self.con is None:
            raise RuntimeError("DuckDB is not started")
        return self.con

    def _insert_parquet(self, con: duckdb.DuckDBPyConnection, table: str, days: list[str]) -> None:
        files = [str(f) for f in self.dataset.input_files(table, days, self.workdir)]
        # Sorted by (sym, exchange, ts) so row-group zone maps prune by instrument and time.
        con.execute(
            f"INSERT INTO {table} SELECT * FROM read_parquet($files) ORDER BY {SORT_KEY}",
            {"files": files},
        )

    def _load_paper(self) -> int:
        con = self._conn()
        con.execute(SCHEMA)
        days = self.params.load_days()
        for table in TABLES:
            self._insert_parquet(con, table, days)
        con.execute(VENUES)
        con.execute("CHECKPOINT")
        return _count_rows(con)

    def run_query(self, qid: str) -> pa.Table:
        return run_bound(self._conn(), self.query_text(qid), self.params.bindings())

    def explain(self, qid: str) -> str:
        """``EXPLAIN (ANALYZE, FORMAT json)`` as an indented tree: each operator with the rows
        it produced, its time, the row groups it scanned and its details (filters, keys).
        DuckDB's own box drawing puts a union's branches side by side, too wide to read."""
        sql = self.query_text(qid)
        binds = self.params.bindings()
        used = {name: binds[name] for name in PARAM.findall(sql)}
        rows = self._conn().execute("EXPLAIN (ANALYZE, FORMAT json) " + sql, used).fetchall()
        return plan_tree(json.loads(rows[0][-1]))

    def _fresh(self, scratch: Path, name: str) -> duckdb.DuckDBPyConnection:
        scratch.mkdir(parents=True, exist_ok=True)
        path = scratch / f"{name}.duckdb"
        for leftover in (path, path.with_suffix(".duckdb.wal")):
            leftover.unlink(missing_ok=True)
        return connect(path)

    def _bulk_load_paper(self, fmt: str, scratch: Path) -> LoadFigures:
        con = self._fresh(scratch, f"w_{fmt}")
        try:
            con.execute(SCHEMA)
            nbytes = 0
            for table in TABLES:
                if fmt == "csv":
                    path = self.dataset.csv_file(table)
                    nbytes += path.stat().st_size
                    # The CSV read with the table's own column types (as COPY would), then
                    # sorted into the queries' layout.
                    con.execute(f"INSERT INTO {table} SELECT * FROM read_csv($path, header = true, "
                                f"columns = {_columns(con, table)}) ORDER BY {SORT_KEY}", {"path": str(path)})
                else:
                    files = self.dataset.input_files(table, [self.dataset.bulk_day], scratch)
                    nbytes += sum(f.stat().st_size for f in files)
                    con.execute(f"INSERT INTO {table} SELECT * FROM read_parquet($files) ORDER BY {SORT_KEY}",
                                {"files": [str(f) for f in files]})
            con.execute(VENUES)  # the store the queries run on has it
            con.execute("CHECKPOINT")
            rows = _count_rows(con)
        finally:
            con.close()
        return LoadFigures(rows=rows, input_bytes=nbytes,
                           detail={"durability": DURABILITY, "layout": f"sorted by ({SORT_KEY})"})

    def _baseline_load_paper(self, fmt: str, scratch: Path) -> LoadFigures:
        con = self._fresh(scratch, f"baseline_{fmt}")
        try:
            nbytes = 0
            for table in TABLES:
                if fmt == "csv":
                    path = self.dataset.csv_file(table)
                    nbytes += path.stat().st_size
                    con.execute(f"CREATE TABLE {table} AS FROM read_csv($path)", {"path": str(path)})
                else:
                    files = self.dataset.input_files(table, [self.dataset.bulk_day], scratch)
                    nbytes += sum(f.stat().st_size for f in files)
                    con.execute(f"CREATE TABLE {table} AS FROM read_parquet($files)",
                                {"files": [str(f) for f in files]})
            con.execute("CHECKPOINT")
            rows = _count_rows(con)
        finally:
            con.close()
        return LoadFigures(rows=rows, input_bytes=nbytes, detail={"durability": DURABILITY})

    def _storage_bytes_paper(self) -> dict[str, int]:
        # The file does not shrink after DROP, so the 30-day period goes into a fresh file.
        scratch = self.workdir / "se"
        con = self._fresh(scratch, "month")
        try:
            con.execute(SCHEMA)
            for table in TABLES:
                self._insert_parquet(con, table, self.params.days("month"))
            con.execute(VENUES)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        return duckdb_storage([f for f in scratch.iterdir() if f.is_file()])

    def _ingest_open_paper(self, store: Path, durability: str | None = None) -> None:
        self.durability_setting(durability)
        store.mkdir(parents=True, exist_ok=True)
        self.ingest = duckdb.connect(str(store / "ingest.duckdb"))
        exists = self.ingest.sql("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'trades'").fetchall()
        if not exists[0][0]:
            self.ingest.execute(SCHEMA)

    def _ingest(self) -> duckdb.DuckDBPyConnection:
        if self.ingest is None:
            raise RuntimeError("the ingest store is not open")
        return self.ingest

    def ingest_client(self) -> IngestClient:
        return Writer(self._ingest().cursor())

    def _ingest_stream_target_paper(self) -> StreamTarget:
        return ArrowTarget(self._ingest(), SCHEMAS)

    def ingest_read(self, table: str, sym: str) -> pa.Table:
        order = "ts, trade_id" if table == "trades" else "ts"
        return self._ingest().cursor().sql(
            f"SELECT * FROM {table} WHERE sym = $sym ORDER BY {order}", params={"sym": sym}).to_arrow_table()

    def _ingest_count_paper(self, table: str, upto_ns: int | None = None) -> int:
        whole_store(upto_ns)
        return int(self._ingest().cursor().sql(f"SELECT count(*) FROM {table}").fetchall()[0][0])

    def ingest_latest(self) -> pa.Table:
        return self._ingest().cursor().sql(
            "SELECT sym, max(ts) AS ts, arg_max(b1price, ts) AS b1price, arg_max(a1price, ts) AS a1price "
            "FROM book GROUP BY sym ORDER BY sym").to_arrow_table()

    def _ingest_close_paper(self) -> None:
        if self.ingest is not None:
            self.ingest.close()
            self.ingest = None

    def settings(self) -> dict[str, Any]:
        con = self._conn()
        rows = con.sql(
            "SELECT name, value FROM duckdb_settings() WHERE name IN ('threads', 'memory_limit', "
            "'temp_directory')"
        ).fetchall()
        out = {str(k): str(v) for k, v in rows}
        out["memory_limit_rule"] = f"{MEMORY_SHARE:.0%} of physical RAM, spilling to temp_directory"
        out["sort_key"] = f"({SORT_KEY})"
        return out


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> str:
    """``table``'s columns as read_csv's ``columns`` struct literal ({'name': 'TYPE', …})."""
    rows = con.sql(f"SELECT column_name, column_type FROM (DESCRIBE {table})").fetchall()
    return "{" + ", ".join(f"'{name}': '{kind}'" for name, kind in rows) + "}"


def _count_rows(con: duckdb.DuckDBPyConnection) -> int:
    return sum(int(con.sql(f"SELECT count(*) FROM {t}").fetchall()[0][0]) for t in TABLES)


def plan_tree(profile: dict[str, Any]) -> str:
    """DuckDB's JSON profile as an indented operator tree (the root's collector nodes left out)."""
    lines: list[str] = []

    def walk(node: dict[str, Any], depth: int) -> None:
        kind = str(node.get("type", "?"))
        if kind in ("RESULT_COLLECTOR", "EXPLAIN_ANALYZE"):
            for child in node.get("children", []):
                walk(child, depth)
            return
        pad = "  " * depth
        scanned = (f", row groups {node['row_groups_scanned']}/{node['total_row_groups_to_scan']}"
                   if "total_row_groups_to_scan" in node else "")
        lines.append(f"{pad}{kind}: {node.get('intermediate_rows', 0):,} rows, "
                     f"{float(node.get('timing', 0.0)) * 1e3:.2f} ms{scanned}")
        for key, value in (node.get("extra_info") or {}).items():
            text = " ".join(str(value).split()) if not isinstance(value, list) else ", ".join(map(str, value))
            lines.append(f"{pad}    {key}: {text[:300]}")
        for child in node.get("children", []):
            walk(child, depth + 1)

    for op in profile.get("operator", []):
        walk(op, 0)
    return "\n".join(lines)
