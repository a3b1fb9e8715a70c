# SPDX-License-Identifier: MIT
"""What the keeper says about one call, read and checked as it arrives and turned into
a ``CellResult``: each frame within the call's caps, each field of its ``DONE`` of the
right type and size; anything else is a ``ProtocolError``, which loses the session.  A
display's content is the code's own making: one that is malformed or unfit is dropped
(``_model.rich`` checks and sanitizes what is kept), never a protocol error."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Optional, TypeVar

from .._model.cancel import CancelEvent, Cancelled
from .._model.display_frames import checked_display, display_parts
from .._model.filestream import name_problem
from .._model.limits import Limits
from .._model.rich import Bundle
from .._model.session_result import (
    COMMITTED,
    LOST,
    ROLLED_BACK,
    CellError,
    CellResult,
    OutputEvent,
)
from .._model.status import Status
from .._model.untrusted import UntrustedInputError, loads
from .._model.value_codec import ValueCodec, ValueCodecError
from .session_channel import (
    CHUNK_MAX,
    CONTROL_MAX,
    DISPLAY,
    DONE,
    FATAL,
    FILE,
    STDERR,
    STDOUT,
    VALUE_CAP,
    VALUES,
    Channel,
    ChannelTimeout,
    ProtocolError,
    control,
    fatal_reason,
    finite,
)

__all__ = ["VALUE_CAP", "CallbackRaised", "OnEvent", "Reply"]

#: An ``on_event`` callback: shown each ``OutputEvent`` of a call, in order.
OnEvent = Optional[Callable[[OutputEvent], object]]
#: Bytes of a frame of variables beyond the codec's (the keeper's ``VALUES_ROOM``), and
#: those a frame that says why there are none may take whatever ``Limits.values``.
VALUES_ROOM = 64
ERROR_ROOM = 32 * 1024
#: Characters of the reason why variables did not come back.
VALUE_ERROR_MAX = 4096
#: Why variables did not come back, as the keeper says it: a name not defined, a value
#: of a type the codec cannot pass, one too large or too deep.
PULL_ERRORS = ("missing", "type", "value")
#: Seconds between two looks at a call's cancel event.
CANCEL_TICK = 0.05


class CallbackRaised(Exception):
    """An output callback of the caller raised ``error``: the call is interrupted and
    rolled back, then ``error`` is raised as it was."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(repr(error))
        self.error = error


#: What a callback is shown: a chunk of output, or an event.
_Shown = TypeVar("_Shown")

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
        on_event: OnEvent = None,
    ) -> None:
        self.limits = limits
        #: Shown each chunk of output as it comes, until one of them raises.
        self.shown = {STDOUT: on_stdout, STDERR: on_stderr}
        self.on_event = on_event
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.files: dict[str, bytes] = {}
        self.files_bytes = 0
        self.displays: list[Bundle] = []
        #: Display frames taken (kept or dropped) and their bytes: the keeper's caps.
        self.display_frames = 0
        self.display_bytes = 0
        self.value_displayed = False
        #: A display was malformed, or nothing of it fit: left out.
        self.displays_dropped = False
        #: A pull asked for variables: the keeper may send them once.
        self.expects_values = False
        #: The variables the call sent back (``Session.pull``), or why it could not:
        #: ``(kind, reason)``, the kind one of ``PULL_ERRORS``'.
        self.values: dict[str, object] | None = None
        self.values_error: tuple[str, str] | None = None
        self.done: dict[str, object] | None = None
        self.fatal = ""
        self.values_taken = False
        #: What stopped the call early (``collect``), to raise once it is rolled back.
        self.stopped_by: BaseException | None = None

    def bounds(self) -> dict[int, int]:
        """The kinds of frame the keeper may send now, and how long each may be."""
        room = self.limits.files_out - self.files_bytes
        return {
            STDOUT: CHUNK_MAX,
            STDERR: CHUNK_MAX,
            FILE: max(0, room) + 4 + 4096,
            DISPLAY: max(0, self.limits.displays - self.display_bytes),
            **({VALUES: values_bound(self.limits)} if self.values_wanted() else {}),
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
            if payload:
                self._show(self.shown[kind], payload)
                name = "stdout" if kind == STDOUT else "stderr"
                self._show(self.on_event, OutputEvent(name, payload))
        elif kind == DISPLAY:
            self._take_display(payload)
        elif kind == VALUES:
            self._take_values(payload)
        elif kind == FILE:
            self._take_file(payload)
        elif kind == FATAL:
            self.fatal = fatal_reason(payload)
            self.done = {"outcome": LOST}
        else:
            self.done = control(payload)

    def _show(self, callback: Callable[[_Shown], object] | None, shown: _Shown) -> None:
        """Hand ``shown`` to the caller's ``callback``; once one raises, none is called
        again, and the exception is handed back whole (``CallbackRaised``)."""
        if callback is None:
            return
        try:
            callback(shown)
        except BaseException as error:
            self.shown = {STDOUT: None, STDERR: None}
            self.on_event = None
            raise CallbackRaised(error) from None

    def _take_display(self, payload: bytes) -> None:
        """Keep one display, checked and sanitized, and show it as an event; one that
        is malformed or has nothing fit is dropped."""
        self.display_frames += 1
        self.display_bytes += len(payload)
        if self.display_frames > self.limits.displays_count:
            raise ProtocolError("the keeper sent more displays than the call's cap")
        parts = display_parts(payload)
        if parts is None:
            self.displays_dropped = True
            return
        raw, is_value = parts
        bundle = checked_display(raw, self.limits.displays)
        if bundle is None:
            self.displays_dropped = True
            return
        self.displays.append(bundle)
        self.value_displayed = self.value_displayed or is_value
        self._show(self.on_event, OutputEvent("display", bundle))

    def values_wanted(self) -> bool:
        """Whether the keeper may send the call's variables now: asked for, not yet
        sent."""
        return self.expects_values and not self.values_taken

    def _take_values(self, payload: bytes) -> None:
        """Keep the variables a call sent back, decoded (``value_codec``) from hostile
        JSON with bounds; what is malformed is the reason they did not come back."""
        self.values_taken = True
        try:
            message = loads(payload, max_bytes=None)
            if not isinstance(message, dict):
                raise ValueCodecError("not a JSON object")
            if "error" in message:
                kind, reason = message.get("kind"), message.get("error")
                if kind not in PULL_ERRORS or not isinstance(reason, str):
                    raise ValueCodecError("an error of no known kind")
                self.values_error = (str(kind), reason[:VALUE_ERROR_MAX])
                return
            values = ValueCodec.decode_tree(message.get("values"))
            if not isinstance(values, dict) or not all(isinstance(k, str) for k in values):
                raise ValueCodecError("not a dict of names")
            self.values = values
        except (UntrustedInputError, UnicodeDecodeError, ValueError) as exc:
            self.values_error = ("malformed", f"what came back was malformed: {exc}")

    def collect(
        self, channel: Channel, deadline: float, cancel: CancelEvent | None, grace: float
    ) -> None:
        """Read the keeper's frames until its ``DONE``.  Ctrl-C, ``cancel`` or a callback
        that raises interrupts the call (the keeper rolls it back and answers):
        ``stopped_by`` is then what to raise once it has.  ``ProtocolError`` past
        ``deadline``; an interrupted call has ``grace`` seconds to answer."""

        def stop(why: BaseException) -> None:
            nonlocal deadline
            if self.stopped_by is None:
                self.stopped_by = why
                channel.interrupt()
                deadline = min(deadline, time.monotonic() + grace)

        while self.done is None:
            if self.stopped_by is None and cancel is not None and cancel.is_set():
                stop(Cancelled("the call was cancelled; it was rolled back"))
            watching = cancel is not None and self.stopped_by is None
            step = min(deadline, time.monotonic() + CANCEL_TICK) if watching else deadline
            try:
                kind, payload = channel.receive(step, self.bounds())
            except ChannelTimeout:
                if time.monotonic() >= deadline:
                    raise
                continue
            except KeyboardInterrupt as interrupt:
                stop(interrupt)
                continue
            try:
                self.take(kind, payload)
            except CallbackRaised as raised:
                stop(raised.error)

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

    def result(self, wall: float, processes_exceeded: bool = False) -> CellResult:
        """The call's result from its ``DONE`` (``processes_exceeded``: the host saw the
        cap refuse a fork while it ran); ``ProtocolError`` when a field is unfit."""
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
            displays=tuple(self.displays),
            displays_truncated=done.get("displays_truncated") is True or self.displays_dropped,
            value_displayed=self.value_displayed,
            returncode=returncode,
            signal=signal,
            processes_exceeded=processes_exceeded,
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


def values_bound(limits: Limits) -> int:
    """Bytes the frame of a call's variables may take: the keeper's ``Displays`` bound."""
    return max(limits.values, ERROR_ROOM) + VALUES_ROOM
