"""QuestDB's query store (:class:`QuestDBLoad`): the tables of ``schema.sql`` loaded over ILP
from the dataset's Parquet, W (``/imp`` for CSV, ``read_parquet()`` for Parquet, beside QuestDB's
own simplest paths) and SE (the period's partitions as QuestDB reports them)."""

from __future__ import annotations

import json
import shutil
import urllib.parse
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from questdb import Sender

from tickbench.datasets.paper.schema import TABLES
from tickbench.engines.base import BulkLoad, LoadFigures, Storage, storage_figures
from tickbench.engines.questdb.schema import SYMBOLS, TS_PATTERN, imp_schema
from tickbench.engines.questdb.server import DEFAULT_COMMIT_MODE, QUERY_COMMIT_MODE, QuestDBServer


class QuestDBLoad(QuestDBServer, BulkLoad, Storage):
    """The query store's load, W and SE, on the running server."""

    # ---- loading ---------------------------------------------------------------------------

    def _send_parquet(self, sender: Sender, table: str, target: str, days: Iterable[str]) -> int:
        """Send ``table``'s Parquet files of ``days`` to ``target`` over ILP, one day at a time
        in ts order (in-order appends, no out-of-order merges); the number of rows sent."""
        rows = 0
        for day in days:
            files = self.dataset.files(table, [day])
            if not files:
                continue
            frame = pa.concat_tables(
                [pq.read_table(f, read_dictionary=SYMBOLS[table]) for f in files]).sort_by("ts")
            sender.dataframe(frame.to_pandas(), table_name=target, symbols=SYMBOLS[table], at="ts")
            rows += frame.num_rows
        return rows

    def _count(self, names: Iterable[str]) -> int:
        return sum(int(self._exec(f"SELECT count() FROM {n}")["dataset"][0][0]) for n in names)

    def _load_paper(self) -> int:
        """The query data over ILP; returns the rows acknowledged (visible once
        :meth:`pending_visibility` is False)."""
        if self.endpoint is not None:
            self.check_endpoint()
        for table in TABLES:
            if self.endpoint is not None:
                self._mark(self.table(table))
            self._create(table, self.table(table))
        days = self.params.load_days()
        with self._sender() as sender:
            rows = sum(self._send_parquet(sender, table, self.table(table), days) for table in TABLES)
            sender.flush()
        self._await(self.table(t) for t in TABLES)
        self.into_query_mode()
        return rows

    def into_query_mode(self) -> None:
        """After a query store's load (the paper's and the market's alike): its rows are committed
        durably under sync; the query cells run under :data:`QUERY_COMMIT_MODE`, the server
        restarted into it (on tickbench's own server only)."""
        if self.endpoint is None:
            self.restart_with(commit_mode=QUERY_COMMIT_MODE)

    # ---- W ---------------------------------------------------------------------------------

    def _imp(self, name: str, path: Path, schema: list[dict[str, str]],
             extra: dict[str, str] | None = None) -> dict[str, Any]:
        """POST the CSV file ``path`` to ``/imp`` into table ``name``, streamed from disk."""
        boundary = uuid.uuid4().hex
        head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"schema\"\r\n\r\n"
                f"{json.dumps(schema)}\r\n"
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"data\"; "
                f"filename=\"{path.name}\"\r\n\r\n").encode()
        tail = f"\r\n--{boundary}--\r\n".encode()
        query = {"name": name, "timestamp": "ts", "partitionBy": "DAY", "fmt": "json", **(extra or {})}
        conn = self._conn()
        try:
            conn.putrequest("POST", "/imp?" + urllib.parse.urlencode(query))
            conn.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
            conn.putheader("Content-Length", str(len(head) + path.stat().st_size + len(tail)))
            for key, value in self.http_auth().items():
                conn.putheader(key, value)
            conn.endheaders()
            conn.send(head)
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    conn.send(chunk)
            conn.send(tail)
            resp = conn.getresponse()
            body = resp.read()
        finally:
            conn.close()
        answer: dict[str, Any] = json.loads(body)
        if resp.status != 200 or answer.get("status") != "OK" or answer.get("rowsRejected", 0):
            detail = {k: v for k, v in answer.items() if k != "columns"}
            raise RuntimeError(f"QuestDB /imp of {path.name} into {name} failed: {detail}")
        return answer

    def _figures(self, names: dict[str, str], nbytes: int, path_name: str) -> LoadFigures:
        """W's figures for tables ``names``: counted by the runner once they are applied."""
        self._await(names.values())
        return LoadFigures(rows=0, input_bytes=nbytes, count=lambda: self._count(names.values()),
                           detail={"path": path_name, "tables": list(names.values()),
                                   "durability": self._w_durability()})

    def bulk_prepare(self) -> None:
        """W commits durably, on either dataset (M-W's preparation is this one): the server runs
        under sync again (the query cells left it in
        :data:`~tickbench.engines.questdb.server.QUERY_COMMIT_MODE`), restarted before the clock."""
        if self.endpoint is None:
            self.restart_with(commit_mode=DEFAULT_COMMIT_MODE)

    def _bulk_load_paper(self, fmt: str, scratch: Path) -> LoadFigures:
        """W into fresh tables ``w_<fmt>_<table>`` of the running server (``scratch`` is not
        used: the server keeps its tables in its own root). CSV goes through /imp, QuestDB's CSV
        path, into tables created from schema.sql; Parquet through QuestDB's own reader."""
        names = {t: f"w_{fmt}_{t}" for t in TABLES}
        nbytes = 0
        if fmt == "csv":
            for table, name in names.items():
                self._exec(f"DROP TABLE IF EXISTS {name}")
                path = self.dataset.csv_file(table)
                nbytes += path.stat().st_size
                # /imp creates the table (WAL, by day) with schema.sql's column types; cheaper
                # than a CREATE TABLE beforehand. atomicity=abort: a row that does not parse
                # fails the load instead of being skipped.
                if self.dataset.manifest.csv[table]["rows"]:
                    self._imp(name, path, imp_schema(table), {"atomicity": "abort"})
                else:  # /imp refuses a header alone ("not enough lines"): the empty table
                    self._create(table, name)
            return self._figures(names, nbytes, "REST /imp with schema.sql's column types")
        if fmt != "parquet":
            raise ValueError(f"unknown format {fmt!r}")
        # QuestDB's own Parquet reader into tables made from schema.sql, all of a table's
        # files in one time-ordered INSERT (one commit, no out-of-order merges); the reader
        # reads only under the server's import root, so the files are copied there first.
        for table, name in names.items():
            self._create(table, name)
            rels, size = self._stage_parquet(table, "w")
            nbytes += size
            union = " UNION ALL ".join(f"SELECT * FROM read_parquet('{r}')" for r in rels)
            self._exec(f"INSERT INTO {name} SELECT * FROM ({union}) ORDER BY ts")
        return self._figures(names, nbytes, "read_parquet() into tables created from schema.sql")

    def _w_durability(self) -> str:
        if self.commit_mode == "sync":
            return ("cairo.commit.mode=sync: each commit (WAL segment and sequencer log, then the table "
                    "files as the WAL is applied) is flushed to disk before it is acknowledged; W's clock "
                    "stops once the rows are applied (queryable)")
        return f"cairo.commit.mode={self.commit_mode}: commits are not flushed to disk before they are acknowledged"

    def _stage_parquet(self, table: str, stage_name: str) -> tuple[list[str], int]:
        """Copy ``table``'s bulk-day Parquet files under the server's import root, the only
        place ``read_parquet()`` reads; their paths relative to it, and their bytes."""
        stage = self.root / "import" / stage_name / table
        shutil.rmtree(stage, ignore_errors=True)
        stage.mkdir(parents=True)
        rels, size = [], 0
        for i, f in enumerate(self.dataset.input_files(table, [self.dataset.bulk_day], self.workdir)):
            size += f.stat().st_size
            copy = stage / f"{i}.parquet"
            shutil.copyfile(f, copy)
            copy.chmod(0o644)  # read by the server's user
            rels.append(str(copy.relative_to(self.root / "import")))
        return rels, size

    def _baseline_load_paper(self, fmt: str, scratch: Path) -> LoadFigures:
        """QuestDB's own simplest path on the same files, into tables it creates itself:
        CSV through /imp with only the timestamp's format given (it detects the other types);
        Parquet through ``CREATE TABLE AS`` / ``INSERT`` from ``read_parquet()``, which reads only
        under the server's import root, so the files are copied there first (and counted)."""
        names = {t: f"b_{fmt}_{t}" for t in TABLES}
        for name in names.values():
            self._exec(f"DROP TABLE IF EXISTS {name}")
        nbytes = 0
        if fmt == "csv":
            for table, name in names.items():
                path = self.dataset.csv_file(table)
                nbytes += path.stat().st_size
                if self.dataset.manifest.csv[table]["rows"]:
                    self._imp(name, path, [{"name": "ts", "type": "TIMESTAMP_NS", "pattern": TS_PATTERN}])
                else:  # /imp refuses a header alone ("not enough lines"), and infers no types from it
                    self._create(table, name)
            return self._figures(names, nbytes, "REST /imp, table created by QuestDB")
        if fmt != "parquet":
            raise ValueError(f"unknown format {fmt!r}")
        for table, name in names.items():
            rels, size = self._stage_parquet(table, "baseline")
            nbytes += size
            for i, rel in enumerate(rels):
                if i == 0:
                    self._exec(f"CREATE TABLE {name} AS (SELECT * FROM read_parquet('{rel}') "
                               "ORDER BY ts) TIMESTAMP(ts) PARTITION BY DAY")
                else:
                    self._exec(f"INSERT INTO {name} SELECT * FROM read_parquet('{rel}')")
        return self._figures(names, nbytes, "read_parquet() into CREATE TABLE AS / INSERT")

    # ---- SE --------------------------------------------------------------------------------

    def _storage_bytes_paper(self) -> dict[str, int]:
        """SE, after the store has settled: the server is restarted first, because an open
        table writer keeps its files extended (16 MiB per symbol dictionary, more for the
        last partition) until it is released; closing it trims them to their data.

        Counted: the 30-day period's partitions (the multi-exchange day, when outside the
        period, is a partition of its own and is left out) and each table's table-wide files,
        split by :meth:`settled_storage`."""
        return self.settled_storage({t: set(self.params.days("month")) for t in TABLES})

    def settled_storage(self, tables: dict[str, set[str] | None]) -> dict[str, int]:
        """SE's figures of ``tables`` (each with the partitions counted, ``None`` for an
        unpartitioned table), after a restart that releases the table writers: the partitions
        as ``table_partitions()`` reports them and the table-wide files (symbol dictionaries,
        metadata) are data, the partitions' sym index files (``.k``, ``.v``) the index, and the
        tables' WAL directories, transient once applied, the log."""
        self.stop()
        self.start()
        dirs = {r["table_name"]: r["directoryName"]
                for r in self._rows("SELECT table_name, directoryName FROM tables()")}
        table_files = partitions = index = log = 0
        for table, days in tables.items():
            sizes = None if days is None else {
                str(r["name"]): int(r["diskSize"])
                for r in self._rows(f"SELECT name, diskSize FROM table_partitions('{table}')") if r["name"] in days}
            own, parts, i, lg = table_storage(self.root / "db" / dirs[table], sizes)
            table_files, partitions, index, log = table_files + own, partitions + parts, index + i, log + lg
        return storage_figures("bytes_on_disk", table_files + partitions - index, index, log,
                               partitions=partitions, table_files=table_files)


def _bytes_under(path: Path, suffixes: tuple[str, ...] = ()) -> int:
    """Bytes of the files under ``path`` (only those ending in ``suffixes``, when given)."""
    return sum(p.stat().st_size for p in path.rglob("*")
               if p.is_file() and not p.is_symlink() and (not suffixes or p.name.endswith(suffixes)))


def table_storage(table_dir: Path, partitions: dict[str, int] | None) -> tuple[int, int, int, int]:
    """``(table files, partitions, index, log)`` bytes of one QuestDB table directory:
    ``partitions`` maps each counted partition to its ``diskSize`` (``None``: an unpartitioned
    table, whose ``default/`` counts with its table files). The table directory's own files are
    symbol dictionaries (whose ``.k`` and ``.v`` are the dictionary's own lookup) and metadata;
    a partition's newest directory (``<name>`` or ``<name>.<txn>``, once rewritten) holds its
    sym index files (``.k``, ``.v``), the index; ``wal*`` and ``txn_seq`` are the log."""
    own = sum(p.stat().st_size for p in table_dir.iterdir() if p.is_file() and not p.is_symlink())
    log = sum(_bytes_under(p) for p in table_dir.iterdir()
              if p.is_dir() and not p.is_symlink() and (p.name.startswith("wal") or p.name == "txn_seq"))
    if partitions is None:
        return (own + _bytes_under(table_dir / "default"), 0, _bytes_under(table_dir / "default", (".k", ".v")),
                log)
    index = 0
    for name in partitions:
        versions = [p for p in table_dir.iterdir() if p.is_dir() and (p.name == name or p.name.startswith(name + "."))]
        if versions:
            newest = max(versions, key=lambda p: int(p.name.partition(".")[2] or -1))
            index += _bytes_under(newest, (".k", ".v"))
    return own, sum(partitions.values()), index, log
