"""A toy market engine for the users cells' tests: DuckDB over Arrow tables read from the market
dataset's Parquet files (ts kept as int64 ns beside, so nothing is truncated to µs), written as
a plug-in package (one engine folder) in a temporary directory, so the runner discovers it as it
discovers an engine outside tickbench's tree. It answers the three multi-user queries; the
others are declared unsupported. Each instance opens its own connection (a user's own client)."""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import pytest

from tickbench.engines.base import PACKAGES_ENV
from tickbench.suites.market import QUERY_IDS

TOY_TOML = '''
title = "Toy market engine (DuckDB over the Parquet files)"
kind = "embedded"
language = "SQL (DuckDB)"
extension = "sql"
install = "nothing to install: DuckDB comes with tickbench's engines"
kinds = ["market"]

[unsupported]
{unsupported}
'''

TOY_ADAPTER = '''
"""A toy market engine: DuckDB connections over Arrow tables of the dataset's days."""

from __future__ import annotations

import copy
import os
import re
import threading
import time
from typing import Callable, ClassVar

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pathlib import Path

from tickbench.engines.base import (
    Engine,
    Ingest,
    IngestReader,
    ProcessClients,
    SharedReaders,
    StreamSender,
    StreamTarget,
    upto_all,
)

DECODE_S = 0.0  # a slow client: seconds its decoding of each answer takes (install_toy's decode_s)
PIDS_FILE = ""  # where each client process of its own writes its pid (install_toy's pids_file)
SLOW_FIRST_S = 0.0  # a slow warm-up: user 1's first query on each client takes this long (install_toy's)
USER_WORK_S = 0.0  # users' work of different sizes: user i's every query takes (i + 1) times this at least


class Adapter(Engine, SharedReaders):
    con: duckdb.DuckDBPyConnection | None = None
    tables: ClassVar[dict[str, pa.Table]] = {}  # read once per process, shared by every connection
    lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def probe(cls) -> str:
        return "toy " + duckdb.__version__

    def _tables(self) -> dict[str, pa.Table]:
        with self.lock:
            if not self.tables:
                for name in ("quotes", "trades"):
                    files = self.dataset.files(name, self.params.load_days())
                    t = pa.concat_tables(pq.read_table(f) for f in files)
                    self.tables[name] = t.append_column("tsn", pc.cast(t["ts"], pa.int64()))
            return self.tables

    def start(self) -> None:
        self.con = duckdb.connect()
        for name, table in self._tables().items():
            self.con.register(name, table)

    def start_shared(self) -> None:
        self.start()  # a connection of its own over the shared tables: nothing is locked
        if PIDS_FILE:
            with open(PIDS_FILE, "a") as f:
                f.write(str(os.getpid()) + " ")

    def open_client(self, params: object) -> "Adapter":
        client = copy.copy(self)
        client.start()  # a connection of its own in this process
        client.set_params(params)  # type: ignore[arg-type]
        return client

    def client_decoder(self, qid: str, answer: pa.Table) -> Callable[[], object]:
        decode = super().client_decoder(qid, answer)

        def run() -> object:
            time.sleep(DECODE_S)
            return decode()
        return run

    def stop(self) -> None:
        if self.con is not None:
            self.con.close()
            self.con = None

    def load(self) -> int:  # the toy serves the market dataset alone (engine.toml's kinds)
        return sum(t.num_rows for t in self._tables().values())

    def run_query(self, qid: str) -> pa.Table:
        assert self.con is not None
        if SLOW_FIRST_S and self.params.user == 1 and not self.__dict__.get("warm"):  # type: ignore[attr-defined]
            self.warm = True
            time.sleep(SLOW_FIRST_S)
        time.sleep(USER_WORK_S * (self.params.user + 1))  # type: ignore[attr-defined]
        table = bound(self.con, self.query_text(qid), self.params)
        time.sleep(DECODE_S)  # the client's decoding of the answer
        return table


def bound(con: duckdb.DuckDBPyConnection, sql: str, params: object) -> pa.Table:
    binds = params.bindings()  # type: ignore[attr-defined]
    names = dict.fromkeys(re.findall(r"[$]([a-z_0-9]+)", sql))
    return con.sql(sql, params={n: binds[n] for n in names}).to_arrow_table()
'''

INGEST_ADAPTER = '''

import time

SEND_DELAY_S = 0.0  # a slow streaming path: seconds each write takes (install_toy's send_delay_s)

class _Sender(StreamSender):
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.cur = con.cursor()

    def send(self, payload: object) -> None:
        time.sleep(SEND_DELAY_S)
        table, batch = payload  # type: ignore[misc]
        self.cur.register("payload", batch)
        self.cur.execute(f"INSERT INTO {table} SELECT * FROM payload")
        self.cur.unregister("payload")

    def close(self) -> None:
        self.cur.close()


class _Target(StreamTarget):
    in_process = True
    path = "Arrow batches inserted through a DuckDB cursor of the ingest store"

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def encode(self, table: str, batch: pa.Table) -> object:
        return table, batch.append_column("tsn", pc.cast(batch["ts"], pa.int64()))

    def connect(self) -> StreamSender:
        return _Sender(self.con)


class _Reader(IngestReader):
    def __init__(self, engine: "IngestAdapter") -> None:
        assert engine.ingest_con is not None
        self.engine, self.cur = engine, engine.ingest_con.cursor()

    def run_query(self, qid: str, params: object) -> pa.Table:
        return bound(self.cur, self.engine.query_text(qid), params)

    def close(self) -> None:
        self.cur.close()


class IngestAdapter(Adapter, Ingest):
    ingest_con: duckdb.DuckDBPyConnection | None = None

    def ingest_open(self, store: Path, durability: str | None = None) -> None:  # one setting: DuckDB's
        store.mkdir(parents=True, exist_ok=True)
        self.ingest_con = duckdb.connect(str(store / "ingest.duckdb"))
        for name in ("quotes", "trades"):
            files = self.dataset.files(name, [self.params.D])
            self.ingest_con.execute(f"CREATE TABLE {name} AS SELECT *, 0::BIGINT AS tsn FROM read_parquet(?) LIMIT 0",
                                    [[str(f) for f in files]])

    def ingest_stream_target(self) -> StreamTarget:
        assert self.ingest_con is not None
        return _Target(self.ingest_con)

    def ingest_count(self, table: str, upto_ns: int | None = None) -> int:
        assert self.ingest_con is not None and table in ("quotes", "trades")
        cur = self.ingest_con.cursor()
        try:
            rows = cur.execute(f"SELECT count(*) FROM {table} WHERE tsn <= ?", [upto_all(upto_ns)]).fetchall()
            return int(rows[0][0])
        finally:
            cur.close()

    def ingest_reader(self) -> IngestReader:
        return _Reader(self)

    def ingest_close(self) -> None:
        if self.ingest_con is not None:
            self.ingest_con.close()
            self.ingest_con = None
'''

QUERIES = {
    "M-VWAB-12D.sql": """
SELECT sym, CAST(make_timestamp(tsn // 1000) AS DATE) AS day, sum(bid * bsize) / sum(bsize) AS vwab
FROM quotes
WHERE list_contains($vwab_syms, sym) AND tsn >= epoch_ns($vwab_start) AND tsn < epoch_ns($vwab_end)
GROUP BY ALL ORDER BY sym, day;
""",
    "M-STATS-UI.sql": """
WITH req AS (SELECT unnest($ui_req) AS req, unnest($ui_from) AS f, unnest($ui_to) AS t),
pairs AS (SELECT unnest($ui_pair_req) AS req, unnest($ui_pair_sym) AS sym),
x AS (SELECT p.req, tr.sym, tr.price, tr.amount, tr.tsn, tr.exchange, tr.trade_id
      FROM pairs p JOIN req r USING (req)
      JOIN trades tr ON tr.sym = p.sym AND tr.tsn >= epoch_ns(r.f) AND tr.tsn < epoch_ns(r.t))
SELECT req, sym, count(*) AS n, sum(amount) AS volume, sum(price * amount) / sum(amount) AS vwap,
       arg_min(price, (tsn, exchange, trade_id)) AS open, max(price) AS high, min(price) AS low,
       arg_max(price, (tsn, exchange, trade_id)) AS close, stddev_samp(price) AS sd
FROM x GROUP BY req, sym ORDER BY req, sym;
""",
    "M-SNAP.sql": """
WITH grid AS (SELECT t, epoch_ns(t) AS tn, sym
              FROM (SELECT unnest($t_times) AS t) CROSS JOIN (SELECT unnest($b_syms) AS sym)),
lt AS (SELECT g.t, g.sym, arg_max(tr.price, (tr.tsn, tr.exchange, tr.trade_id)) AS last_price,
              arg_max(tr.amount, (tr.tsn, tr.exchange, tr.trade_id)) AS last_amount
       FROM grid g JOIN trades tr ON tr.sym = g.sym AND tr.tsn <= g.tn AND tr.tsn >= epoch_ns($d_start)
       GROUP BY g.t, g.sym),
lq AS (SELECT g.t, g.sym, q.exchange, arg_max(q.bid, (q.tsn, q.seq)) AS bid, arg_max(q.ask, (q.tsn, q.seq)) AS ask
       FROM grid g JOIN quotes q ON q.sym = g.sym AND q.tsn <= g.tn AND q.tsn >= epoch_ns($d_start)
       GROUP BY g.t, g.sym, q.exchange),
bk AS (SELECT t, sym, max(bid) AS nbb, min(ask) AS nbo FROM lq GROUP BY t, sym)
SELECT g.t, g.sym, lt.last_price, lt.last_amount, bk.nbb, bk.nbo
FROM grid g LEFT JOIN lt USING (t, sym) LEFT JOIN bk USING (t, sym) ORDER BY g.t, g.sym;
""",
}
ANSWERED = ("M-VWAB-12D", "M-SNAP", "M-STATS-UI")


def install_toy(root: Path, monkeypatch: pytest.MonkeyPatch, name: str = "toymarket",
                extra_unsupported: dict[str, str] | None = None, query_override: dict[str, str] | None = None,
                ingest: bool = False, send_delay_s: float = 0.0, threads: bool = False, decode_s: float = 0.0,
                pids_file: Path | None = None, slow_first_s: float = 0.0, user_work_s: float = 0.0) -> str:
    """Write the toy engine ``name`` into a package under ``root`` and make it discoverable (this
    process and the engine processes it spawns); with ``ingest`` it also has the market ingest
    capability (a DuckDB store written by cursors of one connection), each write taking at least
    ``send_delay_s``. Its users are client processes of their own (each writing its pid to
    ``pids_file``), or with ``threads`` threads of the engine's process, each with a connection of
    its own (an engine that admits one open per process, as chDB); its client takes ``decode_s``
    to decode each answer, user 1's first query on a client ``slow_first_s`` (a slow
    warm-up), and user i's every query ``(i + 1) * user_work_s`` more (users' work of different
    sizes). Returns the engine's name."""
    # A package name of its own per install: the registry caches adapter classes by module.
    package = f"{name}_" + re.sub(r"\W", "_", root.name)
    pkg = root / "plugins" / package
    folder = pkg / name
    (folder / "queries").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (folder / "__init__.py").write_text("")
    gaps = {q: "the toy answers the multi-user queries only" for q in QUERY_IDS if q not in ANSWERED}
    gaps.update(extra_unsupported or {})
    declared = "\n".join(f'"{k}" = "{v}"' for k, v in gaps.items())
    (folder / "engine.toml").write_text(TOY_TOML.format(unsupported=declared))
    adapter = textwrap.dedent(TOY_ADAPTER)
    adapter = adapter.replace("DECODE_S = 0.0", f"DECODE_S = {float(decode_s)!r}")
    adapter = adapter.replace('PIDS_FILE = ""', f"PIDS_FILE = {str(pids_file or '')!r}")
    adapter = adapter.replace("SLOW_FIRST_S = 0.0", f"SLOW_FIRST_S = {float(slow_first_s)!r}")
    adapter = adapter.replace("USER_WORK_S = 0.0", f"USER_WORK_S = {float(user_work_s)!r}")
    if threads:
        adapter = adapter.replace("class Adapter(Engine, SharedReaders):",
                                  "class Adapter(Engine, ProcessClients):\n"
                                  '    users_limit = "one open per process (the toy, as chDB)"')
    if ingest:
        adapter = adapter.replace("class Adapter(Engine, SharedReaders):",
                                  "class _Base(Engine, SharedReaders):")
        adapter += INGEST_ADAPTER.replace("(Adapter, Ingest)", "(_Base, Ingest)")
        adapter = adapter.replace('"IngestAdapter"', '"Adapter"').replace("class IngestAdapter(", "class Adapter(")
        adapter = adapter.replace("SEND_DELAY_S = 0.0", f"SEND_DELAY_S = {float(send_delay_s)!r}")
    (folder / "adapter.py").write_text(adapter)
    for file, text in {**QUERIES, **(query_override or {})}.items():
        (folder / "queries" / file).write_text(text)
    plugins = str(root / "plugins")
    monkeypatch.syspath_prepend(plugins)
    monkeypatch.setenv(PACKAGES_ENV, package)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([plugins, os.environ.get("PYTHONPATH", "")]))
    return name
