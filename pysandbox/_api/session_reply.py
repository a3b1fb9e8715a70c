# SPDX-License-Identifier: MIT
"""What the keeper says about one call, checked as it arrives and turned into a
``CellResult``: each frame within the call's caps, each field of its ``DONE`` of the
right type and size; anything else is a ``ProtocolError``, which loses the session."""

from __future__ import annotations

import os
from collections.abc import Callable

from .._model.filestream import name_problem
from .._model.limits import Limits
from .._model.session_result import COMMITTED, LOST, ROLLED_BACK, CellError, CellResult
from .._model.status import Status
from .session_channel import (
    CHUNK_MAX,
    CONTROL_MAX,
    DONE,
    FATAL,
    FILE,
    STDERR,
    STDOUT,
    VALUE_CAP,
    ProtocolError,
    control,
    fatal_reason,
    finite,
)

__all__ = ["VALUE_CAP", "CallbackRaised", "Reply"]


class CallbackRaised(Exception):
    """An output callback of the caller raised ``error``: the call is interrupted and
    rolled back, then ``error`` is raised as it was."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(repr(error))
        self.error = error


_STATUSES = {
    "ok": Status.OK,
    "wall_time_exceeded": Status.WALL_TIME_EXCEEDED,
    "cpu_time_exceeded": Status.CPU_TIME_EXCEEDED,
    "memory_exceeded": Status.MEMORY_EXCEEDED,
    "output_exceeded": Status.OUTPUT_EXCEEDED,
    "interrupted": Status.SIGNALED,
    "signaled": Status.SIGNALED,
    "nonzero_exit": Status.NONZERO_EXIT,
}
_REASONS = {
    "wall_time_exceeded": "the call passed its wall time",
    "cpu_time_exceeded": "the call passed its CPU time",
    "memory_exceeded": "the call ran out of memory",
    "output_exceeded": "the call's output passed its cap",
    "interrupted": "the call was interrupted",
    "signaled": "the call's interpreter was killed by a signal",
    "nonzero_exit": "the call's interpreter exited",
}


class Reply:
    """What the keeper has said about one call so far, checked as it arrives."""

    def __init__(
        self,
        limits: Limits,
        on_stdout: Callable[[bytes], object] | None = None,
        on_stderr: Callable[[bytes], object] | None = None,
    ) -> None:
        self.limits = limits
        #: Shown each chunk of output as it comes, until one of them raises.
        self.shown = {STDOUT: on_stdout, STDERR: on_stderr}
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.files: dict[str, bytes] = {}
        self.files_bytes = 0
        self.done: dict[str, object] | None = None
        self.fatal = ""

    def bounds(self) -> dict[int, int]:
        """The kinds of frame the keeper may send now, and how long each may be."""
        room = self.limits.files_out - self.files_bytes
        return {
            STDOUT: CHUNK_MAX,
            STDERR: CHUNK_MAX,
            FILE: max(0, room) + 4 + 4096,
            DONE: CONTROL_MAX,
            FATAL: CONTROL_MAX,
        }

    def take(self, kind: int, payload: bytes) -> None:
        """Check one frame and keep what it says; ``ProtocolError`` past a cap."""
        if kind in (STDOUT, STDERR):
            stream, cap = (
                (self.stdout, self.limits.stdout)
                if kind == STDOUT
                else (self.stderr, self.limits.stderr)
            )
            if len(stream) + len(payload) > cap:
                raise ProtocolError("the keeper sent more output than the call's cap")
            stream += payload
            show = self.shown[kind]
            if show is not None and payload:
                try:
                    show(payload)
                except BaseException as error:  # the caller's: handed back whole
                    self.shown = {STDOUT: None, STDERR: None}
                    raise CallbackRaised(error) from None
        elif kind == FILE:
            self._take_file(payload)
        elif kind == FATAL:
            self.fatal = fatal_reason(payload)
            self.done = {"outcome": LOST}
        else:
            self.done = control(payload)

    def _take_file(self, payload: bytes) -> None:
        size = int.from_bytes(payload[:4], "big")
        header = control(payload[4 : 4 + size])
        name, data = header.get("name"), payload[4 + size :]
        # The same names as a one-shot run's files may have: a front end writes them
        # (``--output-dir``), so no absolute path, no ``..``, no NUL.
        if not isinstance(name, str) or name_problem(name) is not None or name in self.files:
            raise ProtocolError("the keeper sent a file without a fit name")
        if len(self.files) >= self.limits.files_out_count:
            raise ProtocolError("the keeper sent more files than the call's cap")
        self.files_bytes += len(data)
        if self.files_bytes > self.limits.files_out:
            raise ProtocolError("the keeper sent more file bytes than the call's cap")
        self.files[name] = data

    def result(self, wall: float) -> CellResult:
        """The call's result from its ``DONE``; ``ProtocolError`` when a field is unfit."""
        done = self.done
        assert done is not None
        outcome = done.get("outcome")
        if outcome == LOST:
            return CellResult(outcome=LOST, status=Status.SIGNALED, reason=self.fatal)
        if outcome not in (COMMITTED, ROLLED_BACK):
            raise ProtocolError("the keeper sent an unknown outcome")
        word = done.get("status")
        if word not in _STATUSES or (outcome == COMMITTED) != (word == "ok"):
            raise ProtocolError("the keeper sent an unknown status")
        returncode, signal = _ending_of(done.get("wait_status"), word)
        return CellResult(
            outcome=str(outcome),
            status=_STATUSES[str(word)],
            stdout=bytes(self.stdout),
            stderr=bytes(self.stderr),
            stdout_truncated=done.get("stdout_truncated") is True,
            stderr_truncated=done.get("stderr_truncated") is True,
            value=_text_or_none(done.get("value"), "value"),
            error=_error(done.get("error")),
            reason=_REASONS.get(str(word), ""),
            wall_time=wall,
            cpu_time=finite(done.get("cpu", 0.0), "cpu"),
            max_rss=int(finite(done.get("max_rss", 0), "max_rss")),
            files=self.files,
            files_truncated=done.get("files_truncated") is True,
            returncode=returncode,
            signal=signal,
        )


def _ending_of(status: object, word: object) -> tuple[int | None, int | None]:
    """The exit code or signal of a rolled-back call's wait status."""
    if word not in ("signaled", "nonzero_exit") or isinstance(status, bool):
        return None, None
    if not isinstance(status, int) or not 0 <= status < 1 << 16:
        raise ProtocolError("the keeper sent a bad wait status")
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    return os.WEXITSTATUS(status), None


def _text_or_none(value: object, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > VALUE_CAP:
        raise ProtocolError(f"the keeper sent an unfit {what}")
    return value


def _error(value: object) -> CellError | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ProtocolError("the keeper sent an unfit error")
    fields = [_text_or_none(value.get(key), key) for key in ("type", "message", "traceback")]
    if any(field is None for field in fields):
        raise ProtocolError("the keeper sent an unfit error")
    return CellError(*(str(field) for field in fields))
