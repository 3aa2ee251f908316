"""Generator throughput: rows/s and MB/s per table at a given scale (``make bench-generator``).

MB/s is given twice: of the Parquet written, and of the same rows as CSV (the size a user
would otherwise move around).
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

from tickbench.datasets.base import generate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scale", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tickbench-bench-") as tmp:
        t0 = time.perf_counter()
        m = generate(Path(tmp) / "data", args.scale, args.seed, jobs=args.jobs)
        seconds = time.perf_counter() - t0
    print(f"generator: scale {args.scale:g}, seed {args.seed}, {args.jobs} jobs, "
          f"{seconds:.1f} s wall on {os.cpu_count()} cores ({platform.processor() or platform.machine()})")
    print(f"{'table':<8}{'rows':>14}{'rows/s':>14}{'Parquet MB/s':>14}{'CSV MB/s':>12}")
    for table in ("trades", "book"):
        parts = [p for p in m.partitions if p["table"] == table]
        rows = sum(p["rows"] for p in parts)
        pq_mb = sum(p["bytes"] for p in parts) / 1e6
        csv_mb = sum(p["csv_bytes"] for p in parts) / 1e6
        print(f"{table:<8}{rows:>14,}{rows / seconds:>14,.0f}{pq_mb / seconds:>14.1f}{csv_mb / seconds:>12.1f}")
    total = sum(p["rows"] for p in m.partitions)
    print(f"{'all':<8}{total:>14,}{total / seconds:>14,.0f}")
    print(f"content hash {m.content_hash}")


if __name__ == "__main__":
    main()
