# SPDX-License-Identifier: MIT
"""The control files of a cgroup: what they are called on each version, and how they are
read and written.

cgroup v1 and v2 differ, for what pysandbox does, in the names of these files and the
keys in them, not in what is done with them: ``CONTROL_FILES`` holds those names, one
``ControlFiles`` record per version, and the code that sets limits, reads counters and
kills (``_cgroup``) is written once against it.  A hybrid host mixes versions within one
sandbox, so the record is chosen per hierarchy, never per sandbox.

Every read and write here is relative to a directory descriptor opened by ``open_dir``
(``O_NOFOLLOW|O_DIRECTORY``, then checked to be on the cgroup mount by device number),
and opens the file itself with ``O_NOFOLLOW``: no symlink is ever followed, and no path
is built from outside input.
"""

from __future__ import annotations

import errno
import os
import stat

from .._model.record import record

__all__ = [
    "CONTROL_FILES",
    "DIR_FLAGS",
    "ControlFiles",
    "LimitFile",
    "open_dir",
    "read_bytes",
    "read_control",
    "read_int",
    "read_keyed",
    "write_control",
]

#: How every cgroup directory is opened: never through a symlink, never inherited.
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

#: The fix when cgroup v1 lacks its cap on socket buffers (``memory.kmem.tcp.*`` is
#: deprecated and will go away).
_V1_SOCKETS_FIX = (
    "this kernel cannot cap socket buffers in a cgroup v1 memory group, so they would "
    "escape the memory cap: use cgroup v2 (boot with systemd.unified_cgroup_hierarchy=1), "
    "whose memory.max counts them"
)


@record
class LimitFile:
    """One control file a cap is written to."""

    #: The file's name in the group's directory.
    name: str
    #: What is written: the cap itself, or ``"0"`` when ``zero`` (v2's swap, which is
    #: counted apart from memory, gets none).
    zero: bool = False
    #: The kernel may lack the file (swap not accounted): it is then skipped.
    optional: bool = False
    #: Read back after writing: the kernel must hold a value no larger than the cap.
    check: bool = True
    #: The fix to name when the file does not exist, instead of the errno's usual one.
    fix: str | None = None


@record
class ControlFiles:
    """The control files of one cgroup version, by what pysandbox uses them for.

    A ``None`` name is a file this version does not have.
    """

    #: Enables controllers for a group's children (v2); v1 children have them all.
    subtree_control: str | None
    #: Where the cap on tasks alive at once is written.
    pids_limit: tuple[LimitFile, ...]
    #: Keyed: ``max`` counts the forks and clones the cap refused.
    pids_events: str
    #: Where the memory cap is written, in this order.
    memory_limit: tuple[LimitFile, ...]
    #: Bytes: the highest charge of the group.
    memory_peak: str
    #: Keyed: ``shmem`` is the bytes of shared memory (memfd, tmpfs) charged to the group.
    memory_stat: str
    #: One-number counters of the times a memory limit was hit.
    memory_failcnt: tuple[str, ...]
    #: A keyed file, and its keys that are > 0 once the memory limit was hit.
    memory_events: str
    memory_event_keys: tuple[str, ...]
    #: The controller whose hierarchy counts the group's CPU time; None when every group
    #: counts it, whatever its controllers (v2).
    cpu_controller: str | None
    #: The CPU counter: ``cpu_key``'s line of it, or the whole file when ``cpu_key`` is
    #: None, counts ``cpu_per_second`` per second of CPU.  The C core parses the same
    #: file the same way (``sbx_cgroup_cpu_seconds``).
    cpu_usage: str
    cpu_key: str | None
    cpu_per_second: int
    #: Writing ``"1"`` kills every process of the group (v2, Linux 5.14+).
    kill: str | None


_PIDS_LIMIT = (LimitFile("pids.max"),)

CONTROL_FILES = {
    1: ControlFiles(
        subtree_control=None,
        pids_limit=_PIDS_LIMIT,
        pids_events="pids.events",
        memory_limit=(
            # memsw (memory + swap) must stay >= the memory limit: memory first.  With
            # memsw at the same cap, swap does not extend it.
            LimitFile("memory.limit_in_bytes"),
            LimitFile("memory.memsw.limit_in_bytes", optional=True),
            # v1 charges socket buffers (TCP and UDP) only in a group with a TCP limit,
            # and to a counter of their own: without one, 40 loopback connections held
            # 414 MiB against a 320 MiB cap.  They get the whole cap, not a share cut
            # from memory.limit_in_bytes: a share would OOM-kill a process that RLIMIT_AS
            # should refuse with MemoryError, and a small one starves loopback TCP (1/64
            # cut its throughput 50-fold).
            LimitFile("memory.kmem.tcp.limit_in_bytes", fix=_V1_SOCKETS_FIX),
        ),
        memory_peak="memory.max_usage_in_bytes",
        memory_stat="memory.stat",
        memory_failcnt=("memory.failcnt", "memory.memsw.failcnt", "memory.kmem.tcp.failcnt"),
        memory_events="memory.oom_control",
        memory_event_keys=("under_oom", "oom_kill"),
        cpu_controller="cpuacct",
        cpu_usage="cpuacct.usage",
        cpu_key=None,
        cpu_per_second=10**9,
        kill=None,
    ),
    2: ControlFiles(
        subtree_control="cgroup.subtree_control",
        pids_limit=_PIDS_LIMIT,
        pids_events="pids.events",
        memory_limit=(
            # memory.max counts socket buffers already.
            LimitFile("memory.max"),
            LimitFile("memory.swap.max", zero=True, optional=True, check=False),
        ),
        # Linux 5.19+; None is read on older kernels.
        memory_peak="memory.peak",
        memory_stat="memory.stat",
        memory_failcnt=(),
        memory_events="memory.events",
        memory_event_keys=("max", "oom", "oom_kill"),
        cpu_controller=None,
        cpu_usage="cpu.stat",
        cpu_key="usage_usec",
        cpu_per_second=10**6,
        kill="cgroup.kill",
    ),
}


def read_bytes(name: str, dir_fd: int | None) -> bytes:
    """The whole content of the file ``name`` (relative to ``dir_fd`` unless None),
    opened without following a symlink."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def read_control(dir_fd: int, name: str) -> str:
    """The content of the control file ``name`` in the directory ``dir_fd``.

    Read with ``os.read`` and decoded as ASCII, which needs no codec module: this also
    works after the caller dropped privileges and can no longer read the standard library.
    """
    return read_bytes(name, dir_fd).decode("ascii", "replace")


def write_control(dir_fd: int, name: str, value: str) -> None:
    """Write ``value`` to the control file ``name`` in one ``write`` (as cgroupfs wants)."""
    data = value.encode("ascii")
    fd = os.open(name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        if os.write(fd, data) != len(data):
            raise OSError(errno.EIO, "short write to a cgroup control file")
    finally:
        os.close(fd)


def read_int(dir_fd: int, name: str) -> int | None:
    """The integer in a one-value control file, or None when it cannot be read."""
    try:
        text = read_control(dir_fd, name).strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def read_keyed(dir_fd: int, name: str) -> dict[str, int]:
    """The ``key value`` lines of a control file (empty when it cannot be read)."""
    try:
        text = read_control(dir_fd, name)
    except OSError:
        return {}
    values = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            values[parts[0]] = int(parts[1])
    return values


def open_dir(name: str, dev: int, dir_fd: int | None = None) -> int:
    """Open the directory ``name`` without following a symlink and check that it is on the
    cgroup mount with device number ``dev``; the descriptor is the caller's to close."""
    fd = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    info = os.fstat(fd)
    if info.st_dev != dev or not stat.S_ISDIR(info.st_mode):
        os.close(fd)
        raise OSError(errno.EXDEV, "not the cgroup mount named in /proc/self/mountinfo")
    return fd
