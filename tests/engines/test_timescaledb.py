"""TimescaleDB engine: the installer refuses a corrupt source release before building anything
and is a no-op once its version is installed; without the extension the engine is "not
available" with the command that enables it; its server preloads the extension with telemetry
off, the loaded month is all in the columnstore, and the plain ``postgres`` engine still runs
without the extension, and O-T's lookup function answers as a plain scan of the month and lives in
the session only. (Every query against the reference: tests/test_engines.py; the ingest
contract: tests/engines/test_ingest.py.)"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import pytest

from tickbench.data.dataset import Dataset
from tickbench.datasets.paper.params import QueryParams
from tickbench.engines.base import Engine, EngineUnavailable
from tickbench.engines.registry import adapter, adapter_class, availability

pytest.importorskip("psycopg", reason="the TimescaleDB engine needs psycopg 3 (psycopg[binary])")

from tickbench.engines.timescaledb import install as installer

# The source release CI builds from (.ci/run): kept beside the checkout, never in it.
VENDOR = Path(__file__).resolve().parents[2].parent / "shared" / "vendor" / "timescaledb-2.28.3.tar.gz"


def _vendor() -> Path:
    if not VENDOR.is_file():
        pytest.skip(f"no TimescaleDB source release at {VENDOR}")
    return VENDOR


def _installed() -> str:
    try:
        return adapter_class("timescaledb").probe()
    except EngineUnavailable as exc:
        pytest.skip(f"TimescaleDB is not installed ({exc})")


def _no_build(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Record (and refuse) any command the installer would run: apt, bootstrap, make."""
    ran: list[list[str]] = []

    def refuse(cmd: list[str], *args: Any, **kwargs: Any) -> None:
        ran.append(cmd)
        raise AssertionError(f"the installer ran {cmd}")

    monkeypatch.setattr(installer, "_run", refuse)
    return ran


def test_corrupt_source_is_refused_before_anything_is_built(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    vendor = _vendor()
    copy = tmp_path / vendor.name
    shutil.copyfile(vendor, copy)
    shutil.copyfile(vendor.with_name(vendor.name + ".sha256"), copy.with_name(copy.name + ".sha256"))
    data = bytearray(copy.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the middle of the compressed stream
    copy.write_bytes(bytes(data))
    ran = _no_build(monkeypatch)
    with pytest.raises(EngineUnavailable, match="checksum mismatch") as err:
        installer.install(copy)
    assert str(copy) in str(err.value) and "not built" in str(err.value)
    assert ran == []
    # The intact copy passes the same check.
    shutil.copyfile(vendor, copy)
    assert installer.verify_checksum(copy) == vendor.with_name(vendor.name + ".sha256").read_text().split()[0]


def test_source_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "nothing.tar.gz"
    monkeypatch.setenv(installer.SOURCE_ENV, str(missing))
    with pytest.raises(EngineUnavailable, match="is not a file"):
        installer.resolve_source(None)
    vendor = _vendor()
    monkeypatch.setenv(installer.SOURCE_ENV, str(vendor))
    assert installer.resolve_source(None) == vendor
    assert installer.tarball_version(vendor) == "2.28.3"


def test_not_available_says_how_to_enable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(installer, "installed_version", lambda: None)
    monkeypatch.delenv(installer.SOURCE_ENV, raising=False)
    a = availability("timescaledb")
    if "postgres" in a.reason and "not installed; run" in a.reason:
        pytest.skip("PostgreSQL itself is not installed here")
    assert not a.available
    assert "TimescaleDB extension is not installed" in a.reason
    assert "tickbench install timescaledb --source" in a.reason and installer.SOURCE_ENV in a.reason
    with pytest.raises(EngineUnavailable, match="no TimescaleDB source given"):
        installer.install(None)


@pytest.mark.server
def test_install_is_idempotent(monkeypatch: pytest.MonkeyPatch) -> None:
    version = _installed()
    vendor = _vendor()
    ran = _no_build(monkeypatch)
    cls = adapter_class("timescaledb")
    assert cls.install(source=vendor) == version  # type: ignore[call-arg]
    assert cls.install(source=vendor) == version  # type: ignore[call-arg]
    assert cls.install() == version  # no source: the installed version
    assert ran == []
    assert version.startswith(installer.installed_version() or "-")


def _start(name: str, workdir: Path, tiny: Dataset, tiny_params: QueryParams) -> Engine:
    e = adapter(name, workdir / name, tiny, tiny_params)
    e.start()
    return e


@pytest.mark.server
def test_loaded_month_is_compressed_hypertables(server_tmp: Path, tiny: Dataset, tiny_params: QueryParams) -> None:
    version = _installed()
    e = _start("timescaledb", server_tmp, tiny, tiny_params)
    try:
        conn = e._conn()  # type: ignore[attr-defined]
        assert "timescaledb" in conn.execute("SHOW shared_preload_libraries").fetchone()[0]
        assert conn.execute("SHOW timescaledb.telemetry_level").fetchone()[0] == "off"
        rows = e.load()
        expected = sum(p["rows"] for p in tiny.manifest.partitions
                       if p["day"] in tiny_params.days("month") + tiny_params.days("multi_day"))
        assert rows == expected
        assert conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'timescaledb'"
                            ).fetchone()[0] == version.split()[0]
        chunks = conn.execute("SELECT hypertable_name, count(*), count(*) FILTER (WHERE is_compressed) "
                              "FROM timescaledb_information.chunks GROUP BY 1 ORDER BY 1").fetchall()
        days = len(tiny_params.days("month")) + 1  # one chunk per day, the multi-exchange day too
        assert chunks == [("book", days, days), ("trades", days, days)]
        settings = e.settings()
        assert settings["columnstore"]["book"] == {"segmentby": "sym,exchange", "orderby": "ts DESC"}
        # SE is the month's chunks of this store: all of it but the multi-exchange day's chunks.
        se = e.storage_bytes()
        whole = sum(conn.execute("SELECT hypertable_size(%s::regclass)", [t]).fetchone()[0] for t in ("book", "trades"))
        multi = conn.execute("SELECT sum(d.total_bytes) FROM timescaledb_information.chunks c "
                             "JOIN LATERAL chunks_detailed_size(format('%%I', c.hypertable_name)::regclass) d "
                             "USING (chunk_schema, chunk_name) WHERE c.range_start = %s",
                             [dt.datetime.fromisoformat(tiny_params.multi_day).replace(tzinfo=dt.UTC)]).fetchone()[0]
        assert 0 < se["chunks_total_size"] == se["book_total"] + se["trades_total"]
        assert se["data_bytes"] + se["index_bytes"] == se["chunks_total_size"] and se["log_bytes"] > 0
        assert whole - multi - se["chunks_total_size"] < 100_000  # the hypertables' own (empty) tables
        assert 0 < se["compressed_bytes"] < se["uncompressed_bytes"]
    finally:
        e.stop()


@pytest.mark.server
def test_plain_postgres_runs_without_the_extension(server_tmp: Path, tiny: Dataset,
                                                   tiny_params: QueryParams) -> None:
    _installed()  # the extension is installed for this server, and must still not be loaded
    e = _start("postgres", server_tmp, tiny, tiny_params)
    try:
        conn = e._conn()  # type: ignore[attr-defined]
        assert "timescaledb" not in conn.execute("SHOW shared_preload_libraries").fetchone()[0]
        e.load()
        assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'timescaledb'").fetchone()[0] == 0
        assert "timescaledb_version" not in e.settings()
        # No chunks: every inheritance is a day's partition of a partitioned table or index.
        assert conn.execute("SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhparent "
                            "WHERE c.relkind NOT IN ('p', 'I')").fetchone()[0] == 0
        assert {"total_relation_size", "data_bytes", "index_bytes", "log_bytes"} <= set(e.storage_bytes())
    finally:
        e.stop()


@pytest.mark.server
def test_lookup_function_widens_to_the_month_and_leaves_nothing(server_tmp: Path, tiny: Dataset,
                                                                tiny_params: QueryParams) -> None:
    """O-T's pg_temp.book_at (lookups.sql) answers as one ``ORDER BY ts DESC LIMIT 1`` over the
    month does, also for a time whose day before holds no snapshot (its last, unbounded step)
    and a time before the first snapshot (no row); it lives in the session only."""
    _installed()
    e = _start("timescaledb", server_tmp, tiny, tiny_params)
    try:
        e.load()
        conn = e._conn()  # type: ignore[attr-defined]
        lo = tiny_params.bindings()["month_start"]
        hi = tiny_params.bindings()["month_end"]
        syms = [r[0] for r in conn.execute("SELECT DISTINCT sym FROM book WHERE ts >= %s AND ts < %s "
                                           "ORDER BY 1", [lo, hi]).fetchall()]
        # Three days of one symbol's snapshots deleted (from compressed chunks), so a time in
        # them finds nothing in the minute, hour or day before it and needs the last step.
        conn.execute("DELETE FROM book WHERE sym = %s AND ts >= %s AND ts < %s",
                     [syms[0], lo + dt.timedelta(days=5), lo + dt.timedelta(days=8)])
        probes: list[tuple[str, Any]] = [(syms[0], lo + dt.timedelta(days=7, hours=12))]
        for sym in syms:  # the middle of its longest gap, its first snapshot, the month's start
            first, gap_start, gap = conn.execute(
                "SELECT min(ts) OVER (), ts, lead(ts) OVER (ORDER BY ts) - ts AS gap FROM book "
                "WHERE sym = %s AND ts >= %s AND ts < %s ORDER BY gap DESC NULLS LAST LIMIT 1",
                [sym, lo, hi]).fetchone()
            probes += [(sym, gap_start + gap / 2), (sym, first), (sym, lo)]
        for sym, t in probes:
            got = conn.execute("SELECT * FROM pg_temp.book_at(%s, %s, %s)", [sym, t, lo]).fetchall()
            want = conn.execute("SELECT ts, b1price, b1size, a1price, a1size FROM book WHERE sym = %s "
                                "AND ts >= %s AND ts <= %s ORDER BY ts DESC LIMIT 1", [sym, lo, t]).fetchall()
            assert got == want, (sym, t)
        assert conn.execute("SELECT * FROM pg_temp.book_at(%s, %s, %s)", [syms[0], *probes[0][1:], lo]
                            ).fetchone()[0].replace(tzinfo=None) < lo + dt.timedelta(days=5)  # before the gap
        # Nothing of it in the database: each connection's own (schemas pg_temp_N, dropped with it).
        spaces = conn.execute("SELECT array_agg(n.nspname) FROM pg_proc p JOIN pg_namespace n "
                              "ON n.oid = p.pronamespace WHERE p.proname = 'book_at'").fetchone()[0]
        mine = conn.execute("SELECT nspname FROM pg_namespace WHERE oid = pg_my_temp_schema()").fetchone()[0]
        assert mine in spaces and all(n.startswith("pg_temp_") for n in spaces), spaces
    finally:
        e.stop()
