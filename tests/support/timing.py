# SPDX-License-Identifier: MIT
"""What the tests may assume about time, named once.

The suite must pass on a machine much slower than an idle developer's: a shared CI
runner, ``scripts/stress-test.sh`` (the suite beside ``stress-ng --cpu 2``), a guest under
QEMU's TCG emulation.  So a test bounds durations as follows:

* a LOWER bound is exact: a limit must hold however fast or slow the machine is;
* an UPPER bound says "promptly", sized for a machine ``SLOWDOWN`` times slower than
  an idle one, and always far below what the failure it guards against would take (the
  wall limit a test sets, the 30 s the sandboxed program sleeps...), so it still fails
  when the promise breaks.
* a CPU budget (the CPU limit under which a program must get its work done, not the
  limit a test proves) is sized for an idle development machine and multiplied by
  ``CPU_SCALE``: a load slows a program down in wall time, not in CPU time, so on real
  hardware it is 1; under emulation every instruction costs more CPU time, and the lab
  sets it (see ``CPU_SCALE``).  A limit a test proves is scaled the same way, which
  keeps the proof exact: the CPU used is compared with the scaled limit.
* Where a comparison between two measurements can replace a bound on one of them (the
  programs of parallel calls were all running at one instant), the test uses it: that
  does not depend on the machine at all.
"""

from __future__ import annotations

import math
import os

#: How many times slower than an idle 2-core development machine the suite must still
#: pass on: 3, or more where ``PYSANDBOX_TEST_SLOWDOWN`` says so (the VM lab, whose
#: emulated CPUs are much slower; ``scripts/cgroup-v2-job.sh`` measures it there).
SLOWDOWN = max(3.0, float(os.environ.get("PYSANDBOX_TEST_SLOWDOWN") or 3))

#: Seconds for anything that must happen "at once" (a cap passed, a cancel, a callback
#: that raised, an argument refused before anything runs): start an interpreter in a
#: sandbox, end it and return.  Idle: a few hundredths of a second, 0.1 to 0.4 s under
#: load (scaled with ``SLOWDOWN`` past 3).  In every test that uses it, a broken promise
#: would take 10 s or more.
PROMPTLY = 5.0 * SLOWDOWN / 3

#: Seconds by which a run may outlast its wall-clock limit: killing, reaping and
#: returning, on a slow machine (idle: about 0.01 s; scaled with ``SLOWDOWN`` past 3).
#: The programs these tests time out sleep 30 s or more, so a deadline that is not
#: enforced still fails.
KILL_LATENCY = 1.5 * SLOWDOWN / 3

#: CPU seconds each busy core may burn past a CPU limit before the tree is killed: the
#: C core samples the tree every 50 ms, then the watcher's own scheduling delay and the
#: kill.  A load slows the burning processes down as much as the watcher, so this does
#: not grow with ``SLOWDOWN``: measured 0.00 to 0.08 s for four and eight busy processes
#: on 2 cores, idle and beside ``stress-ng --cpu 2``, at most 0.03 s for one.  Every test
#: that uses it burns CPU forever.
CPU_OVERSHOOT_PER_CORE = 0.2


#: How many times more CPU time a program costs here than on an idle development machine:
#: ``PYSANDBOX_TEST_CPU_SCALE``, else 1.  ``scripts/cgroup-v2-job.sh`` sets it in the VM
#: lab, where QEMU's TCG emulation makes an interpreter start cost 0.14 to 0.4 s of CPU
#: against 0.009 s here, from the CPU time of a trivial ``run_python`` it measures there.
CPU_SCALE = max(1.0, float(os.environ.get("PYSANDBOX_TEST_CPU_SCALE") or 1))


def cpu(idle_seconds: float) -> float:
    """A CPU budget (``Limits.cpu_time``) sized as ``idle_seconds`` on an idle machine."""
    return idle_seconds * CPU_SCALE


def eval_cpu(idle_seconds: int = 1) -> int:
    """``eval_in_sandbox``'s ``cpu_max_time_sec`` (whole seconds) for a budget sized as
    ``idle_seconds`` on an idle machine; its default is 1."""
    return math.ceil(idle_seconds * CPU_SCALE)


def slow(idle_seconds: float) -> float:
    """An upper bound for work that takes ``idle_seconds`` on an idle machine."""
    return idle_seconds * SLOWDOWN


def cpu_overshoot(busy: int) -> float:
    """CPU seconds that ``busy`` processes burning at once may use past a CPU limit."""
    return min(busy, len(os.sched_getaffinity(0))) * CPU_OVERSHOOT_PER_CORE


#: Sandbox-side Python, for a program that imports ``errno`` and has a ``report`` dict:
#: ``attempt(key, action)`` records "done" when the action worked, else the errno name of
#: the ``OSError`` it raised.
ATTEMPT_SOURCE = """
def attempt(key, action):
    try:
        action()
        report[key] = "done"
    except OSError as exc:
        report[key] = errno.errorcode.get(exc.errno, str(exc.errno))
"""

#: Sandbox-side Python, for a program that imports ``ctypes`` and ``os`` and defines
#: ``NUMBERS`` (system call numbers by name) before it calls: ``libc``, ``check(value)``
#: (a libc or raw syscall result: -1 raises ``OSError`` with errno) and
#: ``syscall(name, *args)``.
SYSCALL_SOURCE = """
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def check(value):
    if value == -1:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return value

def syscall(name, *args):
    return check(libc.syscall(ctypes.c_long(NUMBERS[name]), *[ctypes.c_long(a) for a in args]))
"""
