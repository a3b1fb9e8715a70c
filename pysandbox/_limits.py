"""``Limits``: the resource limits of one ``run``, validated when they are made."""

from __future__ import annotations

import dataclasses
import math
import resource

__all__ = ["MAX_LIMIT", "Limits"]

#: No limit may be larger: every value, and ``ceil(cpu_time) + 2`` for ``RLIMIT_CPU``, then
#: fits the kernel's 64-bit ``rlim_t`` and the C core's ``Py_ssize_t`` caps with room to
#: spare, and a value this large means "practically unlimited" on any host anyway.
MAX_LIMIT = 2**62

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
    """``value`` as a plain int in ``[1, MAX_LIMIT]``; the errors name ``Limits.name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"Limits.{name} must be an int, not {type(value).__name__}")
    if not 0 < value <= MAX_LIMIT:
        raise ValueError(f"Limits.{name} must be > 0 and <= 2**62, got {value!r}")
    return int(value)


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one sandboxed run may use.  Every field is checked when the object is made.

    Every numeric limit must be positive: zero or a negative value is a ``ValueError`` and
    never means "unlimited"; so is NaN, an infinity, or a value above ``2**62``.  A bool
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
    #: processes outside the sandbox count too.
    processes: int = 64
    #: Bytes of the largest file a process may write (``RLIMIT_FSIZE``); past it the
    #: write fails with ``EFBIG`` (``SIGXFSZ`` kills a program that does not ignore it).
    file_size: int = 16 * 2**20
    #: Open file descriptors per process (``RLIMIT_NOFILE``): one more than the highest
    #: descriptor number a process may open.
    open_files: int = 256
    #: Bytes of the writable tmpfs that is the working directory ``/sandbox``: every
    #: file the program writes there counts, as do the files given to ``run``.
    disk: int = 64 * 2**20
    #: Bytes of file content returned in ``Result.files``; files past it are left out
    #: and ``Result.files_truncated`` is set.
    files_out: int = 16 * 2**20

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
