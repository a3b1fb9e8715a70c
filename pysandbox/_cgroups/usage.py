# SPDX-License-Identifier: MIT
"""What a sandbox's group counted: its peak memory, whether a limit was hit, its CPU time,
and the memory still charged to it once its processes are gone."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from .._model.record import record
from .files import (
    read_int,
    read_keyed,
)
from .node import Node, counts_cpu

__all__ = [
    "CgroupUsage",
    "read_cpu",
    "read_pids_refused",
    "read_usage",
    "settle",
    "shmem",
]


#: The most shared memory a dead group may still show once settled: its counters fold
#: in up to 64 pages per CPU late.
_SETTLED_SHMEM = 64 * (os.cpu_count() or 1) * os.sysconf("SC_PAGE_SIZE")


#: Passes of the kernel's deferred frees to wait for, at most, before a group goes.
_SETTLE_PASSES = 16


@record
class CgroupUsage:
    """What one sandbox's control group counted.  A counter this host lacks is None or
    False."""

    #: Bytes: the highest memory the group was charged (v1 ``memory.max_usage_in_bytes``,
    #: v2 ``memory.peak``, Linux 5.19+); None without a memory group.
    peak_memory: int | None
    #: The memory limit was hit: v1 ``memory.failcnt``, ``memory.memsw.failcnt`` or
    #: ``memory.kmem.tcp.failcnt`` (socket buffers) > 0, or
    #: ``memory.oom_control`` ``under_oom``/``oom_kill`` > 0; v2 ``memory.events``
    #: ``max``/``oom``/``oom_kill`` > 0.  Hitting the limit makes the kernel reclaim first
    #: (page cache), so this can be true for a program that still ended well.
    memory_exceeded: bool
    #: A fork or clone was refused by ``pids.max`` (``pids.events`` ``max`` > 0).
    pids_exceeded: bool
    #: Seconds of CPU (user + system) of every process that ran in the group: v1
    #: ``cpuacct.usage`` (when the cpuacct hierarchy is mounted), v2 ``cpu.stat``
    #: ``usage_usec``; None when neither is available.
    cpu_time: float | None


def _read_cpu(node: Node) -> float | None:
    """Seconds in ``node``'s CPU counter, or None when it cannot be read."""
    files = node.files
    if files.cpu_key is None:
        count = read_int(node.fd, files.cpu_usage)
    else:
        count = read_keyed(node.fd, files.cpu_usage).get(files.cpu_key)
    return None if count is None else count / files.cpu_per_second


def read_cpu(nodes: Iterable[Node]) -> float | None:
    """Seconds in the CPU counter of the first of ``nodes`` that counts CPU, or None."""
    for node in nodes:
        if counts_cpu(node):
            return _read_cpu(node)
    return None


def read_pids_refused(nodes: Iterable[Node]) -> int | None:
    """How many forks and clones ``pids.max`` has refused so far (``pids.events``
    ``max``), or None without a pids node."""
    for node in nodes:
        if "pids" in node.controllers:
            return read_keyed(node.fd, node.files.pids_events).get("max", 0)
    return None


def read_usage(nodes: Iterable[Node]) -> CgroupUsage:
    """Read the counters of every hierarchy; a counter that cannot be read is None/False."""
    peak: int | None = None
    memory_exceeded = pids_exceeded = False
    cpu_time: float | None = None
    for node in nodes:
        files = node.files
        if "memory" in node.controllers:
            peak = read_int(node.fd, files.memory_peak)
            events = read_keyed(node.fd, files.memory_events)
            memory_exceeded = any(
                (read_int(node.fd, name) or 0) > 0 for name in files.memory_failcnt
            ) or any(events.get(key, 0) > 0 for key in files.memory_event_keys)
        if "pids" in node.controllers:
            pids_exceeded = read_keyed(node.fd, files.pids_events).get("max", 0) > 0
        if cpu_time is None and counts_cpu(node):
            cpu_time = _read_cpu(node)
    return CgroupUsage(
        peak_memory=peak,
        memory_exceeded=memory_exceeded,
        pids_exceeded=pids_exceeded,
        cpu_time=cpu_time,
    )


def shmem(nodes: Iterable[Node]) -> int | None:
    """Bytes of shared memory charged to the group, or None without a memory node."""
    for node in nodes:
        if "memory" in node.controllers and node.fd >= 0:
            return read_keyed(node.fd, node.files.memory_stat).get("shmem")
    return None


def settle(nodes: list[Node], gc_pass: Callable[[], bool]) -> None:
    """Wait, while the group (empty now) still holds shared memory, for the kernel to
    free it: memfds a sandbox left in a unix socket cycle that its own processes had the
    collector free are put by a kernel worker, batch after batch, after the sandbox is
    gone (``src/unixgc.c``).  Each ``gc_pass`` returns once everything put before it is
    freed; two passes also cover the files queued on a socket freed in the first.  Stops
    when a pass after those frees nothing more: what is left is held on purpose (a file
    on a host tmpfs the sandbox could write)."""
    held = shmem(nodes)
    passes = 0
    while held is not None and held > _SETTLED_SHMEM and passes < _SETTLE_PASSES:
        if not gc_pass():
            return
        passes += 1
        now = shmem(nodes)
        if passes > 2 and now is not None and now >= held:
            return
        held = now
