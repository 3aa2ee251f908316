"""The market suite's reference implementation: time and peak resident memory of each query on a
market dataset, each query in a fresh process (so each peak is that query's own).

    python benchmarks/market_reference.py --data data/market-sf1 [--queries M-NBBO,M-LAST] [--seed 7]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

CHILD = """
import json, resource, sys, time
from tickbench.datasets.base import open_dataset
from tickbench.data.dataset import Dataset
from tickbench.datasets.market.params import market_params
from tickbench.datasets.market.reference import answer
ds = open_dataset(sys.argv[1])
p = market_params(ds, int(sys.argv[3]))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
out = answer(sys.argv[2], ds, p)
seconds = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "rows": out.height, "peak_kib": peak, "before_kib": before}))
"""


def main() -> None:
    from tickbench.datasets.market.reference import QUERIES

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", required=True)
    ap.add_argument("--queries", default=",".join(QUERIES))
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    print(f"{'query':<12}{'seconds':>10}{'rows':>10}{'peak RSS MiB':>14}{'before MiB':>12}")
    t_all = time.perf_counter()
    for qid in args.queries.split(","):
        res = subprocess.run([sys.executable, "-c", CHILD, args.data, qid, str(args.seed)],
                             capture_output=True, text=True, check=False)
        if res.returncode:
            print(f"{qid:<12} failed: {res.stderr.strip().splitlines()[-1:]}")
            continue
        r = json.loads(res.stdout.strip().splitlines()[-1])
        print(f"{qid:<12}{r['seconds']:>10.2f}{r['rows']:>10,}{r['peak_kib'] / 1024:>14,.0f}"
              f"{r['before_kib'] / 1024:>12,.0f}")
    print(f"total {time.perf_counter() - t_all:.1f} s (with each process's start and parameter draw); "
          f"this process's peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB")


if __name__ == "__main__":
    main()
