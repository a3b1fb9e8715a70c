# SPDX-License-Identifier: MIT
"""Who a process is, and whether it is gone: how the owner of something pysandbox leaves
behind for a while (a private directory, a cgroup) is named, so that a later caller can
tell that it was left by one that died.

Two namings, since what is named had room for one or the other: a private directory's
owner file holds ``identity(pid)`` (the pid namespace, the pid and its start time, which
a reused pid does not share); a cgroup's name holds only the pid and the pid namespace,
and ``alive(pid)`` answers for it, leaving a reused pid's group until that process
exits too.  A pid of another pid namespace means nothing here: neither says it is dead.
"""

from __future__ import annotations

import os

__all__ = ["alive", "identity", "is_dead", "is_sound", "pid_namespace", "start_time"]


def pid_namespace() -> int:
    """The inode number of this process's pid namespace (0 when /proc cannot tell)."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def start_time(pid: int) -> str:
    """The start time of process ``pid`` (field 22 of its stat), "" when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[-1].split()
    except OSError:
        return ""
    return fields[19].decode() if len(fields) > 19 else ""


def identity(pid: int) -> str:
    """What names process ``pid`` for good: this pid namespace, the pid, its start time."""
    return f"{pid_namespace()} {pid} {start_time(pid)}"


def is_sound(owner: str) -> bool:
    """Whether ``owner`` is what ``identity`` writes: a namespace, a pid, a start time."""
    fields = owner.split()
    return (
        len(fields) == 3 and all(field.isdigit() for field in fields) and owner == " ".join(fields)
    )


def is_dead(owner: str) -> bool:
    """Whether the process a sound ``owner`` names is gone; only one of this pid
    namespace can be told."""
    fields = owner.split()
    if fields[0] != str(pid_namespace()):
        return False
    return identity(int(fields[1])) != owner


def alive(pid: int) -> bool:
    """Whether a process (a zombie included) has this pid in our pid namespace."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # EPERM: it exists, and is another user's
    return True
