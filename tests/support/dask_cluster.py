# SPDX-License-Identifier: MIT
"""A real Dask cluster on 127.0.0.1 for tests: two worker processes under nannies."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from multiprocessing import resource_tracker

from distributed import Client, LocalCluster

from support.timing import slow

__all__ = [
    "local_cluster",
]


@contextlib.contextmanager
def local_cluster() -> Iterator[Client]:
    """A client of a fresh two-worker LocalCluster (processes under nannies, two threads
    each, its HTTP server on a free port), both closed on leaving."""
    cluster = LocalCluster(
        n_workers=2, processes=True, threads_per_worker=2, host="127.0.0.1", dashboard_address=":0"
    )
    try:
        with Client(cluster) as made:
            made.wait_for_workers(2, timeout=slow(20))
            yield made
    finally:
        cluster.close()
        # The nannies spawned their workers, which started multiprocessing's resource
        # tracker as a child of this process; other tests sharing the process assert it
        # has no children, so it goes with the cluster (the next spawn starts it again).
        resource_tracker._resource_tracker._stop()  # type: ignore[attr-defined]
