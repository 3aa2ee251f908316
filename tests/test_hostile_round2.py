"""Hostile inputs, round two (issue 37): what a run, a generation and a report must not do.

Files planted in ``--out`` (a lock that is a symbolic link, a ``.work-root`` naming another
directory, a ``work/`` of pid records naming another process) are refused, never followed,
deleted or killed; generator workers die with their parent (SIGTERM, kill -9); an edited market
manifest is refused naming the field; concurrent imports and generations into one place are one
line (or a wait and a reuse), never a traceback; a full or read-only disk, an ``--out`` that is a
file, a partition of garbage or of timestamps beyond nanoseconds, option values nobody could
mean (``--timeout nan``, ``--users ²``, a resumed results.json's) are each exit 2 with one line;
report.md is escaped like report.html. Each test uses real files, real processes and real
signals, and checks the exit status, the message, that nothing outside ``--out`` changed and that
nothing it started is left running."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from markdown_it import MarkdownIt

from tests.conftest import MARKET_TINY_HASH, TINY_HASH
from tests.test_hostile_data import Guard, _state
from tests.test_hostile_import import _tardis_trades
from tests.test_hostile_run import _alive, _records, small_tmpfs

pytestmark = pytest.mark.slow

T0_US = 1_655_510_400_000_000  # 2022-06-18 00:00:00 UTC


def _cli(*args: str | Path, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tickbench.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**os.environ, "COLUMNS": "400"})


def _one_line(done: subprocess.CompletedProcess[str], *words: str, code: int = 2) -> str:
    """The single ``error:`` line of a refused command, holding each of ``words``; no traceback."""
    out = done.stdout + done.stderr
    assert done.returncode == code, out
    assert "Traceback" not in out, out
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out
    for w in words:
        assert w in errors[0], f"{w!r} not in {errors[0]!r}"
    return errors[0]


def _sleeper(cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """A process of this test's, in a session of its own (as tickbench starts its servers)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True, cwd=cwd)


def _end(*procs: subprocess.Popen[bytes]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


@pytest.fixture(scope="module")
def finished(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real, finished run of DuckDB on the tiny dataset (its --out)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    done = _cli("run", "--engines", "duckdb", "--data", tiny_dir, "--out", out, "--repetitions", "1")
    assert done.returncode == 0, done.stderr
    return out


def _copy_run(finished: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(finished, out)
    return out


# ---- item 9: nothing outside --out ------------------------------------------------------------


def test_a_lock_planted_as_a_symbolic_link_is_never_written(finished: Path, tmp_path: Path) -> None:
    """``.tickbench-run.lock`` a link to a file elsewhere: once overwritten with ``pid N``; now
    the lock is opened with O_NOFOLLOW and the resume refused, naming it."""
    out = _copy_run(finished, tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (out / ".tickbench-run.lock").symlink_to(victim)
    guard = Guard(tmp_path, out)
    _one_line(_cli("run", "--resume", out), ".tickbench-run.lock", "not a regular file")
    guard.unchanged()
    assert victim.read_text() == "keep me\n"


def test_a_fresh_run_into_a_directory_of_planted_files_is_refused(tiny_dir: Path, tmp_path: Path) -> None:
    """A non-empty --out without results.json (here a lock link and a .work-root naming another
    directory) is refused before anything is made or read there."""
    out = tmp_path / "run"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("keep\n")
    (out / ".tickbench-run.lock").symlink_to(tmp_path / "victim.txt")
    (out / ".work-root").write_text(str(victim))
    before = _state(out)
    guard = Guard(tmp_path, out)
    _one_line(_cli("run", "--engines", "duckdb", "--data", tiny_dir, "--out", out), f"--out {out}", "not empty",
              "no results.json")
    guard.unchanged()
    assert _state(out) == before and not (tmp_path / "victim.txt").exists()


@pytest.mark.parametrize("where", ["elsewhere", "shared-tmp"])
def test_a_planted_work_root_is_never_deleted(finished: Path, tmp_path: Path, where: str) -> None:
    """A ``.work-root`` naming a directory the run did not make (anywhere, or one under
    /var/tmp named as tickbench names its own) once had that directory deleted on --resume."""
    out = _copy_run(finished, tmp_path)
    if where == "elsewhere":
        victim = tmp_path / "tickbench-work-victim"
        victim.mkdir()
    else:
        victim = Path(os.path.realpath("/var/tmp")) / f"tickbench-work-{os.getpid()}-{time.monotonic_ns()}"
        victim.mkdir()
    try:
        (victim / "keep.txt").write_text("keep\n")
        (out / ".work-root").write_text(str(victim))
        guard = Guard(tmp_path, out)
        _one_line(_cli("run", "--resume", out), ".work-root", str(victim), "did not make")
        guard.unchanged()
        assert (victim / "keep.txt").read_text() == "keep\n"
    finally:
        shutil.rmtree(victim, ignore_errors=True)


def test_a_planted_pid_record_kills_nothing(finished: Path, tmp_path: Path) -> None:
    """``work/duckdb/x.server-pid`` naming another process by its pid and start time, in a
    ``work/`` no run made: once that process was killed by --resume; now it is refused."""
    out = _copy_run(finished, tmp_path)
    stranger = _sleeper()
    try:
        work = out / "work" / "duckdb"
        work.mkdir(parents=True)
        (work / "x.log.server-pid").write_text(f"{stranger.pid} {psutil.Process(stranger.pid).create_time()!r}\n")
        guard = Guard(tmp_path, out)
        _one_line(_cli("run", "--resume", out), str(out / "work"), "did not make")
        assert stranger.poll() is None, "a process tickbench did not start was killed"
        guard.unchanged()
    finally:
        _end(stranger)


def test_a_pid_record_in_a_killed_runs_work_root_stops_only_its_server(tiny_dir: Path, tmp_path: Path) -> None:
    """Inside a work root a killed run made (its mark), a record whose process works there is
    stopped; one naming a process that works elsewhere (with its right start time) is not."""
    from tests.test_hostile_run import _start, _tree, _wait_for
    from tickbench.run.faults import FAULTS_ENV

    out = tmp_path / "run"
    proc = _start(out, tiny_dir, "--engines", "duckdb", env={FAULTS_ENV: "duckdb:slow=1"})
    _wait_for(lambda: len(_records(out)) >= 1)
    engine = _tree(proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    work = out / "work" / "duckdb"
    assert work.is_dir() and (out / "work" / ".tickbench-run").is_file()
    leftover, stranger = _sleeper(cwd=work), _sleeper(cwd=tmp_path)
    try:
        for name, p in (("server", leftover), ("other", stranger)):
            (work / f"{name}.log.server-pid").write_text(f"{p.pid} {psutil.Process(p.pid).create_time()!r}\n")
        guard = Guard(tmp_path, out)
        again = _cli("run", "--resume", out)
        assert again.returncode == 0, again.stderr
        assert leftover.poll() is not None, "the killed run's server still runs"
        assert stranger.poll() is None, "a process working outside the run's directory was stopped"
        guard.unchanged()
        assert not [p for p in engine if _alive(p)]
    finally:
        _end(leftover, stranger)


# ---- item 10: generator workers die with their parent -------------------------------------------


def _workers(proc: subprocess.Popen[str], n: int = 2, timeout: float = 120) -> list[psutil.Process]:
    """The generator's worker processes: children of the process this test started, forked from
    it (its command line; not a probe it runs, nor multiprocessing's resource tracker)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        try:
            me = psutil.Process(proc.pid)
            kids = [k for k in me.children(recursive=True) if k.cmdline() == me.cmdline()]
        except psutil.Error:
            kids = []
        if len(kids) >= n:
            return kids
        time.sleep(0.05)
    raise AssertionError("the generator's workers did not start")


def _left(procs: list[psutil.Process], timeout: float = 30) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(p) for p in procs):
        time.sleep(0.2)
    return [p for p in procs if _alive(p)]


def _frozen(workers: list[psutil.Process]) -> bool:
    """Stop (SIGSTOP) the generator's workers, so that the generation cannot end before the
    test's signal lands: a generation of scale 0.05 takes about a second, and a busy machine can
    hold this test back longer than that between finding the workers and signalling their parent.
    ``False`` when a worker had already ended (the generation was over): the caller starts again."""
    try:
        for w in workers:
            w.suspend()
        deadline = time.monotonic() + 10  # SIGSTOP takes effect when the kernel delivers it
        while time.monotonic() < deadline:
            states = {w.status() for w in workers}
            if states == {psutil.STATUS_STOPPED}:
                return True
            if psutil.STATUS_ZOMBIE in states:
                return False
            time.sleep(0.01)
        return False
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("command", ["generate", "run"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_generator_workers_die_with_their_parent(tmp_path: Path, command: str, sig: signal.Signals) -> None:
    """SIGTERM or kill -9 to ``tickbench generate --jobs 2`` (or to a run while it generates):
    its workers once ran on, re-parented to init. Now none is left; SIGTERM ends it with exit
    130, one line, and nothing kept. The workers are held stopped when the signal comes, so it
    comes while the generation is under way (with them running, it may come after the end)."""
    for attempt in range(3):
        where = tmp_path / f"attempt-{attempt}"
        where.mkdir()
        out = where / "ds"
        if command == "generate":
            argv = ["generate", "--out", out, "--scale", "0.05", "--jobs", "2"]
        else:  # the run generates its default dataset under data/ of its working directory
            argv = ["run", "--engines", "duckdb", "--scale", "0.05", "--jobs", "2", "--out", where / "run"]
        proc = subprocess.Popen([sys.executable, "-m", "tickbench.cli", *map(str, argv)], cwd=where,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        workers: list[psutil.Process] = []
        try:
            workers = _workers(proc)
            if not _frozen(workers):
                continue  # the generation ended first: nothing to test in this attempt
            proc.send_signal(sig)
            # Let them go on: one held before its first step had no death signal yet, and with
            # its parent gone that step ends it (held, it would keep the output pipes open).
            for w in workers:
                with contextlib.suppress(psutil.NoSuchProcess):
                    w.resume()
            _, stderr = proc.communicate(timeout=120)
            left = _left(workers)
        finally:
            for w in workers:  # this test's own processes, whatever the outcome
                if _alive(w):
                    w.kill()
            if proc.poll() is None:
                proc.kill()
            proc.communicate()  # closes the pipes (left open, they are an unraisable warning later)
        break
    else:
        pytest.fail("in 3 attempts the generation ended before its workers could be held")
    assert not left, "generator workers outlived their parent"
    if sig == signal.SIGTERM:
        assert proc.returncode == 130, stderr
        lines = [x for x in stderr.splitlines() if x.strip()]
        assert "Traceback" not in stderr and "interrupted by SIGTERM while generating" in lines[-1], stderr
        assert not list(where.rglob("*.partial-*")), "a staging directory was left"
    assert not out.exists() and not (where / "run").exists()


# ---- item 11: every market manifest field that changes a run -----------------------------------


@pytest.fixture(scope="module")
def small_market(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("market") / "ds"
    done = _cli("generate", "--dataset", "market", "--universe", "20", "--scale", "0.01", "--out", out)
    assert done.returncode == 0, done.stderr
    return out


def _quotes_entry(m: dict[str, object], table: str = "quotes") -> dict[str, object]:
    return next(e for e in m["partitions"] if e["table"] == table)  # type: ignore[attr-defined,index]


EDITS = {
    "scale": (lambda m: m.update(scale=1.0), ["scale 1 does not give its data"]),
    "seed": (lambda m: m.update(seed=8), ["seed 8"]),
    "universe": (lambda m: m.update(universe=21), ["universe 21"]),
    "calendar.venues": (lambda m: m["calendar"].update(venues=m["calendar"]["venues"][:-1]), ["calendar.venues"]),
    "calendar.days": (lambda m: m["calendar"].update(days=m["calendar"]["days"][:-1]), ["calendar.days"]),
    "day": (lambda m: _quotes_entry(m).update(day=m["calendar"]["days"][3]), ["day", "block-0.parquet"]),
    "rows": (lambda m: _quotes_entry(m).update(rows=_quotes_entry(m)["rows"] + 1), ["rows"]),
    "no hash": (lambda m: _quotes_entry(m).pop("hash"), ["lacks hash"]),
    "no rows": (lambda m: _quotes_entry(m, "trades").pop("rows"), ["lacks rows"]),
    "csv rows": (lambda m: m["csv"]["trades"].update(rows=m["csv"]["trades"]["rows"] + 5), ["trades CSV's rows"]),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_an_edited_market_manifest_is_refused_naming_the_field(small_market: Path, tmp_path: Path, edit: str) -> None:
    """Each of these edits once passed validate with the same content hash, and a run reported
    another scale, replayed other events or miscounted M-SE's rows."""
    ds = tmp_path / "ds"
    shutil.copytree(small_market, ds)
    manifest = json.loads((ds / "manifest.json").read_text())
    change, words = EDITS[edit]
    change(manifest)
    (ds / "manifest.json").write_text(json.dumps(manifest))
    guard = Guard(tmp_path, tmp_path / "r")
    _one_line(_cli("validate", ds), "manifest", *words)
    _one_line(_cli("run", "--engines", "duckdb", "--suite", "market", "--data", ds, "--out", tmp_path / "r"), *words)
    guard.unchanged()
    assert not (tmp_path / "r").exists()


def test_the_checks_change_no_content_hash(tiny: object, market_tiny: object) -> None:
    """The fields are checked against the data, not hashed: every published hash stands."""
    assert tiny.manifest.content_hash == TINY_HASH  # type: ignore[attr-defined]
    assert market_tiny.manifest.content_hash == MARKET_TINY_HASH  # type: ignore[attr-defined]


# ---- item 12: a lock for import and generate ---------------------------------------------------


def _wait_for_file(path: Path, proc: subprocess.Popen[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.02)


def test_concurrent_imports_into_one_place_are_one_line_each(tmp_path: Path) -> None:
    """Three imports into one --out once ended in ``OSError: Directory not empty`` tracebacks:
    now the first imports, the others are refused naming it."""
    src = _tardis_trades(tmp_path / "big.csv", 2_000_000)
    out = tmp_path / "ds"
    argv = [sys.executable, "-m", "tickbench.cli", "import", "tardis", str(src), "--out", str(out),
            "--memory-limit", "16"]
    env = {**os.environ, "COLUMNS": "400"}
    first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _wait_for_file(tmp_path / ".ds.lock", first)
    others = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
              for _ in range(2)]
    results = [(p, *p.communicate(timeout=600)) for p in (first, *others)]
    assert first.returncode == 0, results[0][2]
    for p, stdout, stderr in results[1:]:
        _one_line(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr), f"--out {out}",
                  f"pid {first.pid}")
    assert sorted(x.name for x in tmp_path.iterdir()) == ["big.csv", "ds"]
    assert _cli("validate", out).returncode == 0


def test_a_second_generation_waits_and_reuses_the_first(tmp_path: Path) -> None:
    """Two generations (or two runs that generate) into one place: the second waits for the
    first, naming it, then reuses its dataset; both print the same content hash."""
    out = tmp_path / "ds"
    argv = [sys.executable, "-m", "tickbench.cli", "generate", "--out", str(out), "--scale", "0.01"]
    first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for_file(tmp_path / ".ds.lock", first)
    second = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "COLUMNS": "400"})
    (out1, err1), (out2, err2) = first.communicate(timeout=600), second.communicate(timeout=600)
    assert first.returncode == 0 and second.returncode == 0, err1 + err2
    assert "Traceback" not in err1 + err2
    assert out1.split()[-1] == out2.split()[-1] and len(out2.split()[-1]) == 32
    assert f"being written by another tickbench (pid {first.pid}" in " ".join(err2.split())
    assert sorted(x.name for x in tmp_path.iterdir()) == ["ds"]


# ---- item 14: one line, never a traceback ------------------------------------------------------


def test_a_full_disk_while_writing_the_report_leaves_no_truncated_file(finished: Path, tmp_path: Path) -> None:
    """The report once wrote report.html on a disk that filled up: a truncated page and a
    traceback. Now each page is written whole or not at all; one line names the disk."""
    with small_tmpfs(tmp_path / "small", "1m") as mount:
        target = mount / "rep"
        target.mkdir()
        old = "<html>an earlier report, whole</html>\n"
        (target / "report.html").write_text(old)
        with (mount / "filler").open("wb", buffering=0) as f, contextlib.suppress(OSError):
            while True:  # until the disk is full (ENOSPC), to the last block
                f.write(b"\0" * 512)
        guard = Guard(tmp_path, target)
        _one_line(_cli("report", finished / "results.json", "--out", target), f"the disk under {target} is full")
        guard.unchanged()
        assert (target / "report.html").read_text() == old
        assert sorted(p.name for p in target.iterdir()) == ["report.html"], "a half-written file was left"


def test_a_read_only_out_and_an_out_that_is_a_file(tiny_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "ro").mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(tmp_path / "ro")],
                                           capture_output=True).returncode != 0:
        pytest.skip("needs root to mount a read-only filesystem (CI runs as root)")
    try:
        out = tmp_path / "ro" / "run"
        guard = Guard(tmp_path, tmp_path / "ro")
        _one_line(_cli("run", "--engines", "duckdb", "--data", tiny_dir, "--out", out), f"--out {out}",
                  "cannot be written")
        guard.unchanged()
    finally:
        subprocess.run(["umount", "-l", str(tmp_path / "ro")], capture_output=True)
    file_out = tmp_path / "a-file"
    file_out.write_text("mine\n")
    guard = Guard(tmp_path, tmp_path / "nothing")
    _one_line(_cli("run", "--engines", "duckdb", "--data", tiny_dir, "--out", file_out), f"--out {file_out}",
              "is a file")
    guard.unchanged()


@pytest.mark.parametrize("damage", ["garbage", "ts beyond ns"])
def test_a_damaged_partition_is_one_line_naming_it(tiny_dir: Path, tmp_path: Path, damage: str) -> None:
    """A partition replaced by garbage of its own size, or by a Parquet file whose timestamps
    (µs) do not fit in nanoseconds, with the manifest's sizes kept consistent: run and validate
    each say so in one line naming the file."""
    ds = tmp_path / "ds"
    shutil.copytree(tiny_dir, ds)
    manifest = json.loads((ds / "manifest.json").read_text())
    entry = next(e for e in manifest["partitions"] if e["table"] == "trades" and e["rows"] > 2)
    path = ds / entry["path"]
    if damage == "garbage":
        path.write_bytes(np.random.default_rng(1).bytes(path.stat().st_size))
    else:
        t = pq.read_table(path)
        us = t.column("ts").cast(pa.int64()).to_numpy() // 1000
        us[1] = 10_500_000_000_000_000  # 2302-09-25 in µs: beyond int64 nanoseconds
        pq.write_table(t.set_column(0, "ts", pa.array(us, pa.timestamp("us", tz="UTC"))), path)
        entry["bytes"] = path.stat().st_size
        (ds / "manifest.json").write_text(json.dumps(manifest))
    guard = Guard(tmp_path, tmp_path / "r")
    _one_line(_cli("validate", ds), entry["path"])
    _one_line(_cli("run", "--engines", "duckdb", "--data", ds, "--out", tmp_path / "r"), entry["path"])
    guard.unchanged()
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("flag", "value", "words"), [
    ("--users", "²", ["--users ²"]),
    ("--timeout", "nan", ["--timeout nan", "finite"]),
    ("--timeout", "inf", ["--timeout inf", "finite"]),
    ("--timeout", "-1", ["--timeout -1", "positive"]),
])
def test_an_option_value_nobody_could_mean_is_refused(market_tiny_dir: Path, tmp_path: Path, flag: str, value: str,
                                                      words: list[str]) -> None:
    guard = Guard(tmp_path, tmp_path / "r")
    _one_line(_cli("run", "--engines", "duckdb", "--suite", "market", "--data", market_tiny_dir, "--out",
                   tmp_path / "r", flag, value), *words)
    guard.unchanged()
    assert not (tmp_path / "r").exists()


# ---- item 15: resumed settings are checked as the command line's --------------------------------


RESUME_EDITS = {
    "users": (lambda c: c.update(suite="market", options={"market": {"users": ["abc"]}}), ["--users abc"]),
    "repetitions": (lambda c: c.update(repetitions=0), ["--repetitions 0"]),
    "engines": (lambda c: c.update(engines=["nosuchdb"]), ["unknown engine nosuchdb"]),
    "ingest_seconds": (lambda c: c.update(suite="market", options={"market": {"ingest_seconds": -5}}),
                       ["--ingest-seconds -5"]),
    "timeout": (lambda c: c.update(timeout_s=-1.0), ["--timeout -1.0"]),
}


@pytest.mark.parametrize("edit", list(RESUME_EDITS))
def test_resume_checks_the_recorded_settings(finished: Path, tmp_path: Path, edit: str) -> None:
    out = _copy_run(finished, tmp_path)
    raw = json.loads((out / "results.json").read_text())
    change, words = RESUME_EDITS[edit]
    change(raw["config"])
    (out / "results.json").write_text(json.dumps(raw))
    before = _state(out)
    guard = Guard(tmp_path, out)
    _one_line(_cli("run", "--resume", out), f"--resume {out}", *words)
    guard.unchanged()
    assert _state(out) == before


def test_a_user_count_given_twice_is_one() -> None:
    """``--users 1,01,1`` once wrote three records with one id: now one count, one cell."""
    from tickbench.engines.registry import adapter_class
    from tickbench.suites.registry import suites

    market = suites()["market"]
    users = next(o for o in market.options if o.name == "users")
    assert users.value("1,01,1") == (1,)
    opts = {**market.defaults(), "users": users.value("1,01,1")}
    ids = market.cell_ids(opts, adapter_class("duckdb"))
    assert len(ids) == len(set(ids))
    assert sum("users=1" in i and "VWAB" in i for i in ids) == 1


# ---- item 16: report.md escaped like report.html ---------------------------------------------------


def test_report_md_is_escaped(finished: Path, tmp_path: Path) -> None:
    """A backtick in a symbol once broke out of its code span and left raw HTML in report.md,
    and reasons from results.json went in as they were. Now neither opens markup: CommonMark
    finds no HTML of theirs, and the symbol is whole in one code span."""
    out = _copy_run(finished, tmp_path)
    raw = json.loads((out / "results.json").read_text())
    symbol = "BTC`<img src=x onerror=alert(1)>`-USD"
    raw["params"]["symbol"] = symbol
    rec = next(r for r in raw["records"] if r["benchmark"] == "O-S")
    rec.update(status="error", reason="<script>alert(2)</script> `x` **bold** [link](http://x) | cell")
    (out / "results.json").write_text(json.dumps(raw))
    guard = Guard(tmp_path, out)
    done = _cli("report", out / "results.json")
    assert done.returncode == 0, done.stderr
    guard.unchanged()
    md = MarkdownIt("commonmark").enable("table")
    text = (out / "report.md").read_text()
    tokens = [t for block in md.parse(text) for t in [block, *(block.children or [])]]
    html_bits = " ".join(t.content for t in tokens if t.type in ("html_inline", "html_block"))
    assert "<img" not in html_bits and "<script" not in html_bits, html_bits[:500]
    assert any(t.type == "code_inline" and symbol in t.content for t in tokens), "the symbol's code span was broken"
    rendered = md.render(text)
    assert "<img" not in rendered and "<script" not in rendered and 'href="http://x"' not in rendered
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in rendered
    page = (out / "report.html").read_text()
    assert "<script>alert(2)" not in page and "<img src=x" not in page
