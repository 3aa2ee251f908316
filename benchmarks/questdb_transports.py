"""QuestDB's result transports side by side: client time, server time and their gap, per query.

Starts QuestDB on a dataset (as ``tickbench run`` does), loads it, then runs each of the 14
published queries through every transport QuestDB 9.3 offers a Python client, interleaved in
one process (the order rotates each repetition), after one warm-up call per transport whose
answer is verified against the reference implementation:

* ``exec-json``: ``/exec`` JSON parsed by the standard library, rows transposed with ``zip``
  (the adapter's earlier path);
* ``exec-orjson``: ``/exec`` JSON parsed by orjson, a column at a time (the adapter's path for
  aggregated answers);
* ``exp-parquet``: ``/exp?fmt=parquet`` (uncompressed), read by pyarrow (the adapter's path for
  answers of thousands of rows);
* ``exp-csv``: ``/exp`` CSV read by pyarrow's multithreaded CSV reader;
* ``pg-binary``: the PostgreSQL wire protocol with psycopg's binary result format, rows turned
  into Arrow (QuestDB sends ``TIMESTAMP_NS`` as a PostgreSQL ``timestamp``: microseconds);
* ``pg-adbc``: ADBC's PostgreSQL driver (Arrow straight from the wire), tried once.

Server time: ``/exec``'s ``timings.execute`` (compilation inside it), ``/exp`` Parquet's span in QuestDB's
export log (see ``Adapter.query_server_ns``); ``/exp`` CSV and the PG wire report none.

The queries run under the commit mode the query store's load leaves (QuestDB's default, nosync, as
in ``tickbench run``), or ``--commit-mode``: under sync each Parquet export's log commits are
flushed to disk.

    python benchmarks/questdb_transports.py --data DIR [--repetitions 5] [--commit-mode sync] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import statistics
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import psycopg
import pyarrow as pa
import pyarrow.csv as pcsv

from tickbench import verify
from tickbench.datasets.base import open_dataset
from tickbench.datasets.paper import reference
from tickbench.datasets.paper.params import query_params
from tickbench.engines.questdb.adapter import Adapter
from tickbench.engines.questdb.server import JSON_TYPES, json_table
from tickbench.engines.registry import adapter
from tickbench.run.visibility import wait_visible
from tickbench.suites.published import QUERIES

PG_TYPES: dict[int, pa.DataType] = {1114: pa.timestamp("us"), 1184: pa.timestamp("us", "UTC"), 701: pa.float64(),
                                    700: pa.float32(), 20: pa.int64(), 23: pa.int32(), 16: pa.bool_(),
                                    1043: pa.string(), 25: pa.string()}

Result = tuple[pa.Table, int | None]


def legacy_json_table(answer: dict[str, Any]) -> pa.Table:
    """The adapter's earlier conversion of an /exec answer (rows transposed by ``zip``)."""
    columns = answer["columns"]
    values = list(zip(*answer["dataset"], strict=True)) if answer["dataset"] else [() for _ in columns]
    arrays = []
    for column, data in zip(columns, values, strict=True):
        target = JSON_TYPES[column["type"]]
        is_ts = pa.types.is_timestamp(target)
        arrays.append(pa.array(data, pa.string()).cast(target) if is_ts else pa.array(data, target))
    return pa.table(arrays, names=[c["name"] for c in columns])


class Transports:
    """Each transport as a function of the SQL text: the answer, and the server's time (ns)."""

    def __init__(self, engine: Adapter) -> None:
        self.engine = engine
        self.http = http.client.HTTPConnection(engine.host, engine.ports["http"], timeout=3600)
        user, password = engine.credentials() or ("admin", "quest")  # the run's secret; QuestDB's default
        self.pg = psycopg.connect(host=engine.host, port=engine.ports["pg"], user=user, password=password,
                                  dbname="qdb", autocommit=True)

    def get(self, path: str, query: dict[str, str]) -> bytes:
        self.http.request("GET", path + "?" + urllib.parse.urlencode(query), headers=self.engine.http_auth())
        resp = self.http.getresponse()
        body = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{path}: {resp.status} {body[:300]!r}")
        return body

    def exec_json(self, sql: str) -> Result:
        answer = json.loads(self.get("/exec", {"query": sql, "timings": "true"}))
        return legacy_json_table(answer), answer["timings"]["execute"]

    def exec_orjson(self, sql: str) -> Result:
        answer = orjson.loads(self.get("/exec", {"query": sql, "timings": "true"}))
        return json_table(answer), answer["timings"]["execute"]

    def exp_parquet(self, sql: str) -> Result:
        """The adapter's own Parquet path and server time (its kept-alive connection)."""
        return self.engine._export(sql, pool=self.engine.query_conns), None

    def exp_parquet_server(self) -> int | None:
        self.engine.last_exported = True
        return self.engine.query_server_ns()

    def exp_csv(self, sql: str) -> Result:
        body = self.get("/exp", {"query": sql, "fmt": "csv"})
        return pcsv.read_csv(pa.BufferReader(body)), None

    def pg_binary(self, sql: str) -> Result:
        with self.pg.cursor(binary=True) as cur:
            cur.execute(sql.rstrip().rstrip(";"))
            rows = cur.fetchall()
            desc = cur.description or []
        arrays = []
        for i, d in enumerate(desc):
            kind = PG_TYPES[d.type_code]
            arr = pa.array([r[i] for r in rows], kind)
            arrays.append(arr.cast(pa.timestamp("ns", "UTC")) if pa.types.is_timestamp(kind) else arr)
        return pa.table(arrays, names=[d.name for d in desc]), None


def adbc_attempt(engine: Adapter, sql: str) -> str:
    """Whether ADBC's PostgreSQL driver reads an answer from QuestDB's PG wire."""
    try:
        import adbc_driver_postgresql.dbapi as adbc

        user, password = engine.credentials() or ("admin", "quest")
        uri = f"postgresql://{user}:{urllib.parse.quote(password, safe='')}@{engine.host}:{engine.ports['pg']}/qdb"
        with adbc.connect(uri) as conn, conn.cursor() as cur:
            cur.execute(sql)
            return f"ok, {cur.fetch_arrow_table().num_rows} rows"
    except Exception as exc:
        return f"fails: {str(exc).splitlines()[0][:300]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--queries", default=",".join(q.id for q in QUERIES))
    ap.add_argument("--commit-mode", choices=("nosync", "async", "sync"),
                    help="cairo.commit.mode for the queries (default: the one the load leaves)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    ds = open_dataset(args.data)
    params = query_params(ds.params, args.seed)
    workdir = Path(tempfile.mkdtemp(prefix="tickbench-qdb-transports-", dir=os.environ.get("TMPDIR")))
    workdir.chmod(0o755)
    engine = adapter("questdb", workdir, ds, params)
    assert isinstance(engine, Adapter)
    engine.start()
    out: dict[str, Any] = {"data": str(args.data), "scale": ds.params.get("scale"), "repetitions": args.repetitions,
                           "machine": f"{platform.node()}, {os.cpu_count()} cores", "started": time.ctime(),
                           "queries": {}}
    try:
        t0 = time.perf_counter()
        engine.load()
        wait_visible(engine)
        if args.commit_mode:
            engine.restart_with(commit_mode=args.commit_mode)
        out["commit_mode"] = engine.commit_mode
        print(f"loaded {args.data} in {time.perf_counter() - t0:.0f} s; queries under cairo.commit.mode="
              f"{engine.commit_mode}", flush=True)
        tr = Transports(engine)
        funcs: dict[str, Callable[[str], Result]] = {
            "exec-json": tr.exec_json, "exec-orjson": tr.exec_orjson, "exp-parquet": tr.exp_parquet,
            "exp-csv": tr.exp_csv, "pg-binary": tr.pg_binary}
        for qid in args.queries.split(","):
            sql = engine._query_sql(qid)
            expected = reference.answer(qid, ds, params)
            record: dict[str, Any] = {"rows": expected.height, "transports": {}}
            for name, f in funcs.items():  # warm-up, verified
                table, _ = f(sql)
                if name == "exp-parquet":
                    tr.exp_parquet_server()
                verdict = verify.compare(verify.normalize(pl.from_arrow(table), expected), expected)  # type: ignore[arg-type]
                record["transports"][name] = {"verified": verdict.ok, "reason": verdict.reason, "client_ns": [],
                                              "server_ns": []}
            names = list(funcs)
            for rep in range(args.repetitions):
                for name in names[rep % len(names):] + names[:rep % len(names)]:
                    t = time.perf_counter_ns()
                    _, server = funcs[name](sql)
                    client = time.perf_counter_ns() - t
                    if name == "exp-parquet":
                        server = tr.exp_parquet_server()
                    rec = record["transports"][name]
                    rec["client_ns"].append(client)
                    if server is not None:
                        rec["server_ns"].append(server)
            if qid == "O-S":
                record["pg-adbc"] = adbc_attempt(engine, sql)
            out["queries"][qid] = record
            print(summary(qid, record), flush=True)
    finally:
        engine.stop()
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))


def summary(qid: str, record: dict[str, Any]) -> str:
    lines = [f"{qid} ({record['rows']:,} rows)"]
    for name, rec in record["transports"].items():
        client = statistics.median(rec["client_ns"]) / 1e6
        server = statistics.median(rec["server_ns"]) / 1e6 if rec["server_ns"] else None
        gap = f"gap {client - server:7.1f} ms ({(client - server) / client:4.0%})" if server is not None else ""
        srv = f"server {server:8.1f}" if server is not None else " " * 15
        ok = "ok" if rec["verified"] else f"WRONG: {rec['reason']}"
        lines.append(f"  {name:<12} client {client:8.1f}  {srv}  {gap:<24} {ok}")
    if "pg-adbc" in record:
        lines.append(f"  pg-adbc      {record['pg-adbc']}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
