# SPDX-License-Identifier: MIT
"""``CallResult``: what one ``Session.call`` of a function did (its return value as a
Python value, its output apart, or the exception it raised), and ``call_text``, the call
written short as Python for titles and messages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .escape import escape_report
from .record import record
from .result import SandboxFailure, output_tails
from .session_result import OUTCOMES, CellError, SessionOutcome
from .status import Status

__all__ = ["CALL_TEXT_MAX", "CallResult", "call_text"]

#: Characters of ``call_text``'s text at most.
CALL_TEXT_MAX = 80


def call_text(
    target: str, args: Sequence[object] = (), kwargs: Mapping[str, object] | None = None
) -> str:
    """The call of ``target`` with ``args`` and ``kwargs`` written as Python, each
    argument's ``repr`` shortened by ``reprlib`` and the whole cut to ``CALL_TEXT_MAX``
    characters: ``"solution.add(2, 3)"``, ``"f([1, 2, 3, 4, 5, 6, ...], key='x')"``."""
    import reprlib  # only where a call is written

    short = reprlib.Repr()
    short.maxstring = short.maxother = 30
    shown = [short.repr(arg) for arg in args]
    shown += [f"{name}={short.repr(value)}" for name, value in (kwargs or {}).items()]
    text = f"{target}({', '.join(shown)})"
    if len(text) > CALL_TEXT_MAX:
        text = text[: CALL_TEXT_MAX - 4] + "...)"
    return text


@record(unhashed=("value",))
class CallResult(SessionOutcome):
    """What one ``Session.call`` did: the outcome for the session's state, how the
    function ended, its return value or the exception it raised, its output apart, and
    what it used.

    Truthy exactly when the call was committed with ``Status.OK`` and ``error`` is None.
    """

    #: The function called, as given: ``"solution.add"``.
    target: str
    #: The call written short as Python (``call_text``): ``"solution.add(2, 3)"``.
    call: str
    #: ``"committed"``, ``"rolled_back"`` or ``"lost"``, as ``CellResult.outcome``.
    outcome: str
    #: How the call ended, as ``CellResult.status``: ``OK`` also when it raised.
    status: Status
    #: The return value, a copy rebuilt on the host from the value codec's format; None
    #: when the function raised, did not finish or returned what cannot cross.
    value: object = None
    #: The exception the function raised (a traceback of its own frames only), or why
    #: its return value could not cross (a ``TypeError`` or ``ValueError``); or None.
    error: CellError | None = None
    #: What the call wrote to stdout and stderr, within the call's caps: never the value.
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    #: Why the call did not finish, in words, with the limit that ended it; "" when
    #: committed.
    reason: str = ""
    #: Seconds from the request to the answer, seen from the caller.
    wall_time: float = 0.0
    #: CPU seconds of every process the call ran.
    cpu_time: float = 0.0
    #: Bytes: the peak resident set of the call's process.
    max_rss: int = 0
    #: The function returned, but its value could not cross the sandbox's boundary:
    #: ``error`` says why (a ``TypeError`` or ``ValueError`` naming where in the value).
    value_refused: bool = False
    #: A fork or clone was refused at ``Limits.processes`` while the call ran, as
    #: ``CellResult.processes_exceeded``.
    processes_exceeded: bool = False

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, not {self.outcome!r}")

    def check(self) -> CallResult:
        """Return the result itself when it is truthy, else raise ``SandboxFailure``
        with a message for the code's author: ``solution.add(2, 3) raised
        ZeroDivisionError: division by zero`` and the traceback, or ``solution.add(2, 3)
        did not finish: CPU time limit of 1 s reached``; then the tails of stdout and
        stderr."""
        __tracebackhide__ = True  # pytest shows the caller's line, not this frame
        if self:
            return self
        if self.error is not None and self.value_refused:
            message = escape_report(f"{self.error.message}\n")
        elif self.error is not None:
            head = f"{self.call} raised {self.error.type}: {self.error.message}"
            trace = self.error.traceback.rstrip("\n")
            message = escape_report(f"{head}\n{trace}\n" if trace else f"{head}\n")
        else:
            reason = escape_report(self.reason or self.status.value)
            message = f"{self.call} did not finish: {reason}\n"
        if self.processes_exceeded:
            message = message.rstrip("\n") + " (its process limit was reached too)\n"
        raise SandboxFailure(message + output_tails(self), self)
