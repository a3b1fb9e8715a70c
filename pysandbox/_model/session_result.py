# SPDX-License-Identifier: MIT
"""``CellResult``: what one call of a ``Session`` did, and ``CellError``, the exception
the code raised, as data."""

from __future__ import annotations

from collections.abc import Mapping

from .record import record
from .result import FrozenFiles
from .rich import Bundle
from .status import Status

__all__ = [
    "COMMITTED",
    "LOST",
    "OUTCOMES",
    "ROLLED_BACK",
    "CellError",
    "CellResult",
    "OutputEvent",
    "SessionOutcome",
]

#: The call ended by itself: the session's state is what the call left.
COMMITTED = "committed"
#: A limit ended the call (or it crashed the interpreter): the session's state is exactly
#: what it was before the call.
ROLLED_BACK = "rolled_back"
#: The session itself ended (``CellResult.reason`` says why); it runs no more calls.
LOST = "lost"
OUTCOMES = (COMMITTED, ROLLED_BACK, LOST)


@record
class CellError:
    """An exception the call's code raised and did not catch, as Jupyter shows it."""

    #: The exception's class name (``"ZeroDivisionError"``).
    type: str
    #: ``str()`` of the exception.
    message: str
    #: The traceback as text, the cell's lines included (``File "<cell-3>", line 2``).
    traceback: str


#: What an ``OutputEvent`` is.
EVENT_KINDS = ("stdout", "stderr", "display")


@record
class OutputEvent:
    """One piece of a call's output as it came, in the order the code made them: a
    chunk of stdout or of stderr (``bytes``), or a display (a ``Bundle``)."""

    #: ``"stdout"``, ``"stderr"`` or ``"display"``.
    kind: str
    data: bytes | Bundle

    def __post_init__(self) -> None:
        if self.kind not in EVENT_KINDS:
            raise ValueError(f"kind must be one of {EVENT_KINDS}, not {self.kind!r}")


class SessionOutcome:
    """What a result of a session's call says of its outcome (``CellResult``,
    ``CallResult``): truthy exactly when the call was committed with ``Status.OK`` and
    ``error`` is None, and a property per outcome."""

    outcome: str
    status: Status
    error: CellError | None

    def __bool__(self) -> bool:
        return self.outcome == COMMITTED and self.status is Status.OK and self.error is None

    @property
    def committed(self) -> bool:
        return self.outcome == COMMITTED

    @property
    def rolled_back(self) -> bool:
        return self.outcome == ROLLED_BACK

    @property
    def lost(self) -> bool:
        return self.outcome == LOST


@record(unhashed=("files", "displays"))
class CellResult(SessionOutcome):
    """What one ``Session.run`` did: the outcome for the session's state, how the code
    ended, its output and value, and what it used.

    Truthy exactly when the call was committed with ``Status.OK`` and raised nothing.
    """

    #: ``"committed"``, ``"rolled_back"`` or ``"lost"`` (``COMMITTED``, ...).
    outcome: str
    #: How the code ended: ``OK`` (also when it raised: see ``error``), a limit
    #: (``WALL_TIME_EXCEEDED``, ``CPU_TIME_EXCEEDED``, ``MEMORY_EXCEEDED``,
    #: ``OUTPUT_EXCEEDED``), ``SIGNALED`` (a crash) or ``NONZERO_EXIT`` (``os._exit``).
    status: Status
    #: What the call wrote to stdout and stderr, within the call's caps.
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    #: ``repr()`` of the final expression's value (None without one, or when None),
    #: cut at the call's value cap.
    value: str | None = None
    #: The exception the code raised, or None.
    error: CellError | None = None
    #: Why a call was rolled back or the session lost, in words; "" when committed.
    reason: str = ""
    #: Seconds from the request to the answer, seen from the caller.
    wall_time: float = 0.0
    #: CPU seconds of every process the call ran, as the session's keeper counted them.
    cpu_time: float = 0.0
    #: Bytes: the peak resident set of the call's process.
    max_rss: int = 0
    #: Files the call made or changed in the working directory, by relative path.
    files: Mapping[str, bytes] = FrozenFiles()
    #: Some of those were left out (over the call's caps).
    files_truncated: bool = False
    #: What a notebook would have shown, in order: each figure (``plt.show()``, and the
    #: figures still open at the call's end), each object given to ``display()``, and a
    #: final value with a rich representation; as MIME bundles, checked and sanitized.
    displays: tuple[Bundle, ...] = ()
    #: Some displays were left out (over ``Limits.displays`` or ``displays_count``).
    displays_truncated: bool = False
    #: The final expression's value was shown as one of ``displays`` (it had a rich
    #: representation), as a notebook's ``Out[]``; ``value`` still holds its ``repr``.
    value_displayed: bool = False
    #: The exit code of an interpreter that exited (``os._exit(3)``), or the number of the
    #: signal that ended it (a segfault); None otherwise.
    returncode: int | None = None
    signal: int | None = None
    #: A fork or clone was refused because the session had ``Limits.processes`` tasks
    #: while the call ran (seen where a pids cgroup caps the session; False without).
    processes_exceeded: bool = False

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, not {self.outcome!r}")
        object.__setattr__(self, "files", FrozenFiles(self.files))
        object.__setattr__(self, "displays", tuple(self.displays))
