"""InfluxDB's query store (:class:`InfluxDBLoad`): line protocol built column-wise with Polars
(:mod:`.lineprotocol`) over HTTP ``/write``, the check that every row came back as a point, the
settling of the store (snapshots and full compactions), W (beside ``influx -import``) and SE (the
period's daily shards on disk)."""

from __future__ import annotations

import os
import subprocess
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.csv as pacsv

from tickbench.datasets.paper.schema import SCHEMAS, TABLES
from tickbench.engines.base import BulkLoad, LoadFigures, Storage, storage_figures
from tickbench.engines.influxdb.lineprotocol import line_batches
from tickbench.engines.influxdb.server import DB, MARKER, WRITERS, InfluxDBServer, bin_dir
from tickbench.engines.server import LOOPBACK

# Rows written per measurement; point counts equal row counts only if no point overwrote another.
# The market suite's measurements (market.py) too: trades for both datasets, quotes and
# instruments for the market's.
COUNT = ("SELECT count(price) FROM trades; SELECT count(b1price) FROM book; "
         'SELECT count(bid) FROM quotes; SELECT count("rank") FROM instruments')


class InfluxDBLoad(InfluxDBServer, BulkLoad, Storage):
    """The query store's load, its visibility and settling, W and SE, on the running server."""

    #: Databases written by load() whose compaction the runner waits for.
    _settling: set[str]
    _expected: dict[str, int]  # database -> the rows written into it, until a count shows them all

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._settling = set()
        self._expected = {}

    def _write_all(self, db: str, batches: Iterable[bytes]) -> None:
        """Send the batches with up to ``WRITERS`` requests in flight, so the next batch is
        formatted while the server ingests the previous ones."""
        with ThreadPoolExecutor(WRITERS) as pool:
            inflight: deque[Future[None]] = deque()
            for body in batches:
                if len(inflight) >= WRITERS:
                    inflight.popleft().result()
                inflight.append(pool.submit(self._write, db, body))
            for f in inflight:
                f.result()

    def _count(self, db: str) -> int:
        total = 0
        for r in self._query(COUNT, db=db):
            for s in r.get("series", []):
                total += int(s["values"][0][1])
        return total

    # -- loading ------------------------------------------------------------------------

    def _load_frames(self, db: str, frames: Iterable[tuple[str, pl.DataFrame]], expected: int,
                     create: bool = True) -> int:
        """Write ``(table, frame)`` pairs into a fresh database ``db``; check that every row
        came back as a point (a point with the same series and time would replace another)."""
        if create:
            self._create(db)
        self._write_all(db, line_batches(frames))
        self._expected[db] = expected  # checked by pending_visibility, which the runner calls next
        return expected

    def _parquet_frames(self, table: str, days: list[str]) -> Iterator[tuple[str, pl.DataFrame]]:
        # One file is one (day, exchange, sym) partition: trades tied on ts are all in it.
        for f in self.dataset.files(table, days):
            yield table, pl.read_parquet(f)

    def _load_paper(self) -> int:
        days = self.params.load_days()
        expected = self.dataset.sizes(days)["rows"]
        frames = (fr for t in TABLES for fr in self._parquet_frames(t, days))
        if self.endpoint is None:
            rows = self._load_frames(DB, frames, expected)
            self._settling.add(DB)
            return rows
        # The user's server: its files are not ours to watch settle (see METHODOLOGY.md).
        self.check_endpoint()
        self._create(self.db)
        self._write(self.db, f"{MARKER} created=1i".encode())
        return self._load_frames(self.db, frames, expected, create=False)

    def pending_visibility(self) -> bool:
        """Whether a database just written does not yet show every written row as a point.
        InfluxDB acknowledges a write once its points are in the cache and the WAL, but a count
        that runs while the cache is being snapshotted into a TSM file can miss some of them for
        a moment (seen at tiny scale: 541,350 of 547,832); the runner asks again. More points
        than rows, or fewer once the database has settled, means points were lost or replaced
        (a point with the same series and time replaces another): an error."""
        for db, want in list(self._expected.items()):
            # Settled before and after the count: a count taken while the cache was being
            # snapshotted can be short even though the shard looks settled a moment later.
            was_settled = self.endpoint is None and settled(self.root, db)
            got = self._count(db)
            if got == want:
                del self._expected[db]
            elif got > want or (was_settled and settled(self.root, db)):
                del self._expected[db]
                raise RuntimeError(f"{db}: {want} rows written but {got} points read back")
        return bool(self._expected)

    def pending_settle(self) -> bool:
        """Whether a database written by :meth:`load` is not yet
        settled: InfluxDB snapshots its cache to TSM files and fully compacts every shard (one
        generation of TSM files, empty WAL segments), which the configuration makes it do one
        second after a shard's last write. One listing of the databases' files; the runner waits.
        Nothing is pending on an external endpoint: its files are not ours to watch."""
        if not self._settling:
            return False
        if self.server is None or self.server.proc is None or self.server.proc.poll() is not None:
            raise RuntimeError(f"influxd is not running (log {self.log_file})")  # it would never settle
        self._settling = {db for db in self._settling if not settled(self.root, db)}
        return bool(self._settling)

    def _input_frames(self, fmt: str) -> tuple[list[tuple[str, pl.DataFrame]], int]:
        """The bulk-load day as frames, parsed from ``fmt``, and the input's bytes."""
        frames: list[tuple[str, pl.DataFrame]] = []
        nbytes = 0
        for table in TABLES:
            if fmt == "csv":
                path = self.dataset.csv_file(table)
                nbytes += path.stat().st_size
                opts = pacsv.ConvertOptions(column_types=SCHEMAS[table])
                frames.append((table, pl.from_arrow(pacsv.read_csv(path, convert_options=opts))))  # type: ignore[arg-type]
            elif fmt == "parquet":
                files = self.dataset.files(table, [self.dataset.bulk_day])
                nbytes += sum(f.stat().st_size for f in files)
                frames.extend((table, pl.read_parquet(f)) for f in files)
            else:
                raise ValueError(f"unknown format {fmt!r}")
        return frames, nbytes

    def _bulk_load_paper(self, fmt: str, scratch: Path) -> LoadFigures:
        frames, nbytes = self._input_frames(fmt)
        expected = sum(f.height for _, f in frames)
        rows = self._load_frames(f"w_{fmt}", frames, expected)
        return LoadFigures(rows=rows, input_bytes=nbytes,
                           detail={"database": f"w_{fmt}", "durability": self.w_durability()})

    def w_durability(self) -> str:
        """W's durability (its records' ``detail["durability"]``)."""
        return (f"wal-fsync-delay={self.wal_fsync_delay}: each /write is acknowledged (HTTP 204) only after "
                "the WAL entry holding its points is fsynced, so every row is on disk when W returns")

    def _influx_import(self, db: str, bodies: Iterable[bytes], scratch: Path) -> int:
        """``influx -import`` (its defaults) of the line-protocol ``bodies`` into ``db``, through a
        file in ``scratch`` removed afterwards (the importer's input, not the store); its bytes."""
        path = scratch / f"{db}.lp"
        with open(path, "wb") as out:
            out.write(f"# DML\n# CONTEXT-DATABASE: {db}\n".encode())
            for body in bodies:
                out.write(body)
        user, password = self.credentials() or ("", "")
        done = subprocess.run(
            [str(bin_dir() / "influx"), "-host", LOOPBACK, "-port", str(self.http_port),
             "-import", "-path", str(path), "-precision", "ns"],
            capture_output=True, text=True,  # the credentials in its environment, not on its command line
            env={**os.environ, "INFLUX_USERNAME": user, "INFLUX_PASSWORD": password})
        lp_bytes = path.stat().st_size
        path.unlink()
        if done.returncode != 0:
            raise RuntimeError(f"influx -import failed: {done.stderr[-2000:]}")
        return lp_bytes

    def _baseline_load_paper(self, fmt: str, scratch: Path) -> LoadFigures:
        """InfluxDB's own importer, ``influx -import``, with its defaults (5000 points per
        request, one request at a time) on a line-protocol file made from the same input:
        InfluxDB 1.x has no CSV or Parquet reader of its own."""
        frames, nbytes = self._input_frames(fmt)
        expected = sum(f.height for _, f in frames)
        db = f"baseline_{fmt}"
        self._create(db)
        scratch.mkdir(parents=True, exist_ok=True)
        lp_bytes = self._influx_import(db, line_batches(frames), scratch)
        self._expected[db] = expected  # checked by pending_visibility, which the runner calls next
        return LoadFigures(rows=expected, input_bytes=nbytes, detail={
            "database": db, "tool": "influx -import", "line_protocol_bytes": lp_bytes,
            "durability": self.w_durability()})

    def _storage_bytes_paper(self) -> dict[str, int]:
        """SE on the loaded database once compactions settled. Its shards are one per day
        (schema.influxql), so the 30-day period is the shards whose day is in it, split by
        :func:`shard_storage`; the multi-exchange day, when outside the period, is a shard of
        its own and is left out. The database's series file is counted whole."""
        if self.endpoint is not None:
            # Why: SE measures files on disk, and an external server's files are not ours to read.
            raise RuntimeError("SE measures InfluxDB's files on disk; an external endpoint's are not visible here")
        # The days with data: a day without any (an outage in a capture) has no shard.
        month = {e["day"] for t in TABLES for e in self.dataset.entries(t, self.params.days("month"))}
        shards_in = [(rp, str(i)) for i, rp, start in self._shards(DB) if start[:10] in month]
        if len(shards_in) != len(month):
            raise RuntimeError(f"SE: {len(shards_in)} of the period's {len(month)} daily shards with data "
                               f"found in {DB}")
        return shard_storage(self.root, DB, shards_in)

    def _shards(self, db: str) -> list[tuple[int, str, str]]:
        """``(id, retention policy, start time)`` of each shard of ``db`` (``SHOW SHARDS``; RFC
        3339 start times). A shard's files are in ``data/<db>/<retention policy>/<id>``."""
        out = []
        for r in self._query("SHOW SHARDS", db=""):
            for s in r.get("series", []):
                if s["name"] == db:
                    col = {name: k for k, name in enumerate(s["columns"])}
                    out += [(int(v[col["id"]]), str(v[col["retention_policy"]]), str(v[col["start_time"]]))
                            for v in s["values"]]
        return out


# -- disk ---------------------------------------------------------------------------------
def settled(root: Path, db: str) -> bool:
    """Whether every shard of ``db`` is one generation of TSM files with no compaction
    output pending (``*.tmp``) and no data left in its WAL segments."""
    # data/<db>/<retention policy>/<shard id>/; data/<db>/_series holds the series file.
    if not (root / "data" / db).is_dir():
        return False  # no shard written yet
    shards = [d for rp in (root / "data" / db).iterdir() if rp.name != "_series" and rp.is_dir()
              for d in rp.iterdir() if d.is_dir()]
    if not shards:
        return False
    for shard in shards:
        if any(shard.glob("*.tmp")):
            return False
        # TSM files are named <generation>-<sequence>.tsm; a full compaction leaves one generation.
        if len({f.name.split("-")[0] for f in shard.glob("*.tsm")}) != 1:
            return False
    return all(seg.stat().st_size == 0 for seg in (root / "wal" / db).glob("*/*/*.wal"))


def shard_storage(root: Path, db: str, shards: list[tuple[str, str]]) -> dict[str, int]:
    """SE's figures of ``shards`` (``(retention policy, id)``) of database ``db`` under the
    server's ``root``, as allocated on disk (``du``): each shard's TSM files are data; its
    ``fields.idx`` and ``index/`` (the series index), with the database's series file
    (``_series``, the keys of all its series), the index; its WAL directory the log. The
    apparent size of data and index follows."""
    data_dirs = [root / "data" / db / rp / i for rp, i in shards]
    index_parts = [root / "data" / db / "_series",
                   *(d / "fields.idx" for d in data_dirs), *(d / "index" for d in data_dirs)]
    index = sum(du(p) for p in index_parts)
    data = sum(du(d) for d in data_dirs) - sum(du(p) for p in index_parts[1:])
    log = sum(du(root / "wal" / db / rp / i) for rp, i in shards)
    apparent = sum(du(p, apparent=True) for p in [*data_dirs, index_parts[0]])
    return storage_figures("shards_and_series_allocated", data, index, log, shards_and_series_apparent=apparent)


def du(path: Path, apparent: bool = False) -> int:
    """Bytes under ``path`` (a directory or a file; 0 when absent): allocated on disk (as
    ``du``), or the files' apparent sizes."""
    if path.is_file():
        st = path.lstat()
        return st.st_size if apparent else st.st_blocks * 512
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            total += st.st_size if apparent else st.st_blocks * 512
    return total
