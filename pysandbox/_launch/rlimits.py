# SPDX-License-Identifier: MIT
"""The resource limits every sandbox gets whatever the API, and the clamp of a non-root
caller's limits to its own hard limits."""

from __future__ import annotations

import os
import resource
from collections.abc import Sequence

__all__ = [
    "ALWAYS_RLIMITS",
    "MEMLOCK_BOUND",
    "RTTIME_BOUND",
    "SIGPENDING_BOUND",
    "within_own_limits",
]

#: Queued signals (``sigqueue``, and one per POSIX timer) each sandbox may hold: POSIX
#: asks at least 32 of each, and 1024 was Linux's own limit for the whole system before
#: 2.6.8, so real programs with timers and real-time signals fit.  The kernel charges a
#: non-root caller's sandbox to the caller's uid as well (``kernel/ucount.c``), and lets
#: the sandbox queue one only while that uid's total is within this bound: whatever the
#: number of its sandboxes, the caller keeps all of its own limit but 1024.
SIGPENDING_BOUND = 1024


#: Bytes of locked memory (``mlock``, ``SHM_LOCK``): Python and numpy lock none
#: (``VmLck`` 0 kB); 64 KiB was the kernel's default before 5.16.  ``SHM_LOCK`` is
#: charged to a non-root caller's uid like queued signals.
MEMLOCK_BOUND = 64 * 1024


#: Microseconds of CPU a real-time task may use without blocking, SIGXCPU past the soft
#: limit and SIGKILL past the hard one.  No task of a sandbox is real-time: its
#: ``RLIMIT_RTPRIO`` is 0, and the C core leaves a real-time caller's policy for
#: ``SCHED_OTHER`` before bwrap starts; this bounds one that ever got through.
RTTIME_BOUND = (100_000, 200_000)


#: Set on every sandbox whatever the API, instead of inherited from the caller: a crash
#: inside must not hand its memory to the host's core-dump handler (``kernel.core_pattern``
#: may pipe it to a host program); no POSIX message queue bytes (``mq_open`` is refused
#: anyway), queued signals and locked memory bounded as above, no real-time priority and
#: no nice value below the caller's.  Budgets counted per uid are then bounded per
#: sandbox (docs/security.rst, "Kernel budgets").
ALWAYS_RLIMITS: tuple[tuple[int, int, int], ...] = (
    (resource.RLIMIT_CORE, 0, 0),
    (resource.RLIMIT_MSGQUEUE, 0, 0),
    (resource.RLIMIT_SIGPENDING, SIGPENDING_BOUND, SIGPENDING_BOUND),
    (resource.RLIMIT_MEMLOCK, MEMLOCK_BOUND, MEMLOCK_BOUND),
    (resource.RLIMIT_RTPRIO, 0, 0),
    (resource.RLIMIT_RTTIME, *RTTIME_BOUND),
    (resource.RLIMIT_NICE, 0, 0),
)


def within_own_limits(rlimits: Sequence[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Every limit, plus ``ALWAYS_RLIMITS``; for a non-root caller, who cannot raise a
    hard limit, each at most the caller's own."""
    chosen = {which: (soft, hard) for which, soft, hard in rlimits}
    chosen.update({which: (soft, hard) for which, soft, hard in ALWAYS_RLIMITS})
    if os.geteuid() != 0:
        for which, (soft, hard) in chosen.items():
            ceiling = resource.getrlimit(which)[1]
            if ceiling != resource.RLIM_INFINITY:
                chosen[which] = (min(soft, ceiling), min(hard, ceiling))
    return [(which, soft, hard) for which, (soft, hard) in chosen.items()]
