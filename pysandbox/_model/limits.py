# SPDX-License-Identifier: MIT
"""``Limits``: the resource limits of one ``run``, validated when they are made."""

from __future__ import annotations

import math
import resource

from .record import record

__all__ = [
    "DISK_BYTES_PER_INODE",
    "MAX_LIMIT",
    "MIN_DISK_INODES",
    "MIN_OPEN_FILES",
    "MIN_PROCESSES",
    "Limits",
]

#: No limit may be larger: every value, and ``ceil(cpu_time) + 2`` for ``RLIMIT_CPU``, then
#: fits the kernel's 64-bit ``rlim_t`` and the C core's ``Py_ssize_t`` caps with room to
#: spare, and a value this large means "practically unlimited" on any host anyway.
MAX_LIMIT = 2**62

#: Processes of every sandbox besides the program, each counted by the process cap
#: (the sandbox's pids cgroup, or RLIMIT_NPROC of the uid they run as): bwrap, which
#: joins the cap before it builds the sandbox, and pysandbox's init, the sandbox's pid 1,
#: which forks the program.
_SANDBOX_PROCESSES = 2
#: The fewest processes that start a program (which then cannot fork).
MIN_PROCESSES = _SANDBOX_PROCESSES + 1

#: Descriptors the C core hands to bwrap, numbered from 0 with no gap as
#: ``_launch.FdLayout`` lays them out (it imports this module, through ``_cgroup``, so a
#: test checks the two agree): stdin, stdout and stderr; at most four passed fds (the
#: syscall filter, the lifeline, ``run``'s input files, ``run_python``'s code); and three
#: capture pipes (bwrap's status, the init's report, ``run``'s output files).  A new
#: descriptor gets the lowest free number, and RLIMIT_NOFILE refuses a number at or past
#: the limit, so everything bwrap opens is numbered above these.
_HANDED_FDS = 3 + 4 + 3
#: Descriptors bubblewrap holds open at once, besides those, while it builds the sandbox
#: (``pipe2``, ``eventfd``, ``/proc/PID/ns/...``): measured with bubblewrap 0.8 by
#: lowering RLIMIT_NOFILE until it failed with "Too many open files", as root and as a
#: non-root caller.  The init and the program then need no more than that.
_BWRAP_FDS = 5
#: The smallest ``Limits.open_files`` that starts a program.
MIN_OPEN_FILES = _HANDED_FDS + _BWRAP_FDS
#: What each file, directory or hard link in ``/sandbox`` counts against ``Limits.disk``,
#: however empty: about what the kernel keeps for one (an inode of ~700 bytes and a
#: dentry of ~200, measured as the growth of the slab caches per empty file, and ~200
#: per hard link, on Linux 6.18).
DISK_BYTES_PER_INODE = 1024
#: The fewest inodes any ``/sandbox`` may hold, whatever ``Limits.disk`` (its root, the
#: code file, a few files of the program's): freeing this many takes the kernel
#: microseconds.
MIN_DISK_INODES = 64
#: The smallest value of each int field; the fields not named here must be >= 1.
_INT_MINIMA = {"processes": MIN_PROCESSES, "open_files": MIN_OPEN_FILES}
#: Why each minimum above 1 is what it is, for the error message.
_WHY_MINIMUM = {
    "processes": "bwrap and pysandbox's init count besides the program",
    "open_files": "bwrap needs the descriptors it is handed and a few of its own",
}

_SECONDS_FIELDS = ("wall_time", "cpu_time")
_INT_FIELDS = (
    "memory",
    "stdout",
    "stderr",
    "processes",
    "file_size",
    "open_files",
    "disk",
    "files_out",
    "files_out_count",
    "displays",
    "displays_count",
    "values",
)


def _check_seconds(name: str, value: object) -> float:
    """``value`` as a finite float in ``(0, MAX_LIMIT]``; the errors name ``Limits.name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"Limits.{name} must be a number of seconds (int or float), not {type(value).__name__}"
        )
    if isinstance(value, int) and not 0 < value <= MAX_LIMIT:
        # Compared as an int: float() of a huge int would raise OverflowError.
        raise ValueError(f"Limits.{name} must be > 0 and <= 2**62 seconds, got {value!r}")
    seconds = float(value)
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_LIMIT):
        raise ValueError(
            f"Limits.{name} must be a finite number > 0 and <= 2**62 seconds, got {value!r}"
        )
    return seconds


def _check_int(name: str, value: object) -> int:
    """``value`` as a plain int in ``[minimum, MAX_LIMIT]`` (``minimum`` is 1 unless
    ``_INT_MINIMA`` says more); the errors name ``Limits.name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"Limits.{name} must be an int, not {type(value).__name__}")
    minimum = _INT_MINIMA.get(name, 1)
    if minimum > 1 and value < minimum:
        raise ValueError(
            f"Limits.{name} must be at least {minimum} to start a program "
            f"({_WHY_MINIMUM[name]}), got {value!r}"
        )
    if not 0 < value <= MAX_LIMIT:
        raise ValueError(f"Limits.{name} must be > 0 and <= 2**62, got {value!r}")
    return int(value)


@record
class Limits:
    """What one sandboxed run may use.  Every field is checked when the object is made.

    Every numeric limit must be positive: zero or a negative value is a ``ValueError`` and
    never means "unlimited"; so is NaN, an infinity, or a value above ``2**62``.  So is
    a limit too small to start any program: ``processes`` below ``MIN_PROCESSES`` (3)
    and ``open_files`` below ``MIN_OPEN_FILES`` (15); the message names the smallest
    value that works.  A bool
    or a value of another type is a ``TypeError``.  Both name the field.  The times accept
    an int or a float and are stored as float; the other limits must be ints (an int
    subclass is stored as a plain int).  Make a variant with ``dataclasses.replace``,
    which checks again.
    """

    #: Wall-clock seconds for the whole run, start-up of the sandbox included; past it
    #: the whole sandbox is killed (``Status.WALL_TIME_EXCEEDED``).  Fractions allowed.
    wall_time: float = 10.0
    #: CPU seconds (user + system) of the whole process tree, every child included; past
    #: it the tree is killed (``Status.CPU_TIME_EXCEEDED``).  Fractions allowed.
    cpu_time: float = 1.0
    #: Bytes of address space of each process (``RLIMIT_AS``): mapped memory, not the
    #: resident set, and it includes the program itself (an interpreter needs tens of MiB).
    memory: int = 256 * 2**20
    #: Bytes of stdout kept in ``Result.stdout``.
    stdout: int = 1 * 2**20
    #: Bytes of stderr kept in ``Result.stderr``.
    stderr: int = 1 * 2**20
    #: False: one byte past ``stdout`` or ``stderr`` kills the sandbox at once
    #: (``Status.OUTPUT_EXCEEDED``).  True: keep the first bytes up to the cap, discard the
    #: rest, let the program run on, and set ``Result.stdout_truncated``/``stderr_truncated``.
    truncate_output: bool = False
    #: Processes (and threads) the sandbox's user may have at once (``RLIMIT_NPROC``).
    #: The kernel counts them per uid: when the caller is not root, the caller's own
    #: processes outside the sandbox count too.  bwrap and pysandbox's init count too:
    #: at least ``MIN_PROCESSES`` (3), which leaves the program none to fork.
    processes: int = 64
    #: Bytes of the largest file a process may write (``RLIMIT_FSIZE``); past it the
    #: write fails with ``EFBIG`` (``SIGXFSZ`` kills a program that does not ignore it).
    file_size: int = 16 * 2**20
    #: Open file descriptors per process (``RLIMIT_NOFILE``): one more than the highest
    #: descriptor number a process may open.  bwrap, which builds the sandbox, is held to
    #: it too: at least ``MIN_OPEN_FILES`` (15).
    open_files: int = 256
    #: Bytes of the writable tmpfs that is the working directory ``/sandbox``: every
    #: file the program writes there counts, as do the files given to ``run``, each in
    #: whole pages (a one-byte file takes 4 KiB); a write past it fails with ``ENOSPC``.
    #: Its files, directories and hard links count too, ``DISK_BYTES_PER_INODE`` (1 KiB)
    #: each, however empty: past ``disk_inodes()`` of them the sandbox is killed
    #: (``Status.DISK_EXCEEDED``), so what they cost the kernel, and the time it takes
    #: to free them when the sandbox ends, stay bounded too.
    disk: int = 64 * 2**20
    #: Bytes of file content returned in ``Result.files``; files past it are left out
    #: and ``Result.files_truncated`` is set.
    files_out: int = 16 * 2**20
    #: Files returned in ``Result.files``; the files past it are left out and
    #: ``Result.files_truncated`` is set.  Bounds what one result costs the caller
    #: however small the files: a million empty files (or hard links of one) cost no
    #: byte of ``files_out`` but a million entries.  The default is the most non-empty
    #: files the default ``disk`` holds (64 MiB in 4 KiB pages), so a build directory
    #: that fits the default disk comes back whole.
    files_out_count: int = 16384
    #: Bytes of rich outputs returned in ``CellResult.displays`` (figures, tables,
    #: ``display()``), each display whole or not at all; one past it is left out and
    #: ``displays_truncated`` is set.  The sandbox holds one display of up to this many
    #: bytes in memory as it passes it on.
    displays: int = 16 * 2**20
    #: Displays returned per call; the ones past it are left out, and
    #: ``displays_truncated`` is set.
    displays_count: int = 256
    #: Bytes of a session's variables passed in one ``Session.push`` or back in one
    #: ``Session.pull``, as the value codec encodes them (JSON, arrays in base64).
    values: int = 16 * 2**20

    def __post_init__(self) -> None:
        """Check every field; store times as float and counts as plain int."""
        for name in _SECONDS_FIELDS:
            object.__setattr__(self, name, _check_seconds(name, getattr(self, name)))
        for name in _INT_FIELDS:
            object.__setattr__(self, name, _check_int(name, getattr(self, name)))
        if not isinstance(self.truncate_output, bool):
            raise TypeError(
                f"Limits.truncate_output must be a bool, not {type(self.truncate_output).__name__}"
            )

    def disk_inodes(self) -> int:
        """The files, directories and hard links ``/sandbox`` may hold at once:
        ``disk // DISK_BYTES_PER_INODE``, at least ``MIN_DISK_INODES``."""
        return max(MIN_DISK_INODES, self.disk // DISK_BYTES_PER_INODE)

    def rlimits(self) -> list[tuple[int, int, int]]:
        """The ``(resource, soft, hard)`` limits set on the sandbox before it starts.

        ``RLIMIT_CPU`` is only a per-process backstop at ``ceil(cpu_time) + 1`` seconds
        (``SIGXCPU``), hard one second later (``SIGKILL``): the C core's watcher of the
        whole tree kills first, and precisely.  The launch adds the limits every sandbox
        gets (``_launch.ALWAYS_RLIMITS``: no core dumps).
        """
        cpu = math.ceil(self.cpu_time) + 1
        return [
            (resource.RLIMIT_AS, self.memory, self.memory),
            (resource.RLIMIT_NPROC, self.processes, self.processes),
            (resource.RLIMIT_FSIZE, self.file_size, self.file_size),
            (resource.RLIMIT_NOFILE, self.open_files, self.open_files),
            (resource.RLIMIT_CPU, cpu, cpu + 1),
        ]
