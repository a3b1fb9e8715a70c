# SPDX-License-Identifier: MIT
"""eval_in_sandbox caps processes too: the reference let a fork bomb exhaust the host.

Each test runs for a root and for a non-root caller (fixture ``caller``).  The bomb's
children exec ``sleep`` with a unique duration, so that the host sees them by their
command line for as long as they live.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid

from support.callers import Caller
from support.processes import pids_with_marker
from support.timing import cpu, eval_cpu, slow

from pysandbox import Limits, ProcessOutput

BOMB = """
import os, sys, time
forked = 0
try:
    while forked < 1000:
        if os.fork() == 0:
            os.execv("/bin/sleep", ["/bin/sleep", MARKER])
        forked += 1
except OSError:
    pass
print(forked, flush=True)
"""

#: The holder waits for one of its children to end: the host kills one to release it.
HOLD = "os.wait()\n"

#: Processes the bomb must hold at once for the tests to say that it reached its cap.
AT_CAP = 50

#: CPU seconds of the bombs' sandboxes, far from being what stops them: with a cgroup the
#: CPU cap counts the whole sandbox, and 60 forks and execs with bwrap's start-up took
#: 3.3 s of CPU in the lab's emulated guest (0.08 s here), past eval's default of 1 s, which
#: killed the bomb (137) before it reached its process cap.
BOMB_CPU = eval_cpu(30)


def unique_marker() -> str:
    """A duration that ``sleep`` accepts and that no other process has in argv: an hour,
    so that the bomb's children outlive the test however slow the machine (30 s ran out
    in the lab's emulated guest while the other sandboxes started); the sandbox's end
    kills them."""
    return f"3600.{uuid.uuid4().int % 10**15:015d}"


def bomb(marker: str, hold: bool = False) -> str:
    return f"MARKER = {marker!r}\n" + BOMB + (HOLD if hold else "")


def test_fork_bomb_is_refused_and_the_host_can_still_fork(caller: Caller) -> None:
    marker = unique_marker()
    host_failures: list[BaseException] = []
    stop = threading.Event()

    def host_forks() -> None:
        while not stop.is_set():
            try:
                subprocess.run(["/bin/true"], check=True, timeout=10)
            except BaseException as exc:  # recorded: the host must never fail to fork
                host_failures.append(exc)

    forker = threading.Thread(target=host_forks)
    forker.start()
    try:
        result = caller.eval_in_sandbox(
            bomb(marker), cpu_max_time_sec=BOMB_CPU, timeout_max_time_sec=slow(10)
        )
    finally:
        stop.set()
        forker.join()
    assert result.returncode == 0, result.stderr
    assert AT_CAP < int(result.stdout) < 64
    assert host_failures == []
    assert pids_with_marker(marker) == []


def test_the_program_cannot_change_the_inits_limits(caller: Caller) -> None:
    """Same uid as the init, but prlimit on another process is refused by the filter:
    otherwise the program could starve the init and lose its own report."""
    code = (
        "import resource\n"
        "try:\n"
        "    resource.prlimit(1, resource.RLIMIT_NOFILE, (3, 3)); print('changed')\n"
        "except OSError as exc:\n"
        "    print(exc.errno)\n"
    )
    result = caller.run_python(code, files={"kept.txt": b"x"}, limits=Limits(cpu_time=cpu(1)))
    assert result.stdout == b"1\n"
    assert dict(result.files) == {"kept.txt": b"x"} and not result.files_truncated


def test_a_bomb_at_its_cap_does_not_starve_other_sandboxes(caller: Caller) -> None:
    """While one sandbox holds all its processes, others of the same caller still run.

    For a root caller, each sandbox counts its own processes (with one uid shared by
    every sandbox, their init could not fork).  For a non-root caller the count is its
    uid's, by design: a new sandbox's cap is set above what the uid holds when it starts.
    """
    marker = unique_marker()
    held: list[ProcessOutput] = []
    holder = threading.Thread(
        target=lambda: held.append(
            caller.eval_in_sandbox(
                bomb(marker, hold=True), cpu_max_time_sec=BOMB_CPU, timeout_max_time_sec=slow(20)
            )
        )
    )
    holder.start()
    try:
        deadline = time.monotonic() + slow(10)
        while len(pids_with_marker(marker)) < AT_CAP and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(pids_with_marker(marker)) >= AT_CAP, "the bomb never reached its cap"
        others = [
            caller.eval_in_sandbox(f"print({i})", cpu_max_time_sec=eval_cpu()).stdout
            for i in range(5)
        ]
        still = pids_with_marker(marker)
    finally:
        for pid in pids_with_marker(marker)[:1]:
            os.kill(pid, signal.SIGKILL)  # releases the holder
        holder.join()
    assert others == [str(i) for i in range(5)]
    assert len(still) >= AT_CAP, "the bomb let go of its processes before the others ran"
    assert held and held[0].returncode == 0 and int(held[0].stdout) >= AT_CAP, held
    assert pids_with_marker(marker) == []
