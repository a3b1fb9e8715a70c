# SPDX-License-Identifier: MIT
"""Issue 18, item 4: a call returns only when its sandbox is gone, however slow the
teardown, and the sandbox cannot make its own teardown slow.

Millions of hard links or empty files in ``/sandbox`` cost the tmpfs no page, yet the
kernel frees them one by one when the sandbox ends: that outlasted the C core's 2-second
kill grace, the call returned while the killed program still ran, and the init lived on
under the host's pid 1.  Now the C core waits for the init's pidfd however long it takes
(bwrap is never killed while the init lives), and counts the working directory's inodes
against ``Limits.disk`` (``Limits.disk_inodes()``): past them the sandbox is killed, with
``Status.DISK_EXCEEDED``.  The wall time reported stays the program's.

The slow teardown is made from the host side, the way a kernel slow to free a sandbox
looks to the C core: a tracer (this test, root) seizes the sandboxed program, so once
it is killed its zombie waits for the tracer, and its pid namespace, and so the init,
cannot end until the tracer lets go.  Each attack runs as root and as a non-root caller.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
import time

import pytest
from support.callers import Caller
from support.processes import pids_with_marker, survivors, unique_marker
from support.timing import KILL_LATENCY, SLOWDOWN, cpu

from pysandbox import Limits, Result, Status
from pysandbox._model.limits import DISK_BYTES_PER_INODE, MIN_DISK_INODES
from pysandbox._model.verdict import describe

libc = ctypes.CDLL(None, use_errno=True)
PTRACE_SEIZE = 0x4206
WALL = 0x40000000  # __WALL: wait for a tracee that is not our child
#: How long the tracer holds the killed program's zombie: longer than the 2 s after
#: which the C core used to SIGKILL bwrap and return.
HOLD = 4.0

#: Prints a line and waits to be killed at the wall-time limit.
WAITS = "import sys, time\nprint('ready', flush=True)\ntime.sleep(60)\n"


def _seize(pid: int) -> None:
    if libc.ptrace(PTRACE_SEIZE, pid, None, None) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"PTRACE_SEIZE {pid}: {os.strerror(error)}")


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def _the_program(marker: str, within: float = 60.0) -> int:
    """The host pid of the sandboxed program: of the processes with the marker in their
    command line (bwrap's left out), the one whose parent has it too (the init, pid 1
    of the sandbox, whose argv holds the program's)."""
    until = time.monotonic() + within
    while time.monotonic() < until:
        found = pids_with_marker(marker, bwrap=False)
        for pid in found:
            try:
                if _parent(pid) in found:
                    return pid
            except (OSError, ValueError, IndexError):
                continue
        time.sleep(0.01)
    raise AssertionError("the sandboxed program never started")


@pytest.mark.skipif(os.geteuid() != 0, reason="the tracer must be root to seize any sandbox")
def test_the_call_returns_only_once_the_sandbox_is_gone(caller: Caller) -> None:
    marker = unique_marker()
    wall = SLOWDOWN / 3  # 1 s on real hardware: room to start and print under emulation
    outcome: dict[str, object] = {}

    def call() -> None:
        try:
            outcome["result"] = caller.run_python(
                WAITS, args=[marker], limits=Limits(wall_time=wall, cpu_time=cpu(1))
            )
        except BaseException as exc:  # reported by the main thread
            outcome["error"] = exc
        outcome["returned"] = time.monotonic()

    thread = threading.Thread(target=call)
    thread.start()
    program = _the_program(marker)
    _seize(program)
    try:
        # The program is killed at the wall limit; its zombie now waits for us.
        until = time.monotonic() + wall + HOLD
        while time.monotonic() < until and "returned" not in outcome:
            time.sleep(0.05)
        assert "returned" not in outcome, "the call returned while its sandbox still lived"
    finally:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(program, WALL)
        released = time.monotonic()
        thread.join(120)
    assert "error" not in outcome, outcome.get("error")
    result = outcome["result"]
    assert isinstance(result, Result)
    assert outcome["returned"] >= released  # type: ignore[operator]
    assert result.status is Status.WALL_TIME_EXCEEDED, describe(result, Limits(wall_time=wall))
    # The program's wall time, not the teardown's.
    assert wall <= result.wall_time < wall + KILL_LATENCY, result.wall_time
    assert result.stdout == b"ready\n"
    assert survivors(marker, within=0) == []


#: Makes files of one kind in /sandbox until told count (argv[2]) or refused, printing
#: how many now and then: hard links of one empty file, empty files, or directories.
MAKE = """
import os, sys
kind, count = sys.argv[1], int(sys.argv[2])
open("empty", "w").close()
make = {
    "links": lambda name: os.link("empty", name),
    "files": lambda name: os.close(os.open(name, os.O_CREAT | os.O_WRONLY)),
    "dirs": os.mkdir,
}[kind]
for i in range(count):
    make("n%x" % i)
    if i % 1000 == 0:
        print(i, flush=True)
print("made", count, flush=True)
"""


@pytest.mark.parametrize("kind", ["links", "files", "dirs"])
def test_files_past_the_disk_limit_kill_the_sandbox(caller: Caller, kind: str) -> None:
    """Ten times the inodes the disk allows would take the program a moment; the C core
    kills it when the count passes the cap, with a status that says so."""
    limits = Limits(wall_time=120, cpu_time=60, disk=4 * 2**20, files_out_count=10)
    cap = limits.disk_inodes()
    assert cap == 4 * 2**20 // DISK_BYTES_PER_INODE
    result = caller.run_python(MAKE, args=[kind, str(10 * cap)], limits=limits)
    assert result.status is Status.DISK_EXCEEDED, describe(result, limits)
    assert b"made" not in result.stdout
    made = int(result.stdout.split()[-1]) if result.stdout else 0
    assert made < 10 * cap - 1000
    assert describe(result, limits).startswith(
        f"disk_exceeded (limit 4 MiB, {cap} files), killed by SIGKILL"
    )


def test_files_within_the_disk_limit_are_left_alone(caller: Caller) -> None:
    limits = Limits(wall_time=120, cpu_time=60, disk=1 * 2**20, files_out_count=10)
    cap = limits.disk_inodes()
    # The tmpfs's root, the code file and "empty" take three.
    result = caller.run_python(MAKE, args=["links", str(cap - 8)], limits=limits)
    assert result.status is Status.OK, describe(result, limits)
    assert result.stdout.endswith(b"made %d\n" % (cap - 8))


def test_the_fewest_inodes_hold_whatever_the_disk() -> None:
    assert Limits(disk=4096).disk_inodes() == MIN_DISK_INODES
    assert Limits(disk=2**30).disk_inodes() == 2**20
