"""The market ingest store of PostgreSQL and TimescaleDB (``postgres/market_ingest.py``): schema
``market_ingest`` beside the loaded market tables, which stay as they are; PostgreSQL's day-D
partition with the load's btrees, TimescaleDB's hypertables with the load's chunk interval and
columnstore settings, their chunks left in the rowstore; rows COPYed through the stream target
counted up to a time at once; readers on connections of their own; closed, the schema is gone.
(That M-SNAP answers right during the ingest: tests/test_market_suite.py.)"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tickbench.data.dataset import Dataset
from tickbench.datasets.market.params import MarketParams
from tickbench.engines.base import EngineUnavailable, Ingest
from tickbench.engines.registry import adapter, adapter_class

pytest.importorskip("psycopg", reason="the PostgreSQL engines need psycopg 3 (psycopg[binary])")

from tickbench.engines.postgres.market import day_partition

INGEST = "market_ingest"
COLUMNSTORE = ("SELECT segmentby, orderby FROM timescaledb_information.hypertable_columnstore_settings "
               "WHERE hypertable = %s::regclass")
INTERVALS = ("SELECT hypertable_name, time_interval FROM timescaledb_information.dimensions "
             "WHERE hypertable_schema = %s ORDER BY 1")


@pytest.fixture
def workdir() -> Iterator[Path]:
    # Not under pytest's tmp_path: the server runs as the unprivileged service user.
    d = Path(tempfile.mkdtemp(prefix="tickbench-mi-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _count(conn: Any, relation: str) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {relation}").fetchone()[0])


@pytest.mark.server
@pytest.mark.slow
@pytest.mark.parametrize("name", ["postgres", "timescaledb"])
def test_market_ingest_store_beside_the_loaded_tables(name: str, workdir: Path, market_tiny: Dataset,
                                                      market_tiny_params: MarketParams) -> None:
    try:
        adapter_class(name).probe()
    except EngineUnavailable as exc:
        pytest.skip(f"{name} is not installed ({exc})")
    e = adapter(name, workdir / name, market_tiny, market_tiny_params)
    assert isinstance(e, Ingest)
    e.start()
    try:
        e.load()
        conn = e._conn()  # type: ignore[attr-defined]
        loaded = {t: _count(conn, f"public.{t}") for t in ("instruments", "quotes", "trades")}
        e.ingest_open(workdir / "store")
        instruments = market_tiny.instruments().height
        assert _count(conn, f"{INGEST}.instruments") == instruments
        assert _count(conn, f"{INGEST}.quotes") == _count(conn, f"{INGEST}.trades") == 0
        day = market_tiny_params.D
        if name == "postgres":
            parts = conn.execute("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                                 "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
                                 "AND c.relkind = 'r' ORDER BY 1", [INGEST]).fetchall()
            assert parts == [(day_partition("quotes", day),), (day_partition("trades", day),)]
        else:
            for t in ("quotes", "trades"):
                settings = conn.execute(COLUMNSTORE, [f"{INGEST}.{t}"]).fetchall()
                assert len(settings) == 1 and settings == conn.execute(COLUMNSTORE, [f"public.{t}"]).fetchall()
            assert conn.execute(INTERVALS, [INGEST]).fetchall() == conn.execute(INTERVALS, ["public"]).fetchall()
            assert len(conn.execute(INTERVALS, [INGEST]).fetchall()) == 2
        indexes = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = %s "
                                              "AND tablename IN ('quotes', 'trades')", [INGEST]).fetchall()}
        assert indexes == {"quotes_sym_exchange_ts_seq", "trades_sym_ts_exchange_id"}

        # A payload through the writers' path (in this process), then counted up to a time.
        trades = pq.read_table(market_tiny.files("trades", [day])).slice(0, 100)
        target = e.ingest_stream_target()
        sender = target.connect()
        try:
            sender.send(target.encode("trades", trades))
        finally:
            sender.close()
        ts = trades.column("ts").cast(pa.int64()).to_numpy()
        assert e.ingest_count("trades", 2**62) == 100
        assert e.ingest_count("trades", int(ts.min()) - 1) == 0
        assert e.ingest_count("trades", int(ts.min())) == int((ts == ts.min()).sum())
        assert e.ingest_count("quotes", 2**62) == 0
        if name == "timescaledb":
            assert conn.execute("SELECT count(*), count(*) FILTER (WHERE is_compressed) FROM "
                                "timescaledb_information.chunks WHERE hypertable_schema = %s",
                                [INGEST]).fetchone() == (1, 0)

        reader = e.ingest_reader()
        try:
            assert reader.run_query("M-SNAP", market_tiny_params).num_rows > 0
            with reader.conn.cursor() as cur:  # type: ignore[attr-defined]
                cur.execute("SELECT current_setting('search_path'), current_setting('jit')")
                path, jit = cur.fetchone()
            assert path.split(",")[0] == INGEST and jit == "off"
        finally:
            reader.close()
        assert {t: _count(conn, f"public.{t}") for t in loaded} == loaded
        e.ingest_close()
        assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", [INGEST]).fetchone()[0] == 0
        assert {t: _count(conn, f"public.{t}") for t in loaded} == loaded
    finally:
        e.stop()
