# SPDX-License-Identifier: MIT
"""``Status``: how a run ended, and the words for an exit code or a signal."""

from __future__ import annotations

import enum

__all__ = ["Status", "ending", "signal_name"]


class Status(enum.Enum):
    """How a sandboxed run ended, the first that applies in the order below.

    The limits the sandbox enforced come first (it killed the program, so the exit
    status says little); then what the program did by itself.
    """

    #: The program exited with code 0.
    OK = "ok"
    #: The program exited by itself with a code other than 0.
    NONZERO_EXIT = "nonzero_exit"
    #: A signal killed the program, and no limit below explains it (a crash, an abort).
    SIGNALED = "signaled"
    #: The CPU time of the whole process tree passed ``Limits.cpu_time``.
    CPU_TIME_EXCEEDED = "cpu_time_exceeded"
    #: ``Limits.wall_time`` passed; the sandbox was killed.
    WALL_TIME_EXCEEDED = "wall_time_exceeded"
    #: The program failed for lack of memory: a Python ``MemoryError`` ended it, or its
    #: peak RSS came near ``Limits.memory`` (best effort: see ``pysandbox._model.classify``).
    MEMORY_EXCEEDED = "memory_exceeded"
    #: stdout or stderr passed its cap and ``Limits.truncate_output`` is false; the
    #: sandbox was killed.
    OUTPUT_EXCEEDED = "output_exceeded"
    #: The working directory ``/sandbox`` held more files than ``Limits.disk`` allows at
    #: ``DISK_BYTES_PER_INODE`` (1 KiB) an inode or hard link; the sandbox was killed.
    #: (Its bytes past ``Limits.disk`` make a write fail with ``ENOSPC`` instead.)
    DISK_EXCEEDED = "disk_exceeded"


def signal_name(number: int) -> str:
    """``"SIGKILL"`` for 9; ``"signal 64"`` for a number without a name."""
    import signal  # only to name one: its enums cost every run's start-up

    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def ending(returncode: int | None, signal: int | None) -> str:
    """``"exit code 3"``, or ``"killed by SIGSEGV (11)"`` when a signal ended the run."""
    if signal is not None:
        return f"killed by {signal_name(signal)} ({signal})"
    return f"exit code {returncode}"
