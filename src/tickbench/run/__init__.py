"""The runner: it owns the clock of every measurement and every wait.

Engine processes (:mod:`tickbench.run.engine_process`) time each operation, and a suite's worker
operations, which run inside them, time their own work there; everything else that waits on an
engine (a cell's timeout, visibility, settling, a suite's pauses) waits here. Adapters never read
a clock (``tests/test_structure.py`` checks it); a server's readiness is polled by
:mod:`tickbench.engines.server`'s lifecycle, on the runner's behalf.
"""
