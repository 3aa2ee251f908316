"""The published suite (SPEC §2.1): the reference paper's 14 queries, W and SE.

The benchmarks themselves (ids, answer columns, sort order) are the paper dataset's spec,
:mod:`tickbench.datasets.paper.spec`, re-exported here; the suite's protocol is
:mod:`tickbench.suites.published.suite`.
"""

from __future__ import annotations

from tickbench.datasets.paper.spec import BENCHMARKS, BY_ID, LOADS, QUERIES, QUERY_IDS, Benchmark

__all__ = ["BENCHMARKS", "BY_ID", "LOADS", "QUERIES", "QUERY_IDS", "Benchmark"]
