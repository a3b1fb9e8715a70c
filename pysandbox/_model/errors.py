"""The exceptions pysandbox raises."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .result import Result

__all__ = ["Cancelled", "SandboxError", "SandboxFailure"]


class SandboxError(Exception):
    """The sandbox could not run the code, or the run broke a limit of the reference API.

    Raised with the reference implementation's messages for its cases (``Process timed
    out``, ``I/O buffer size exceeded``, ``Subprocess did not produce valid UTF-8``,
    ``Cannot find the `bwrap` executable``), and with a message naming the cause and
    the fix when the host cannot build a sandbox.  Never means the code ran unsandboxed.
    """


class Cancelled(Exception):
    """The run was cancelled through its ``cancel`` event; the sandbox is gone."""


class SandboxFailure(AssertionError):
    """``Result.check`` found a run that did not end ``OK``; ``result`` is that run.

    An ``AssertionError``, so pytest reports it as a failed check, with the message:
    the verdict, the exit code or signal, the times and the tails of stdout and stderr.
    """

    def __init__(self, message: str, result: Result) -> None:
        super().__init__(message, result)
        #: The run that failed.
        self.result = result

    def __str__(self) -> str:
        return str(self.args[0])
