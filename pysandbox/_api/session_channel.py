# SPDX-License-Identifier: MIT
"""The host's end of a session's channel: requests out, the keeper's frames in.

The keeper (``session_keeper.py``) shares its uid with the session's code, so what it
says is hostile input: every frame is bounded before it is read whole (a kind the host
expects at that moment, a length within that kind's bound), JSON goes through the
bounded parser (``untrusted.loads``), and each field is checked for its type and range.
Anything else is a ``ProtocolError``, after which the session is killed: the host never
waits for a frame past its deadline and never keeps more than the caps of one call.

Frames: one byte of kind, four of length (big-endian), the payload; the kinds are the
keeper's (``CALL``, ``INTERRUPT`` and ``UPLOAD`` from the host; ``READY``, ``STDOUT``,
``STDERR``, ``DISPLAY``, ``FILE``, ``DONE``, ``FATAL`` and ``WRITTEN`` to it).  A call's code goes
on a pipe of its own, the call pipe, straight to the session's state process.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import struct
import threading
import time
from collections.abc import Mapping

from .._model.record import record
from .._model.untrusted import UntrustedInputError, loads

__all__ = [
    "CALL",
    "DISPLAY",
    "DONE",
    "FATAL",
    "FILE",
    "INTERRUPT",
    "READY",
    "STDERR",
    "STDOUT",
    "UPLOAD",
    "VALUES",
    "VALUE_CAP",
    "WRITTEN",
    "Channel",
    "ChannelTimeout",
    "FilesRefused",
    "ProtocolError",
    "Values",
    "code_request",
    "control",
    "fatal_reason",
    "finite",
    "limits_request",
    "upload_request",
]

HEADER = struct.Struct(">BI")
CALL, INTERRUPT, UPLOAD = ord("C"), ord("I"), ord("U")
READY, STDOUT, STDERR, FILE, DONE, FATAL, WRITTEN = (ord(c) for c in "ROEFDXW")
DISPLAY, VALUES = ord("P"), ord("V")
#: The keeper's output chunks are at most 64 KiB; control messages are small.
CHUNK_MAX = 65536
CONTROL_MAX = 1 << 20
#: Characters of a value's ``repr``, of an exception's message and of its traceback kept.
VALUE_CAP = 64 * 1024
_U32 = struct.Struct(">I")


@record
class Values:
    """A call's variables: the ones to set before its code runs (the value codec's JSON
    of a ``{name: value}`` dict, or None), and the names of the ones to send back.
    ``harness``: the code is pysandbox's own (``Session.call``'s): the variables sent back
    are taken out of the session as they are sent, and the frames of the code's own
    lines are left out of an exception's traceback."""

    push: bytes | None = None
    pull: tuple[str, ...] = ()
    harness: bool = False


#: A call that sets and sends back no variables.
NO_VALUES = Values()


class ProtocolError(Exception):
    """The keeper broke the protocol (or went silent past a deadline); the message says how."""


class FilesRefused(Exception):
    """The keeper could not write a call's input files (the message says which and why):
    no call was sent, and the session goes on."""


class ChannelTimeout(ProtocolError):
    """The deadline of ``Channel.receive`` passed before a whole frame came."""


def _frame(kind: int, payload: bytes) -> bytes:
    return HEADER.pack(kind, len(payload)) + payload


def limits_request(order: Mapping[str, object]) -> bytes:
    """The keeper's ``CALL`` frame: the call's limits, the JSON ``order``."""
    return _frame(CALL, json.dumps(order).encode("utf-8"))


def code_request(code: str, cell: int, order: Mapping[str, object], values: Values) -> bytes:
    """The call pipe's ``CALL`` frame: the code of the session's call number ``cell``,
    how long the ``repr`` of its value and one display may be (from the keeper's
    ``order``), and the variables to set before it runs (the value codec's JSON, put in
    as it is) and to send back after."""
    request = {
        "code": code,
        "cell": cell,
        "value_max": VALUE_CAP,
        "show_max": order.get("displays_max", 0),
        "values_max": order.get("values_max", 0),
        "pull": list(values.pull),
        "harness": values.harness,
    }
    text = json.dumps(request).encode("utf-8")
    if values.push is not None:
        text = b"".join([text[:-1], b', "push": ', values.push, b"}"])
    return _frame(CALL, text)


def upload_request(files: list[tuple[str, int, bytes]]) -> bytes:
    """An ``UPLOAD`` frame: the JSON list of the ``(name, mode, data)`` files as
    ``[name, size, mode]``, then their bytes."""
    body = json.dumps([[name, len(data), mode] for name, mode, data in files]).encode("utf-8")
    return _frame(UPLOAD, b"".join([_U32.pack(len(body)), body, *(d for _, _, d in files)]))


def finite(value: object, what: str) -> float:
    """``value`` as a finite number >= 0, else ``ProtocolError`` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProtocolError(f"{what} is not a number")
    if not math.isfinite(value) or value < 0:
        raise ProtocolError(f"{what} is out of range")
    return float(value)


class Channel:
    """The three pipes of one session, the host's ends: ``start_call`` writes a call
    to the keeper and the state, ``interrupt`` to the keeper, ``receive`` reads from
    the keeper.

    Owns the fds; ``close`` closes them (idempotent).  Not thread-safe: one call at a
    time, which ``Session`` ensures; only ``interrupt`` may come from another thread
    (it waits for a call being sent to be sent whole, so its frame never lands inside
    another).  Writes wait at most until a deadline: the other end may stop reading."""

    def __init__(self, request_fd: int, reply_fd: int, call_fd: int) -> None:
        self.request_fd = request_fd
        self.reply_fd = reply_fd
        self.call_fd = call_fd
        for fd in (request_fd, call_fd):
            os.set_blocking(fd, False)
        self._buffer = bytearray()
        self._poll = select.poll()
        self._poll.register(reply_fd, select.POLLIN)
        self._sending = threading.Lock()

    def start_call(
        self,
        code: str,
        cell: int,
        order: Mapping[str, object],
        inputs: list[tuple[str, int, bytes]],
        deadline: float,
        values: Values = NO_VALUES,
    ) -> None:
        """Send the session's call number ``cell``: its input files to the keeper,
        which writes them before the call starts (``FilesRefused`` when it cannot,
        ``ProtocolError`` with the keeper's reason if it ends the session instead); its
        code to the state; its limits (``order``) to the keeper."""
        with self._sending:
            if inputs:
                _write(self.request_fd, upload_request(inputs), deadline, "the keeper")
                kind, payload = self.receive(deadline, {WRITTEN: 4096, FATAL: CONTROL_MAX})
                if kind == FATAL:
                    raise ProtocolError(fatal_reason(payload))
                error = control(payload).get("error")
                if error is not None:
                    raise FilesRefused(str(error)[:400])
            frame = code_request(code, cell, order, values)
            _write(self.call_fd, frame, deadline, "the session's state")
            _write(self.request_fd, limits_request(order), deadline, "the keeper")

    def interrupt(self) -> None:
        """Ask the keeper to end the running call (one atomic write; a gone keeper is
        noticed by ``receive``)."""
        with self._sending, contextlib.suppress(OSError):
            os.write(self.request_fd, HEADER.pack(INTERRUPT, 0))

    def receive(self, deadline: float, bounds: dict[int, int]) -> tuple[int, bytes]:
        """The next frame, whose kind must be a key of ``bounds`` and whose length at
        most its value; ``ProtocolError`` past ``deadline`` (``time.monotonic()``), at
        the pipe's end, or on a frame of another kind or length."""
        while True:
            if len(self._buffer) >= HEADER.size:
                kind, length = HEADER.unpack_from(self._buffer)
                if kind not in bounds:
                    raise ProtocolError(f"the keeper sent a frame of kind {kind} out of turn")
                if length > bounds[kind]:
                    raise ProtocolError(f"the keeper sent a frame of {length} bytes")
                end = HEADER.size + length
                if len(self._buffer) >= end:
                    payload = bytes(self._buffer[HEADER.size : end])
                    del self._buffer[:end]
                    return kind, payload
            self._fill(deadline)

    def _fill(self, deadline: float) -> None:
        """Read what the pipe holds into the buffer, waiting until ``deadline``."""
        left = deadline - time.monotonic()
        if left <= 0 or not self._poll.poll(max(1, math.ceil(left * 1000))):
            raise ChannelTimeout("the keeper did not answer in time")
        data = os.read(self.reply_fd, 1 << 20)
        if not data:
            raise ProtocolError("the keeper's pipe closed")
        self._buffer += data

    def close(self) -> None:
        for fd in (self.request_fd, self.reply_fd, self.call_fd):
            if fd >= 0:
                os.close(fd)
        self.request_fd = self.reply_fd = self.call_fd = -1


def _write(fd: int, data: bytes, deadline: float, reader: str) -> None:
    """Write ``data`` whole to the non-blocking pipe ``fd``, waiting for room until
    ``deadline``; ``ProtocolError`` naming the ``reader`` when it is gone or slow."""
    view = memoryview(data)
    room = select.poll()
    room.register(fd, select.POLLOUT)
    try:
        while view:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0 or not room.poll(max(1, math.ceil(left * 1000))):
                    raise ChannelTimeout(f"{reader} did not take the request in time") from None
    except OSError as exc:
        raise ProtocolError(f"{reader} stopped reading ({exc.strerror})") from None


def control(payload: bytes) -> dict[str, object]:
    """A control frame's JSON object, parsed with bounded depth and numbers."""
    try:
        message = loads(payload, max_bytes=None)
    except (UntrustedInputError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"the keeper sent bad JSON: {exc}") from None
    if not isinstance(message, dict):
        raise ProtocolError("the keeper sent JSON that is not an object")
    return message


def fatal_reason(payload: bytes) -> str:
    try:
        reason = control(payload).get("reason")
    except ProtocolError:
        return "the keeper ended the session"
    if not isinstance(reason, str):
        return "the keeper ended the session"
    return f"the keeper ended the session: {reason[:400]}"
