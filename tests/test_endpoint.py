"""External endpoints: the suite against servers the test starts itself, outside tickbench.

Each server here is started by this file (initdb + postgres from Debian's PostgreSQL 15; java
with the QuestDB jar tickbench installed), never by tickbench's own start code, as the user's
own deployment would be. Then ``tickbench run --endpoint ...`` (a subprocess) must: verify every
answer, drop its tables afterwards (asked of the server), refuse a table of its names that it
did not create (and leave it untouched), keep its tables with ``--keep``, refuse ``--cold`` and
the durability suite before loading anything, name the engine and the endpoint when it cannot
reach it, and leave the server running as it was (same pid).
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.server

PG_BIN = Path("/usr/lib/postgresql/15/bin")
USER = "tickbench"  # an unprivileged user: PostgreSQL refuses to run as root
PUBLISHED_QUERIES = 14


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_user(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    try:
        entry = pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER], check=True)
        entry = pwd.getpwnam(USER)
    return ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--init-groups", "--", *argv]


def _chown(path: Path) -> None:
    if os.geteuid() != 0:
        return
    entry = pwd.getpwnam(USER)
    for p in [path, *path.rglob("*")]:
        os.chown(p, entry.pw_uid, entry.pw_gid)


def _stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """Stop the server this test started, by its pid."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@dataclass
class Postgres:
    port: int
    password: str
    proc: subprocess.Popen[bytes]

    def sql(self, query: str) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="bench", dbname="postgres",
                             password=self.password, autocommit=True) as c:
            cur = c.execute(query)
            return cur.fetchall() if cur.description else []


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    """PostgreSQL 15 started here: its own cluster in a temporary directory, a free port on
    127.0.0.1, password authentication, a superuser ``bench``."""
    pytest.importorskip("psycopg", reason="the PostgreSQL client psycopg 3 is not installed")
    if not (PG_BIN / "postgres").is_file():
        pytest.skip(f"PostgreSQL 15 is not installed ({PG_BIN}); `tickbench install postgres`")
    root = Path(tempfile.mkdtemp(prefix="tb-ext-pg-"))
    root.chmod(0o755)
    password = secrets.token_urlsafe(16)
    (root / "pw").write_text(password + "\n")
    (root / "sock").mkdir()
    _chown(root)
    subprocess.run(_as_user([str(PG_BIN / "initdb"), "-D", str(root / "data"), "-U", "bench",
                             "--pwfile", str(root / "pw"), "--auth-host", "scram-sha-256",
                             "--auth-local", "scram-sha-256", "--no-locale", "-E", "UTF8"]),
                   check=True, capture_output=True)
    port = _free_port()
    with open(root / "server.log", "ab") as log:
        proc = subprocess.Popen(_as_user([str(PG_BIN / "postgres"), "-D", str(root / "data"), "-p", str(port),
                                          "-c", "listen_addresses=127.0.0.1", "-k", str(root / "sock")]),
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = Postgres(port, password, proc)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                server.sql("SELECT 1")
                break
            except Exception:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((root / "server.log").read_text()[-2000:]) from None
                time.sleep(0.3)
        yield server
    finally:
        _stop(proc, signal.SIGINT)  # fast shutdown
        shutil.rmtree(root, ignore_errors=True)


def _tickbench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tickbench.cli", "run", *args], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "250", **(env or {})}, timeout=900)


def _pg_env(pg: Postgres) -> dict[str, str]:
    return {"PGUSER": "bench", "PGPASSWORD": pg.password, "PGDATABASE": "postgres"}


def _tickbench_tables(pg: Postgres, schema: str = "tickbench") -> list[str]:
    # The tables themselves, not their partitions (PostgreSQL's are partitioned by day).
    return [r[0] for r in pg.sql("SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                                 f"WHERE n.nspname = '{schema}' AND c.relkind IN ('r', 'p') "
                                 "AND NOT c.relispartition ORDER BY 1")]


def _check_results(out: Path, engine: str, port: int, secret: str) -> dict[str, Any]:
    text = (out / "results.json").read_text()
    assert secret not in text, "a credential reached results.json"
    doc = json.loads(text)
    records = [r for r in doc["records"] if r["engine"] == engine]
    queries = [r for r in records if r["benchmark"] not in ("W", "SE")]
    assert len(queries) == PUBLISHED_QUERIES
    assert all(r["status"] == "ok" and r["verified"] for r in queries), \
        [(r["benchmark"], r["status"], r.get("reason")) for r in queries if r["status"] != "ok"]
    assert {r["benchmark"]: r["status"] for r in records if r["benchmark"] in ("W", "SE")} == \
        {"W": "unsupported", "SE": "unsupported"}
    info = doc["environment"]["engines"][engine]
    assert info["endpoint"]["external"] is True
    assert info["endpoint"]["address"] == f"127.0.0.1:{port}"
    assert info["endpoint"]["server_version"]
    return info


def test_postgres_endpoint_runs_verifies_and_drops(postgres: Postgres, tiny_dir: Path, tmp_path: Path) -> None:
    pid = postgres.proc.pid
    done = _tickbench("--engines", "postgres", "--endpoint", f"postgres=127.0.0.1:{postgres.port}",
                      "--data", str(tiny_dir), "--out", str(tmp_path / "run"), "--repetitions", "1",
                      env=_pg_env(postgres))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    info = _check_results(tmp_path / "run", "postgres", postgres.port, postgres.password)
    assert info["endpoint"]["server_version"].startswith("15")
    assert info["endpoint"]["schema"] == "tickbench"
    # Dropped afterwards, schema included (tickbench made it); the server still the same process.
    assert _tickbench_tables(postgres) == []
    assert postgres.sql("SELECT count(*) FROM pg_namespace WHERE nspname = 'tickbench'") == [(0,)]
    assert postgres.proc.poll() is None and postgres.proc.pid == pid


def test_postgres_endpoint_refuses_a_table_it_did_not_create(postgres: Postgres, tiny_dir: Path,
                                                             tmp_path: Path) -> None:
    postgres.sql("CREATE SCHEMA tickbench")
    postgres.sql("CREATE TABLE tickbench.trades (note text)")
    postgres.sql("INSERT INTO tickbench.trades VALUES ('the user''s own')")
    try:
        done = _tickbench("--engines", "postgres", "--endpoint", f"postgres=127.0.0.1:{postgres.port}",
                          "--data", str(tiny_dir), "--out", str(tmp_path / "run"), "--repetitions", "1",
                          env=_pg_env(postgres))
        assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
        message = " ".join(done.stderr.split())
        assert "tickbench.trades" in message and "did not create" in message
        assert f"127.0.0.1:{postgres.port}" in message and "postgres" in message
        # Untouched: the same table, its one row, and nothing of tickbench's beside it.
        assert postgres.sql("SELECT note FROM tickbench.trades") == [("the user's own",)]
        assert _tickbench_tables(postgres) == ["trades"]
        assert not (tmp_path / "run" / "results.json").exists()
    finally:
        postgres.sql("DROP SCHEMA tickbench CASCADE")


def test_postgres_endpoint_keep_through_a_config_file(postgres: Postgres, tiny_dir: Path, tmp_path: Path) -> None:
    config = tmp_path / "endpoints.toml"
    config.write_text(f'[endpoints.postgres]\nhost = "127.0.0.1"\nport = {postgres.port}\nuser = "bench"\n'
                      f'database = "postgres"\npassword_env = "BENCH_PG_PASSWORD"\nnamespace = "tb_kept"\n')
    env = {"BENCH_PG_PASSWORD": postgres.password, "PGPASSWORD": ""}
    done = _tickbench("--config", str(config), "--keep", "--data", str(tiny_dir), "--out", str(tmp_path / "run"),
                      "--repetitions", "1", env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    _check_results(tmp_path / "run", "postgres", postgres.port, postgres.password)
    try:
        assert _tickbench_tables(postgres, "tb_kept") == ["book", "trades"]
        assert postgres.sql("SELECT count(*) > 0 FROM tb_kept.trades") == [(True,)]
        # Kept tables carry the marker: the next run takes them as its own, and drops them.
        done = _tickbench("--config", str(config), "--data", str(tiny_dir), "--out", str(tmp_path / "again"),
                          "--repetitions", "1", env=env)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert _tickbench_tables(postgres, "tb_kept") == []
    finally:
        postgres.sql("DROP SCHEMA IF EXISTS tb_kept CASCADE")


@pytest.mark.parametrize("args, words", [
    (["--cold"], ["--cold", "refused", "restart"]),
    (["--suite", "durability"], ["durability", "refused", "kills"]),
])
def test_endpoint_refuses_restarts_before_loading(postgres: Postgres, tiny_dir: Path, tmp_path: Path,
                                                  args: list[str], words: list[str]) -> None:
    done = _tickbench("--engines", "postgres", "--endpoint", f"postgres=127.0.0.1:{postgres.port}",
                      "--data", str(tiny_dir), "--out", str(tmp_path / "run"), *args, env=_pg_env(postgres))
    assert done.returncode == 2
    message = " ".join(done.stderr.split())
    assert all(w in message for w in words), message
    assert postgres.sql("SELECT count(*) FROM pg_namespace WHERE nspname = 'tickbench'") == [(0,)]
    assert not (tmp_path / "run").exists()


def test_unreachable_endpoint_names_engine_and_endpoint(tiny_dir: Path, tmp_path: Path) -> None:
    """Nothing listening: one line naming the engine, the endpoint and where the password comes
    from (the message once ended "password from $the client variables")."""
    port = _free_port()
    done = _tickbench("--engines", "questdb", "--endpoint", f"questdb=127.0.0.1:{port}",
                      "--data", str(tiny_dir), "--out", str(tmp_path / "run"))
    assert done.returncode == 2
    assert len([line for line in done.stderr.splitlines() if "error:" in line]) == 1, done.stderr
    message = " ".join(done.stderr.split())
    assert f"questdb endpoint 127.0.0.1:{port}" in message, message
    assert "(no password sent: name the variable that holds one with password_env" in message, message
    assert "$the" not in message and "Traceback" not in message, message
    assert not (tmp_path / "run").exists()
    config = tmp_path / "endpoints.toml"
    config.write_text(f'[endpoints.questdb]\nhost = "127.0.0.1"\nport = {port}\npassword_env = "BENCH_PW"\n')
    done = _tickbench("--config", str(config), "--data", str(tiny_dir), "--out", str(tmp_path / "run"))
    assert done.returncode == 2
    message = " ".join(done.stderr.split())
    assert f"questdb endpoint 127.0.0.1:{port}" in message and "(password from $BENCH_PW)" in message, message
    done = _tickbench("--engines", "postgres", "--endpoint", f"postgres=127.0.0.1:{port}",
                      "--data", str(tiny_dir), "--out", str(tmp_path / "run"), env={"PGPASSWORD": ""})
    assert done.returncode == 2
    message = " ".join(done.stderr.split())
    assert f"postgres endpoint 127.0.0.1:{port}" in message, message
    assert "(password from $PGPASSWORD, as the client reads it, or none)" in message, message


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A socket this test opens on 127.0.0.1 that accepts every connection and never says a
    word (nor closes it), as a hung service or a port of another kind would."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.5)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:  # the timeout: look at stop again
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join(10)
        for conn in held:
            conn.close()
        server.close()


@pytest.mark.parametrize("engine", ["questdb", "postgres", "influxdb"])
def test_an_endpoint_that_never_answers_fails_with_one_line(engine: str, silent_port: int, tiny_dir: Path,
                                                            tmp_path: Path) -> None:
    """Connected, and no answer: the run stops (in about 10 s: it once hung 134 s) with a one-line
    error naming the engine and the endpoint."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "tickbench.cli", "run", "--engines", engine,
                           "--endpoint", f"{engine}=127.0.0.1:{silent_port}", "--data", str(tiny_dir),
                           "--out", str(tmp_path / "run")],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "250"}, timeout=120)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1, done.stderr
    assert f"{engine} endpoint 127.0.0.1:{silent_port}" in lines[0], lines[0]
    assert "time" in lines[0].lower(), lines[0]  # timed out / timeout expired
    # about 10 s of waiting, beside the interpreter's start and the dataset's check
    assert time.monotonic() - started < 60, f"took {time.monotonic() - started:.0f} s"
    assert not (tmp_path / "run" / "results.json").exists()


def test_credentials_never_in_the_config_file(tmp_path: Path, tiny_dir: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[endpoints.postgres]\nhost = "127.0.0.1"\nport = 5432\npassword = "hunter2"\n')
    done = _tickbench("--config", str(config), "--data", str(tiny_dir), "--out", str(tmp_path / "run"))
    assert done.returncode == 2
    assert "password_env" in " ".join(done.stderr.split())


# -- QuestDB ------------------------------------------------------------------------------------


@dataclass
class QuestDB:
    http: int
    proc: subprocess.Popen[bytes]

    def sql(self, query: str) -> dict[str, Any]:
        url = f"http://127.0.0.1:{self.http}/exec?" + urllib.parse.urlencode({"query": query})
        with urllib.request.urlopen(url, timeout=60) as resp:
            answer: dict[str, Any] = json.loads(resp.read())
        return answer

    def tables(self) -> list[str]:
        return sorted(r[0] for r in self.sql("SELECT table_name FROM tables()")["dataset"])


@pytest.fixture(scope="module")
def questdb() -> Iterator[QuestDB]:
    """QuestDB started here with ``java``: the jar `tickbench install questdb` put in the tools
    directory, a temporary root, every listener on 127.0.0.1 and a free port."""
    from tickbench.engines.server import tools_dir

    jars = sorted((tools_dir() / "questdb").glob("questdb-*.jar"))
    if not jars or shutil.which("java") is None:
        pytest.skip("QuestDB is not installed (`tickbench install questdb`) or java is missing")
    root = Path(tempfile.mkdtemp(prefix="tb-ext-qdb-"))
    http, pg, ilp = _free_port(), _free_port(), _free_port()
    (root / "conf").mkdir()
    (root / "conf" / "server.conf").write_text(
        f"http.net.bind.to=127.0.0.1:{http}\nhttp.min.enabled=false\npg.net.bind.to=127.0.0.1:{pg}\n"
        f"line.tcp.net.bind.to=127.0.0.1:{ilp}\nline.udp.enabled=false\ntelemetry.enabled=false\n")
    with open(root / "server.log", "ab") as log:
        proc = subprocess.Popen(["java", "-Xmx1g", "-p", str(jars[-1]), "-m", "io.questdb/io.questdb.ServerMain",
                                 "-d", str(root)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = QuestDB(http, proc)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                server.sql("select 1")
                break
            except Exception:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((root / "server.log").read_text()[-2000:]) from None
                time.sleep(0.5)
        yield server
    finally:
        _stop(proc)
        shutil.rmtree(root, ignore_errors=True)


def test_questdb_endpoint_runs_verifies_refuses_and_drops(questdb: QuestDB, tiny_dir: Path, tmp_path: Path) -> None:
    pid = questdb.proc.pid
    endpoint = f"questdb=127.0.0.1:{questdb.http}"
    # A table of tickbench's names the user made: refused, untouched.
    questdb.sql("CREATE TABLE tickbench_trades (note SYMBOL, ts TIMESTAMP) timestamp(ts)")
    questdb.sql("INSERT INTO tickbench_trades VALUES ('the user''s own', now())")
    done = _tickbench("--engines", "questdb", "--endpoint", endpoint, "--data", str(tiny_dir),
                      "--out", str(tmp_path / "refused"), "--repetitions", "1")
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "tickbench_trades" in " ".join(done.stderr.split())
    assert questdb.sql("SELECT note FROM tickbench_trades")["dataset"] == [["the user's own"]]
    questdb.sql("DROP TABLE tickbench_trades")
    # A table of the user's that is not of tickbench's names stays through a run.
    questdb.sql("CREATE TABLE trades (note SYMBOL, ts TIMESTAMP) timestamp(ts)")
    try:
        before = questdb.tables()
        done = _tickbench("--engines", "questdb", "--endpoint", endpoint, "--data", str(tiny_dir),
                          "--out", str(tmp_path / "run"), "--repetitions", "1")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        info = _check_results(tmp_path / "run", "questdb", questdb.http, "no-secret-here-" + "x" * 8)
        assert "QuestDB" in info["endpoint"]["server_version"]
        assert questdb.tables() == before  # tickbench's tables (and its marker) dropped
        assert questdb.proc.poll() is None and questdb.proc.pid == pid
    finally:
        questdb.sql("DROP TABLE IF EXISTS trades")


# -- InfluxDB -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def influxdb() -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """influxd (the binary `tickbench install influxdb` built) started here: a temporary
    root, every listener on 127.0.0.1 and a free port."""
    from tickbench.engines.influxdb.server import bin_dir

    binary = bin_dir() / "influxd"
    if not binary.is_file():
        pytest.skip("InfluxDB is not installed (`tickbench install influxdb`)")
    root = Path(tempfile.mkdtemp(prefix="tb-ext-influx-"))
    http, rpc = _free_port(), _free_port()
    conf = root / "influxd.toml"
    conf.write_text(f'reporting-disabled = true\nbind-address = "127.0.0.1:{rpc}"\n[meta]\n  dir = "{root}/meta"\n'
                    f'[data]\n  dir = "{root}/data"\n  wal-dir = "{root}/wal"\n  query-log-enabled = false\n'
                    f'[monitor]\n  store-enabled = false\n[http]\n  bind-address = "127.0.0.1:{http}"\n'
                    '  log-enabled = false\n')
    with open(root / "server.log", "ab") as log:
        proc = subprocess.Popen([str(binary), "-config", str(conf)], stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{http}/ping", timeout=5).close()
                break
            except Exception:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((root / "server.log").read_text()[-2000:]) from None
                time.sleep(0.3)
        yield http, proc
    finally:
        _stop(proc)
        shutil.rmtree(root, ignore_errors=True)


def _influx(http: int, query: str) -> list[Any]:
    data = urllib.parse.urlencode({"q": query}).encode()
    with urllib.request.urlopen(f"http://127.0.0.1:{http}/query", data=data, timeout=60) as resp:
        doc = json.loads(resp.read())
    return [v[0] for r in doc["results"] for s in r.get("series", []) for v in s.get("values") or []]


def test_influxdb_endpoint_runs_verifies_refuses_and_drops(influxdb: tuple[int, subprocess.Popen[bytes]],
                                                            tiny_dir: Path, tmp_path: Path) -> None:
    http, proc = influxdb
    pid = proc.pid
    endpoint = f"influxdb=127.0.0.1:{http}"
    _influx(http, "CREATE DATABASE tickbench")  # the user's database of that name: refused, kept
    done = _tickbench("--engines", "influxdb", "--endpoint", endpoint, "--data", str(tiny_dir),
                      "--out", str(tmp_path / "refused"), "--repetitions", "1")
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "database tickbench" in " ".join(done.stderr.split())
    assert "tickbench" in _influx(http, "SHOW DATABASES")
    _influx(http, "DROP DATABASE tickbench")
    done = _tickbench("--engines", "influxdb", "--endpoint", endpoint, "--data", str(tiny_dir),
                      "--out", str(tmp_path / "run"), "--repetitions", "1")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    info = _check_results(tmp_path / "run", "influxdb", http, "no-secret-here-" + "x" * 8)
    from tickbench.engines.influxdb.server import VERSION

    assert info["endpoint"]["server_version"] == f"InfluxDB {VERSION}"
    assert "tickbench" not in _influx(http, "SHOW DATABASES")
    assert proc.poll() is None and proc.pid == pid
