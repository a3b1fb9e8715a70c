"""Result records."""

from __future__ import annotations

import dataclasses
import enum
import types
from collections.abc import Mapping

__all__ = ["ProcessOutput", "Result", "Status"]


@dataclasses.dataclass
class ProcessOutput:
    """What ``eval_in_sandbox`` returns: the exit code and the stripped UTF-8 output.

    Truthy exactly when ``returncode == 0``.  Mutable, like the reference's record, so
    code written against the reference keeps working.
    """

    returncode: int = 0
    stdout: str = ""
    stderr: str = ""

    def __bool__(self) -> bool:
        return self.returncode == 0


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
    #: peak RSS came near ``Limits.memory`` (best effort: see ``pysandbox._classify``).
    MEMORY_EXCEEDED = "memory_exceeded"
    #: stdout or stderr passed its cap and ``Limits.truncate_output`` is false; the
    #: sandbox was killed.
    OUTPUT_EXCEEDED = "output_exceeded"


def _frozen_files(files: Mapping[str, bytes]) -> Mapping[str, bytes]:
    """A read-only copy of ``files``: later changes to the caller's dict do not show."""
    return types.MappingProxyType(dict(files))


@dataclasses.dataclass(frozen=True)
class Result:
    """What ``run`` and ``run_python`` return: how the program ended, its output, its
    usage, and the files it left.

    Truthy exactly when ``status`` is ``Status.OK``.  Immutable: ``files`` is a
    read-only mapping (a copy of the mapping given).  Hashable: ``files`` takes part in
    ``==`` but not in the hash; pickles and copies like any record.
    """

    #: How the run ended.
    status: Status
    #: The program's exit code, or None when a signal killed it.
    returncode: int | None
    #: The number of the signal that killed the program, or None when it exited.
    signal: int | None
    #: What the program wrote to stdout, at most ``Limits.stdout`` bytes.
    stdout: bytes
    #: What the program wrote to stderr, at most ``Limits.stderr`` bytes.
    stderr: bytes
    #: More was written to stdout than was kept.
    stdout_truncated: bool
    #: More was written to stderr than was kept.
    stderr_truncated: bool
    #: Seconds from the start of the sandbox to its end.
    wall_time: float
    #: User + system CPU seconds of the whole process tree, children included.
    cpu_time: float
    #: Bytes: the peak resident set size of the largest process.
    max_rss: int
    #: The regular files left in the working directory, by relative path (``"out/a.txt"``).
    files: Mapping[str, bytes] = dataclasses.field(hash=False)
    #: Some files were left out of ``files`` (over ``Limits.files_out``, or unreadable).
    files_truncated: bool

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", _frozen_files(self.files))

    def __bool__(self) -> bool:
        return self.status is Status.OK

    def __reduce__(self) -> tuple[type[Result], tuple[object, ...]]:
        """Pickle (and copy) through the constructor: a mapping proxy cannot be pickled."""
        values = [getattr(self, field.name) for field in dataclasses.fields(self)]
        return type(self), tuple(dict(v) if isinstance(v, Mapping) else v for v in values)

    def stdout_text(self, errors: str = "replace") -> str:
        """``stdout`` decoded as UTF-8; ``errors`` as for ``bytes.decode``."""
        return self.stdout.decode("utf-8", errors)

    def stderr_text(self, errors: str = "replace") -> str:
        """``stderr`` decoded as UTF-8; ``errors`` as for ``bytes.decode``."""
        return self.stderr.decode("utf-8", errors)
