# SPDX-License-Identifier: MIT
"""One line that says how a run ended, for people: the command line's last line on
stderr.  It names the limit that ended the run, so it takes the ``Limits`` too.

``ok, exit 0, cpu 0.02 s, wall 0.05 s, max rss 9.1 MiB``
``cpu_time_exceeded (limit 0.5 s), killed by SIGKILL, cpu 0.52 s, wall 0.6 s, ...``
``ok, process limit reached (limit 8), exit 0, cpu 0.04 s, ...``
"""

from __future__ import annotations

from .limits import Limits
from .status import Status, signal_name

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    from .result import Result

    class Ended(Protocol):
        """What ``limit_hit`` reads of a ``Result`` or a ``CellResult``."""

        @property
        def status(self) -> Status: ...
        @property
        def stdout_truncated(self) -> bool: ...
        @property
        def stderr_truncated(self) -> bool: ...


__all__ = [
    "LIMIT_STATUSES",
    "describe",
    "describe_parts",
    "limit_hit",
    "not_collected",
    "size_text",
]

#: The statuses that mean a limit ended the run, not the program itself.
LIMIT_STATUSES = frozenset(
    {
        Status.CPU_TIME_EXCEEDED,
        Status.WALL_TIME_EXCEEDED,
        Status.MEMORY_EXCEEDED,
        Status.OUTPUT_EXCEEDED,
        Status.DISK_EXCEEDED,
    }
)

_BINARY_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def size_text(size: int) -> str:
    """``"1 MiB"``, ``"9.1 MiB"``, ``"512 bytes"``: bytes in the largest binary unit that fits."""
    for name, unit in _BINARY_UNITS:
        if size >= unit:
            return f"{size / unit:.1f}".removesuffix(".0") + f" {name}"
    return f"{size} bytes"


def limit_hit(result: Ended, limits: Limits) -> str:
    """The limit that ended a run (or a session's call) of a ``LIMIT_STATUSES``
    status, as `` (limit 1 s)``."""
    if result.status is Status.CPU_TIME_EXCEEDED:
        return f" (limit {limits.cpu_time:g} s)"
    if result.status is Status.WALL_TIME_EXCEEDED:
        return f" (limit {limits.wall_time:g} s)"
    if result.status is Status.MEMORY_EXCEEDED:
        return f" (limit {size_text(limits.memory)})"
    if result.status is Status.DISK_EXCEEDED:
        return f" (limit {size_text(limits.disk)}, {limits.disk_inodes()} files)"
    caps = []
    if result.stdout_truncated or not result.stderr_truncated:
        caps.append(f"stdout limit {size_text(limits.stdout)}")
    if result.stderr_truncated or not result.stdout_truncated:
        caps.append(f"stderr limit {size_text(limits.stderr)}")
    return f" ({', '.join(caps)})"


#: What ended a run whose files were not collected, by its status.
_ENDED_BY = {
    Status.CPU_TIME_EXCEEDED: "the CPU time limit",
    Status.WALL_TIME_EXCEEDED: "the wall time limit",
    Status.OUTPUT_EXCEEDED: "the output limit",
    Status.DISK_EXCEEDED: "the disk limit",
}


def not_collected(result: Result) -> str:
    """``"files not collected (the run was ended by the CPU time limit)"`` for a run
    whose files a limit kept from being collected (``Result.files_not_collected``);
    ``""`` for any other."""
    if not result.files_not_collected:
        return ""
    return f"files not collected (the run was ended by {_ENDED_BY.get(result.status, 'a limit')})"


def describe(result: Result, limits: Limits) -> str:
    """How ``result`` ended, in one line: the status, the limit that ended it if one did,
    whether the process cap was reached, the exit code or the signal, the CPU and wall
    time and peak RSS, and what was cut short (stdout or stderr past its limit, output
    files left out or not collected)."""
    return ", ".join(describe_parts(result, limits))


def describe_parts(result: Result, limits: Limits) -> list[str]:
    """The parts of ``describe``'s line, the status (and the limit hit) first."""
    parts = [result.status.value]
    if result.status in LIMIT_STATUSES:
        parts[0] += limit_hit(result, limits)
    if result.processes_exceeded:
        parts.append(f"process limit reached (limit {limits.processes})")
    if result.signal is not None:
        parts.append(f"killed by {signal_name(result.signal)}")
    else:
        parts.append(f"exit {result.returncode}")
    parts.append(f"cpu {result.cpu_time:.2f} s")
    parts.append(f"wall {result.wall_time:.2f} s")
    parts.append(f"max rss {size_text(result.max_rss)}")
    if result.status is not Status.OUTPUT_EXCEEDED:
        if result.stdout_truncated:
            parts.append(f"stdout truncated at {size_text(limits.stdout)}")
        if result.stderr_truncated:
            parts.append(f"stderr truncated at {size_text(limits.stderr)}")
    if result.files_not_collected:
        parts.append(not_collected(result))
    elif result.files_truncated and result.status not in LIMIT_STATUSES - {Status.MEMORY_EXCEEDED}:
        if len(result.files) >= limits.files_out_count:
            parts.append(f"output files left out (limit {limits.files_out_count} files)")
        else:
            parts.append(f"output files left out (limit {size_text(limits.files_out)})")
    return parts
