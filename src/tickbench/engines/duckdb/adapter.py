"""DuckDB, in-process, over one database file in the run's working directory."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from tickbench.data.calendar import BULK_DAY
from tickbench.engines.base import Engine, LoadFigures

SCHEMA = (Path(__file__).parent / "schema.sql").read_text()
PARAM = re.compile(r"\$([a-z_]+)")
TABLES = ("trades", "book")


class Adapter(Engine):
    con: duckdb.DuckDBPyConnection | None = None

    @classmethod
    def probe(cls) -> str:
        return str(duckdb.__version__)

    @property
    def db_path(self) -> Path:
        return self.workdir / "tickbench.duckdb"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.con = duckdb.connect(str(self.db_path))

    def stop(self) -> None:
        if self.con is not None:
            self.con.close()
            self.con = None

    def _conn(self) -> duckdb.DuckDBPyConnection:
        if self.con is None:
            raise RuntimeError("DuckDB is not started")
        return self.con

    def _insert_parquet(self, con: duckdb.DuckDBPyConnection, table: str, days: list[str]) -> None:
        files = [str(f) for f in self.dataset.files(table, days)]
        # Sorted by (sym, exchange, ts) so row-group zone maps prune by instrument and time.
        con.execute(
            f"INSERT INTO {table} SELECT * FROM read_parquet($files) ORDER BY sym, exchange, ts",
            {"files": files},
        )

    def load(self) -> int:
        con = self._conn()
        con.execute(SCHEMA)
        days = self.params.days("month") + self.params.days("multi_day")
        for table in TABLES:
            self._insert_parquet(con, table, days)
        con.execute("CHECKPOINT")
        return _count_rows(con)

    def run_query(self, qid: str) -> pa.Table:
        sql = self.query_text(qid)
        binds = self.params.bindings()
        used = {name: binds[name] for name in PARAM.findall(sql)}
        return self._conn().sql(sql, params=used).to_arrow_table()

    def _fresh(self, scratch: Path, name: str) -> duckdb.DuckDBPyConnection:
        scratch.mkdir(parents=True, exist_ok=True)
        path = scratch / f"{name}.duckdb"
        for leftover in (path, path.with_suffix(".duckdb.wal")):
            leftover.unlink(missing_ok=True)
        return duckdb.connect(str(path))

    def bulk_load(self, fmt: str, scratch: Path) -> LoadFigures:
        con = self._fresh(scratch, f"w_{fmt}")
        try:
            con.execute(SCHEMA)
            nbytes = 0
            for table in TABLES:
                if fmt == "csv":
                    path = self.dataset.csv_file(table)
                    nbytes += path.stat().st_size
                    con.execute(f"COPY {table} FROM '{path}' (FORMAT csv, HEADER true)")
                else:
                    files = self.dataset.files(table, [BULK_DAY.isoformat()])
                    nbytes += sum(f.stat().st_size for f in files)
                    con.execute(f"INSERT INTO {table} SELECT * FROM read_parquet($files)",
                                {"files": [str(f) for f in files]})
            con.execute("CHECKPOINT")
            rows = _count_rows(con)
        finally:
            con.close()
        return LoadFigures(rows=rows, input_bytes=nbytes)

    def baseline_load(self, fmt: str, scratch: Path) -> LoadFigures:
        con = self._fresh(scratch, f"baseline_{fmt}")
        try:
            nbytes = 0
            for table in TABLES:
                if fmt == "csv":
                    path = self.dataset.csv_file(table)
                    nbytes += path.stat().st_size
                    con.execute(f"CREATE TABLE {table} AS FROM read_csv('{path}')")
                else:
                    files = self.dataset.files(table, [BULK_DAY.isoformat()])
                    nbytes += sum(f.stat().st_size for f in files)
                    con.execute(f"CREATE TABLE {table} AS FROM read_parquet($files)",
                                {"files": [str(f) for f in files]})
            con.execute("CHECKPOINT")
            rows = _count_rows(con)
        finally:
            con.close()
        return LoadFigures(rows=rows, input_bytes=nbytes)

    def storage_bytes(self) -> dict[str, int]:
        # The file does not shrink after DROP, so the 30-day period goes into a fresh file.
        scratch = self.workdir / "se"
        con = self._fresh(scratch, "month")
        try:
            con.execute(SCHEMA)
            for table in TABLES:
                self._insert_parquet(con, table, self.params.days("month"))
            con.execute("CHECKPOINT")
        finally:
            con.close()
        return {"database_file": sum(f.stat().st_size for f in scratch.iterdir())}

    def settings(self) -> dict[str, Any]:
        con = self._conn()
        rows = con.sql(
            "SELECT name, value FROM duckdb_settings() WHERE name IN ('threads', 'memory_limit')"
        ).fetchall()
        return {str(k): str(v) for k, v in rows}


def _count_rows(con: duckdb.DuckDBPyConnection) -> int:
    return sum(int(con.sql(f"SELECT count(*) FROM {t}").fetchall()[0][0]) for t in TABLES)
