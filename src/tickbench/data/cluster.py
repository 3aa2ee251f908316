"""Generation on a Dask distributed cluster (``tickbench generate --cluster ADDRESS``).

The generator's partitions are independent by design (each draws from its own named random
stream), so a cluster runs them as independent tasks and the dataset's content hash is the
one a single machine computes. Every worker writes its partitions into the staging directory
the client created beside ``--out``; that directory must therefore be on a filesystem every
worker sees at the same path (NFS, a cluster filesystem, or object storage mounted as one).
The client then writes the bulk-load CSV and the manifest and moves the staging directory into
place, exactly as on one machine.

``ADDRESS`` is a running scheduler (``tcp://host:8786``, started with ``dask scheduler`` and
joined by ``dask worker tcp://host:8786`` on each machine), or ``local:N`` for a cluster of N
worker processes on this machine that lives as long as the command (tests, trying it out).

Dask distributed is an optional dependency (``pip install 'tickbench[cluster]'``): imported
here only, and only when ``--cluster`` is given.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any


def connect_timeout_s() -> float:
    """Seconds to reach the scheduler and find a worker (``TICKBENCH_CLUSTER_TIMEOUT``, default 10)."""
    return float(os.environ.get("TICKBENCH_CLUSTER_TIMEOUT", "10"))


LOCAL = re.compile(r"local:(\d+)")
INSTALL_HINT = "install it with `pip install 'tickbench[cluster]'` (Dask distributed) on this machine and every worker"


class ClusterError(Exception):
    """The cluster cannot be used: Dask missing, address malformed or unreachable."""


def check_address(address: str) -> None:
    """Refuse a malformed ``--cluster`` value before anything is generated."""
    m = LOCAL.fullmatch(address)
    if (address == "local" or address.startswith("local:")) and not (m and int(m.group(1)) >= 1):
        raise ClusterError(f"--cluster {address} is not a local cluster; give local:N with N >= 1 worker processes")
    if not address.strip():
        raise ClusterError("--cluster: give a scheduler address (tcp://HOST:8786) or local:N")


@contextmanager
def cluster_map(address: str) -> Iterator[Callable[[Callable[[Any], Any], Iterable[Any]], Iterator[Any]]]:
    """A ``map(fn, items)`` that runs each item as a task on the cluster at ``address`` and
    yields the results as they complete (in any order). A local cluster is shut down on exit;
    a remote one is only disconnected from."""
    check_address(address)
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError as exc:
        raise ClusterError(f"--cluster {address} needs Dask distributed, which is not installed ({exc}); "
                           f"{INSTALL_HINT}") from None
    m = LOCAL.fullmatch(address)
    timeout = connect_timeout_s()
    cluster = None
    try:
        if m:
            # One single-threaded process per worker: the generator is numpy-bound and holds
            # the GIL for much of a partition, so threads would not add throughput.
            cluster = LocalCluster(n_workers=int(m.group(1)), threads_per_worker=1, processes=True,
                                   host="127.0.0.1", dashboard_address=None)
            client = Client(cluster)
        else:
            client = Client(address, timeout=timeout)
    except (OSError, TimeoutError, ValueError) as exc:
        if cluster is not None:
            cluster.close()
        if m:
            raise ClusterError(f"--cluster {address} could not start a local Dask cluster ({exc}); "
                               "use --jobs N instead, or check the Dask installation") from None
        raise ClusterError(
            f"--cluster {address} cannot be reached; no Dask scheduler answered there within {timeout:g} s "
            f"({exc}). Start one with `dask scheduler` (it prints its tcp://HOST:8786 address) and "
            "`dask worker tcp://HOST:8786` on each machine, check the address and the firewall, "
            "or use --cluster local:N on one machine") from None
    try:
        if not m:
            try:
                client.wait_for_workers(1, timeout=timeout)
            except TimeoutError:
                raise ClusterError(f"--cluster {address} has no workers; start "
                                   f"`dask worker {address}` on each machine") from None

        def run(fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
            # pure=False: every task runs, even two with equal arguments; retries=1 survives
            # the loss of one worker (a partition regenerates with identical bytes).
            futures = client.map(fn, list(items), pure=False, retries=1)
            try:
                for fut in as_completed(futures):
                    yield fut.result()
            finally:
                client.cancel(futures)

        yield run
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
