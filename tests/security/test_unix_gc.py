# SPDX-License-Identifier: MIT
"""Issue 18, item 5: the sandbox's memory is freed by the time the call returns.

192 MiB of memfds held in an ``SCM_RIGHTS`` cycle of unix sockets stayed allocated for
more than 30 s after the sandbox and its cgroup were gone, charged to no live limit:
the kernel's unix garbage collector runs only when some unix socket is released.  The C
core now has it run, and waits for it, after a reap that left a socket in flight
(``src/unixgc.c``).  The sandbox below frees its cycle itself before it ends, so at the
reap nothing is in flight while a kernel worker is still putting the memfds (about 10 ms
for 192 MiB): the wait for those is the memory cgroup's (``_cgroups/node.py``, ``settle``), and a
caller without one is not promised it (docs/security.rst, "The end of a call").  The host side
reads the kernel's count of shared memory (memfd pages are ``Shmem``) before and right
after each call; the race is lost about every other call without the wait, so three
calls are made.  Each attack runs as root and as a non-root caller.
"""

from __future__ import annotations

import pytest
from support.callers import Caller

from pysandbox import Limits, Status

MIB = 2**20
#: What the sandbox leaves in flight, and how much of it may still be allocated when the
#: call returns (other tests of this run may hold some shared memory meanwhile).
LEFT = 192 * MIB
SLACK = 96 * MIB

#: Fills memfds with argv[1] MiB and leaves them in a cycle of two socket pairs: each
#: pair's first end is in flight to the other's, the memfds with them; then exits.
CYCLE = """
import os, socket, sys
size = int(sys.argv[1]) * 2**20
chunk = b"x" * 2**20
memfds = []
for i in range(size // (16 * 2**20)):
    fd = os.memfd_create("cargo")
    for _ in range(16):
        os.write(fd, chunk)
    memfds.append(fd)
a0, a1 = socket.socketpair()
b0, b1 = socket.socketpair()
socket.send_fds(b1, [b"a"], [a0.fileno(), *memfds])
socket.send_fds(a1, [b"b"], [b0.fileno()])
for fd in memfds:
    os.close(fd)
for end in (a0, a1, b0, b1):
    end.close()
print("left", len(memfds), "memfds in flight", flush=True)
"""


def _shmem() -> int:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("Shmem:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no Shmem line in /proc/meminfo")


#: Calls made: each would lose the race about half the time without the wait.
CALLS = 3


def test_memory_left_in_a_unix_socket_cycle_is_freed_by_the_return(caller: Caller) -> None:
    capped, why_not = caller.memory_cgroup()
    if not capped:
        pytest.skip(f"no memory cgroup for this caller, so no wait is promised: {why_not}")
    limits = Limits(wall_time=60, cpu_time=30, memory=512 * MIB)
    for call in range(CALLS):
        before = _shmem()
        result = caller.run_python(CYCLE, args=[str(LEFT // MIB)], limits=limits)
        after = _shmem()
        assert result.status is Status.OK, result.stderr
        assert result.stdout == b"left 12 memfds in flight\n"
        held = (after - before) / MIB
        assert after - before < SLACK, f"call {call}: {held:.0f} MiB still allocated"
