# SPDX-License-Identifier: MIT
"""Decide what a finished run means: ``classify`` turns plain facts into a ``Status``.

Pure functions of their arguments: no I/O, no clock, unit-tested without a sandbox.  A
run cancelled by the caller is not classified (the caller raises instead).

The rules, the first that applies wins:

1. ``timed_out`` (the wall-clock deadline passed) gives ``WALL_TIME_EXCEEDED``.
2. ``killed_on_cap`` (stdout or stderr passed its cap) gives ``OUTPUT_EXCEEDED``.
3. ``cpu_exceeded`` (the C core's watcher of the tree's CPU time fired), or the program
   died of ``SIGXCPU`` (the per-process ``RLIMIT_CPU`` backstop), or of ``SIGKILL``
   with ``cpu_time >= cpu_limit`` (the backstop's hard limit) gives
   ``CPU_TIME_EXCEEDED``.
3a. ``disk_exceeded`` (the C core's count of the inodes in ``/sandbox`` passed the cap
   ``Limits.disk`` gives) gives ``DISK_EXCEEDED``.
4. The program failed (a non-zero exit code or a signal) and either the sandbox's
   memory cgroup reached its limit (exact, where there is one), or the last non-empty
   line of its stderr is a Python ``MemoryError`` (it starts with ``b"MemoryError"``
   followed by the end of the line or ``b":"``), or its peak RSS reached
   ``RSS_NEAR_LIMIT`` of the memory limit, gives ``MEMORY_EXCEEDED``.  Without a
   memory cgroup this is best effort: ``RLIMIT_AS`` makes an allocation fail, and a
   program may report that in its own way, or crash, without ever growing its
   resident set near the limit.
5. A signal gives ``SIGNALED``; exit code 0 gives ``OK``; any other code
   ``NONZERO_EXIT``.

A program that exits by itself after using a little more CPU than ``cpu_limit`` between
two samples of the watcher (50 ms apart) is classified by how it ended, not by rule 3:
the watcher did not fire, so the limit was not enforced.
"""

from __future__ import annotations

import os

from .status import Status

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _signal
else:
    import _signal  # what signal wraps, without the enums it builds at import

__all__ = ["RSS_NEAR_LIMIT", "classify", "exit_info", "is_memory_error"]

#: Fraction of the memory limit at which a failed program's peak RSS counts as having
#: reached it: ``RLIMIT_AS`` also counts mappings that are never resident (code,
#: reserved arenas, thread stacks), so the resident set of a program that ran out of
#: address space stays below the limit itself.
RSS_NEAR_LIMIT = 0.9

#: Exit codes above 128 and up to this mean "killed by signal code - 128" when they
#: come from bwrap, which passes on the init's ``128 + signal`` (Linux's ``SIGRTMAX``).
_MAX_SIGNAL = 64

_MEMORY_ERROR = b"MemoryError"


def _from_wait_status(status: int) -> tuple[int | None, int | None] | None:
    """``(returncode, signal)`` of a raw wait status, or None when it is neither an
    exit nor a death by signal (stopped, continued, out of range)."""
    if not 0 <= status <= 0xFFFF:
        return None
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status), None
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    return None


def exit_info(
    report_wait_status: int | None, bwrap_wait_status: int | None
) -> tuple[int | None, int | None] | None:
    """How the program ended, as ``(returncode, signal)`` with exactly one of them set,
    or None when neither status tells.

    ``report_wait_status`` is the program's raw wait status from the init's report, and
    is used when it is a valid exit or death by signal.  Otherwise ``bwrap_wait_status``,
    bwrap's raw wait status from the C core (None when unknown): killed by a signal
    (the C core kills it with ``SIGKILL`` on a limit) gives that signal; an exit code
    of ``128 + N`` with ``1 <= N <= 64`` means the program died of signal ``N``, as the
    init passes it on; any other code is the program's exit code.  An exit code of 137
    that the program chose itself is then read as ``SIGKILL``: only the init's report
    tells them apart.
    """
    if report_wait_status is not None:
        reported = _from_wait_status(report_wait_status)
        if reported is not None:
            return reported
    if bwrap_wait_status is None:
        return None
    outer = _from_wait_status(bwrap_wait_status)
    if outer is None or outer[0] is None:
        return outer
    code = outer[0]
    if 128 < code <= 128 + _MAX_SIGNAL:
        return None, code - 128
    return code, None


def is_memory_error(stderr: bytes) -> bool:
    """Whether the last non-empty line of ``stderr`` is a Python ``MemoryError``: it
    starts with ``b"MemoryError"``, then ends or goes on with ``b":"``.

    Trailing white space (``\\r`` included) is ignored; a line of white space only counts
    as empty.  Linear: only the end of ``stderr`` is looked at.
    """
    stripped = stderr.rstrip()
    last = stripped[stripped.rfind(b"\n") + 1 :]
    return last == _MEMORY_ERROR or last.startswith(_MEMORY_ERROR + b":")


def _cpu_exceeded(
    cpu_exceeded: bool, signal: int | None, cpu_time: float, cpu_limit: float
) -> bool:
    """Rule 3: the tree watcher fired, or a signal that the CPU limits send."""
    if cpu_exceeded or signal == _signal.SIGXCPU:
        return True
    return signal == _signal.SIGKILL and cpu_time >= cpu_limit


def _memory_exceeded(
    failed: bool, stderr: bytes, max_rss: int, memory_limit: int, limit_hit: bool
) -> bool:
    """Rule 4: the program failed and the memory cgroup, a ``MemoryError`` or its peak
    RSS says why."""
    if not failed:
        return False
    return limit_hit or is_memory_error(stderr) or max_rss >= memory_limit * RSS_NEAR_LIMIT


def classify(
    *,
    timed_out: bool,
    killed_on_cap: bool,
    cpu_exceeded: bool,
    report_wait_status: int | None,
    bwrap_wait_status: int | None,
    cpu_time: float,
    cpu_limit: float,
    stderr: bytes,
    max_rss: int,
    memory_limit: int,
    memory_limit_hit: bool = False,
    disk_exceeded: bool = False,
) -> tuple[Status, int | None, int | None]:
    """``(status, returncode, signal)`` of a finished run, by the rules of this module.

    :param timed_out: the C core killed the sandbox at the wall-clock deadline.
    :param killed_on_cap: the C core killed it when stdout or stderr passed its cap.
    :param cpu_exceeded: the C core's watcher killed it when the tree's CPU time passed
        ``cpu_limit``.
    :param report_wait_status: the program's raw wait status from the init's report, or
        None when there is no report; see ``exit_info``.
    :param bwrap_wait_status: bwrap's raw wait status, or None when it is unknown.
    :param cpu_time: user + system CPU seconds of the whole tree.
    :param cpu_limit: ``Limits.cpu_time``.
    :param stderr: the stderr that was kept.
    :param max_rss: bytes, the peak RSS of the largest process.
    :param memory_limit: ``Limits.memory``.
    :param memory_limit_hit: the sandbox's memory cgroup reached its limit.
    :param disk_exceeded: the C core killed it when ``/sandbox`` held more inodes than
        ``Limits.disk`` allows.
    :return: the status, and the exit code or the signal (exactly one is not None).
        When the sandbox was killed on a limit (rules 1 to 3a) and no status tells how
        the program ended, it died of the C core's ``SIGKILL``: ``(status, None, 9)``.
    :raises ValueError: no status tells how the program ended and it was not killed on a
        limit: the caller must treat that as a sandbox failure before classifying.
    """
    ended = exit_info(report_wait_status, bwrap_wait_status)
    killed = timed_out or killed_on_cap or cpu_exceeded or disk_exceeded
    if ended is None:
        if not killed:
            raise ValueError("no wait status tells how the program ended")
        ended = (None, int(_signal.SIGKILL))
    returncode, signal = ended
    if timed_out:
        return Status.WALL_TIME_EXCEEDED, returncode, signal
    if killed_on_cap:
        return Status.OUTPUT_EXCEEDED, returncode, signal
    if _cpu_exceeded(cpu_exceeded, signal, cpu_time, cpu_limit):
        return Status.CPU_TIME_EXCEEDED, returncode, signal
    if disk_exceeded:
        return Status.DISK_EXCEEDED, returncode, signal
    if _memory_exceeded(returncode != 0, stderr, max_rss, memory_limit, memory_limit_hit):
        return Status.MEMORY_EXCEEDED, returncode, signal
    if signal is not None:
        return Status.SIGNALED, returncode, signal
    return (Status.OK if returncode == 0 else Status.NONZERO_EXIT), returncode, signal
