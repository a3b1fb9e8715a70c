"""What the tests may assume about time, named once.

The suite must pass on a machine much slower than an idle developer's: a shared CI
runner, ``scripts/stress-test.sh`` (the suite beside ``stress-ng --cpu 2``), a guest under
QEMU's TCG emulation.  So a test bounds durations as follows:

* a LOWER bound is exact: a limit must hold however fast or slow the machine is;
* an UPPER bound says "promptly", sized for a machine ``SLOWDOWN`` times slower than
  an idle one, and always far below what the failure it guards against would take (the
  wall limit a test sets, the 30 s the sandboxed program sleeps...), so it still fails
  when the promise breaks.
* Where a comparison between two measurements can replace a bound on one of them (the
  programs of parallel calls were all running at one instant), the test uses it: that
  does not depend on the machine at all.
"""

from __future__ import annotations

#: How many times slower than an idle 2-core development machine the suite must still
#: pass on.
SLOWDOWN = 3.0

#: Seconds for anything that must happen "at once" (a cap passed, a cancel, a callback
#: that raised, an argument refused before anything runs): start an interpreter in a
#: sandbox, end it and return.  Idle: a few hundredths of a second, 0.1 to 0.4 s under
#: load.  Every test that uses it makes the failure take 20 s or more.
PROMPTLY = 5.0

#: Seconds by which a run may outlast its wall-clock limit: killing, reaping and
#: returning, on a slow machine (idle: about 0.01 s).  The programs these tests time out
#: sleep 30 s or more, so a deadline that is not enforced still fails.
KILL_LATENCY = 1.5

#: CPU seconds a process tree may burn past its CPU limit before it is killed.  The C
#: core samples the tree every 50 ms: at most 2 cores x (50 ms + the watcher's own
#: scheduling delay), plus what the kill itself takes.  A load slows the tree down as
#: much as the watcher, so this does not grow with ``SLOWDOWN``; every test that uses it
#: burns CPU forever, or at least 8 times its limit.
CPU_OVERSHOOT = 0.5


def slow(idle_seconds: float) -> float:
    """An upper bound for work that takes ``idle_seconds`` on an idle machine."""
    return idle_seconds * SLOWDOWN
