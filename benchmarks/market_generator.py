"""Market dataset generator throughput (``make bench-market-generator``): rows/s and MB/s per table,
wall time and peak memory at a given scale and universe.

MB/s is given twice: of the Parquet written, and of the same rows as CSV. Peak memory is sampled
(every 0.2 s) over the generating process and its workers: the largest single process and the
largest sum over all of them.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import threading
import time
from pathlib import Path

import psutil

from tickbench.datasets.base import generate


class PeakMemory:
    """Samples the resident memory of this process and its descendants in a background thread."""

    def __init__(self, every_s: float = 0.2) -> None:
        self.every_s = every_s
        self.largest = 0  # one process
        self.total = 0  # all of them at one moment
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            rss = []
            for p in [me, *me.children(recursive=True)]:
                try:
                    rss.append(p.memory_info().rss)
                except psutil.Error:
                    continue
            self.largest = max(self.largest, *rss)
            self.total = max(self.total, sum(rss))
            self._stop.wait(self.every_s)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scale", type=float, default=0.1)
    ap.add_argument("--universe", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--dir", type=Path, default=None, help="where to write (default: a temporary directory)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tickbench-bench-", dir=args.dir) as tmp, PeakMemory() as mem:
        t0 = time.perf_counter()
        m = generate(Path(tmp) / "data", args.scale, args.seed, jobs=args.jobs, dataset="market",
                     universe=args.universe)
        seconds = time.perf_counter() - t0
    print(f"market generator: scale {args.scale:g}, universe {args.universe:,}, seed {args.seed}, {args.jobs} jobs, "
          f"{seconds:.1f} s wall on {os.cpu_count()} cores ({platform.processor() or platform.machine()})")
    print(f"{'table':<8}{'rows':>14}{'rows/s':>14}{'Parquet MB':>12}{'MB/s':>8}{'CSV MB':>10}{'MB/s':>8}")
    for table in ("quotes", "trades"):
        parts = [p for p in m.partitions if p["table"] == table]
        rows = sum(p["rows"] for p in parts)
        pq_mb = sum(p["bytes"] for p in parts) / 1e6
        csv_mb = sum(p["csv_bytes"] for p in parts) / 1e6
        print(f"{table:<8}{rows:>14,}{rows / seconds:>14,.0f}{pq_mb:>12.1f}{pq_mb / seconds:>8.1f}"
              f"{csv_mb:>10.1f}{csv_mb / seconds:>8.1f}")
    total = sum(p["rows"] for p in m.partitions if p["table"] in ("quotes", "trades"))
    print(f"{'all':<8}{total:>14,}{total / seconds:>14,.0f}")
    print(f"peak resident memory: {mem.largest / 2**20:,.0f} MiB in one process, "
          f"{mem.total / 2**20:,.0f} MiB over all of them")
    print(f"content hash {m.content_hash}")


if __name__ == "__main__":
    main()
