# SPDX-License-Identifier: MIT
"""Finding a test's processes on the host: by a unique marker in their command line, the
children of a pid, and those that survive a run."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid

__all__ = [
    "children_of",
    "parent_of",
    "pid_state",
    "pids_with_marker",
    "session_of",
    "start_time",
    "survivors",
    "unique_marker",
]


def _processes_whose(field: int, value: int) -> list[int]:
    """Pids (zombies included) whose ``field`` of /proc/*/stat, counted after the
    command name, is ``value``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                # The command name may hold spaces and parentheses: split after the last ')'.
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[field]) == value:
            found.append(int(entry))
    return found


def children_of(pid: int) -> list[int]:
    """Pids (zombies included) whose parent is ``pid``, read from /proc/*/stat."""
    return _processes_whose(1, pid)


def session_of(pid: int) -> list[int]:
    """Pids (zombies included) in the session that ``pid`` leads."""
    return _processes_whose(3, pid)


def _stat_fields(pid: int) -> list[bytes]:
    """The fields of ``/proc/PID/stat`` after the command name (which may hold spaces
    and parentheses); OSError when there is no such process."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        return stat.read().rsplit(b")", 1)[1].split()


def start_time(pid: int) -> int | None:
    """The start time of ``pid`` (clock ticks after boot), None when there is no such
    process: with the pid it names one process, whatever pid reuse does."""
    try:
        return int(_stat_fields(pid)[19])
    except (OSError, IndexError, ValueError):
        return None


def pid_state(pid: int) -> str:
    """The state letter of ``pid`` (``Z`` for a zombie), ``""`` when it is gone."""
    try:
        return _stat_fields(pid)[0].decode()
    except (OSError, IndexError):
        return ""


def parent_of(pid: int) -> int:
    """The parent pid of ``pid`` (0 when it is gone)."""
    try:
        return int(_stat_fields(pid)[1])
    except (OSError, IndexError, ValueError):
        return 0


def unique_marker() -> str:
    """A string no other process has in its command line."""
    return f"pysandbox-marker-{uuid.uuid4().hex}"


def pids_with_marker(marker: str, *, bwrap: bool = True) -> list[int]:
    """Pids of every live process whose command line contains ``marker``; without
    bwrap's own processes (whose argv holds the program's) when ``bwrap`` is false."""
    needle = marker.encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if needle not in cmdline.read():
                    continue
            with open(f"/proc/{entry}/comm", "rb") as comm:
                if not bwrap and comm.read().strip() == b"bwrap":
                    continue
        except OSError:
            continue
        found.append(int(entry))
    return found


def survivors(marker: str, within: float = 2.0, *, bwrap: bool = True) -> list[int]:
    """Processes with ``marker`` still alive after polling up to ``within`` seconds
    (bwrap's own processes left out when ``bwrap`` is false).

    Survivors are recorded, then every process with the marker is SIGKILLed by pid (this
    test started them), so a failing run leaves nothing behind.
    """
    deadline = time.monotonic() + within
    while True:
        pids = pids_with_marker(marker, bwrap=bwrap)
        if not pids or time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    for pid in pids_with_marker(marker):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return pids
