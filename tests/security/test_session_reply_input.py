# SPDX-License-Identifier: MIT
"""What a session's keeper says is hostile input, fed here straight to the host's parser.

The session's code shares the keeper's uid, so every byte on the reply pipe may be
forged.  ``tests/security/test_session_attacks.py`` forges from inside a real sandbox,
through what the keeper forwards; here a corpus of hostile frames (random bytes, headers
claiming gigabytes, JSON deep, huge or of the wrong types, unfit file names, more output
than the caps) goes through a real pipe into ``Channel.receive`` and ``Reply``: each
either reads as a well-formed ``CellResult`` or is one ``ProtocolError``, never another
exception, never a wait past the deadline, never a name a front end could write outside
its directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pysandbox import CellResult, Limits
from pysandbox._api.session_channel import DONE, FATAL, FILE, STDERR, STDOUT, Channel, ProtocolError
from pysandbox._api.session_reply import Reply

pytestmark = pytest.mark.no_bwrap

HEADER = struct.Struct(">BI")
LIMITS = Limits(stdout=1000, stderr=1000, files_out=4096, files_out_count=3)


def frame(kind: int, payload: bytes) -> bytes:
    return HEADER.pack(kind, len(payload)) + payload


def done(**fields: object) -> bytes:
    message = {"outcome": "committed", "status": "ok", "value": None, "error": None}
    message.update(fields)
    return frame(DONE, json.dumps(message).encode())


def file_frame(name: object, data: bytes = b"x") -> bytes:
    header = json.dumps({"name": name, "mode": 0o644}).encode()
    return frame(FILE, struct.pack(">I", len(header)) + header + data)


def read_all(data: bytes, deadline: float = 2.0) -> CellResult:
    """``data`` written to a pipe (by a thread: it may exceed the pipe's buffer), read as
    the host reads a call's reply: a ``CellResult``, or ``ProtocolError``."""
    reply_read, reply_write = os.pipe()
    request_read, request_write = os.pipe()
    call_read, call_write = os.pipe()
    channel = Channel(request_write, reply_read, call_write)

    def feed() -> None:
        # The reader may stop at a protocol error with data unread: EPIPE then.
        with contextlib.suppress(OSError):
            _write_all(reply_write, data)
        os.close(reply_write)

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        reply = Reply(LIMITS)
        end = time.monotonic() + deadline
        while reply.done is None:
            kind, payload = channel.receive(end, reply.bounds())
            reply.take(kind, payload)
        return reply.result(0.0)
    finally:
        channel.close()
        os.close(request_read)
        os.close(call_read)
        writer.join()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def outcome_of(data: bytes) -> CellResult | ProtocolError:
    try:
        return read_all(data)
    except ProtocolError as error:
        return error


HOSTILE = {
    "four gigabytes claimed": HEADER.pack(STDOUT, 2**32 - 1),
    "a kind out of turn": frame(ord("Z"), b"{}"),
    "output past its cap": frame(STDOUT, b"x" * 600) + frame(STDOUT, b"x" * 600),
    "a chunk past its bound": frame(STDERR, b"x" * 70000),
    "nested 200,000 deep": frame(DONE, b"[" * 200000 + b"]" * 200000),
    "a 400-digit number": done(cpu=int("9" * 400)),
    "NaN": frame(DONE, b'{"outcome": "committed", "status": "ok", "cpu": NaN}'),
    "not UTF-8": frame(DONE, b'{"outcome": "\xff"}'),
    "not an object": frame(DONE, b"[1, 2]"),
    "an unknown outcome": done(outcome="won"),
    "a committed call that says it was killed": done(status="signaled"),
    "a value of another type": done(value=[1]),
    "a value past its cap": done(value="x" * (2**16 + 1)),
    "an error of another shape": done(error={"type": 1}),
    "a negative cpu time": done(cpu=-1),
    "a bad wait status": done(outcome="rolled_back", status="signaled", wait_status=2**40),
    "an absolute file name": file_frame("/etc/passwd") + done(),
    "a file name going up": file_frame("a/../../b") + done(),
    "a file name with NUL": file_frame("a\0b") + done(),
    "a lone surrogate in a file name": file_frame("\ud800") + done(),
    "a file name twice": file_frame("a") + file_frame("a") + done(),
    "too many files": b"".join(file_frame(f"f{n}") for n in range(4)) + done(),
    "file bytes past the cap": file_frame("big", b"x" * 5000) + done(),
    "a file header longer than its frame": frame(FILE, struct.pack(">I", 999) + b"{}"),
    "a frame cut short": HEADER.pack(DONE, 100) + b"{",
    "nothing": b"",
}


@pytest.mark.parametrize("data", list(HOSTILE.values()), ids=list(HOSTILE))
def test_each_hostile_reply_is_one_protocol_error(data: bytes) -> None:
    started = time.monotonic()
    assert isinstance(outcome_of(data), ProtocolError)
    assert time.monotonic() - started < 5


def test_a_keeper_that_stops_reading_is_a_protocol_error_at_the_deadline() -> None:
    """A request larger than a pipe holds, to a keeper that reads none of it (the code
    may stop it): the host gives up at the deadline instead of blocking."""
    request_read, request_write = os.pipe()
    call_read, call_write = os.pipe()
    reply_read, reply_write = os.pipe()
    channel = Channel(request_write, reply_read, call_write)
    started = time.monotonic()
    big = b"x" * (1 << 20)
    for code, inputs in (("#" * len(big), []), ("", [("in.bin", 0o644, big)])):
        with pytest.raises(ProtocolError, match="in time"):
            channel.start_call(code, 1, {}, inputs, time.monotonic() + 0.3)
    assert time.monotonic() - started < 5
    channel.close()
    for fd in (request_read, call_read, reply_write):
        os.close(fd)


def _read_exact(fd: int, size: int, pace: float = 0.0) -> bytes:
    """``size`` bytes from ``fd``, at most 64 KiB a read and ``pace`` seconds apart;
    ``EOFError`` at the pipe's end before the first byte."""
    parts = []
    while size:
        part = os.read(fd, min(size, 65536))
        if not part and not parts:
            raise EOFError
        assert part, "the pipe ended inside a frame"
        parts.append(part)
        size -= len(part)
        time.sleep(pace)
    return b"".join(parts)


def test_an_interrupt_from_another_thread_never_lands_inside_a_frame() -> None:
    """``Session.interrupt()`` from another thread while a call's files are being sent
    (a slow keeper reads them): its frame comes before the call's frames or after them,
    never inside one, where the keeper would read it as part of the files."""
    request_read, request_write = os.pipe()
    call_read, call_write = os.pipe()
    reply_read, reply_write = os.pipe()
    channel = Channel(request_write, reply_read, call_write)
    kinds: list[str] = []

    def keeper() -> None:
        while True:
            try:
                kind, length = struct.unpack(">BI", _read_exact(request_read, 5))
            except EOFError:
                return
            _read_exact(request_read, length, pace=0.001)
            kinds.append(chr(kind))
            if chr(kind) == "U":
                os.write(reply_write, struct.pack(">BI", ord("W"), 2) + b"{}")

    def calls() -> None:
        while os.read(call_read, 65536):
            pass

    readers = [threading.Thread(target=keeper), threading.Thread(target=calls)]
    for reader in readers:
        reader.start()
    interrupter = threading.Timer(0.01, channel.interrupt)
    interrupter.start()
    files = [("in.bin", 0o644, b"y" * (4 << 20))]
    channel.start_call("x = 1", 1, {"wall": 1}, files, time.monotonic() + 30)
    interrupter.join()
    channel.close()
    for reader in readers:
        reader.join()
    for fd in (request_read, call_read, reply_write):
        os.close(fd)
    assert kinds in (["I", "U", "C"], ["U", "C", "I"]), kinds


def test_a_silent_keeper_is_a_protocol_error_at_the_deadline() -> None:
    reply_read, reply_write = os.pipe()
    channel = Channel(os.dup(reply_write), reply_read, os.dup(reply_write))
    started = time.monotonic()
    with pytest.raises(ProtocolError, match="in time"):
        channel.receive(started + 0.3, Reply(LIMITS).bounds())
    assert time.monotonic() - started < 3
    channel.close()
    os.close(reply_write)


def test_a_well_formed_reply_reads_as_its_result() -> None:
    data = frame(STDOUT, b"hi\n") + file_frame("out/a.txt", b"A") + done(value="42", cpu=0.5)
    result = outcome_of(data)
    assert isinstance(result, CellResult), result
    assert (
        result.stdout == b"hi\n"
        and result.value == "42"
        and dict(result.files) == {"out/a.txt": b"A"}
    )
    lost = outcome_of(frame(FATAL, json.dumps({"reason": "x" * 10000}).encode()))
    assert isinstance(lost, CellResult) and lost.lost and len(lost.reason) < 500


KINDS = st.sampled_from([STDOUT, STDERR, FILE, DONE, FATAL, 0, 255])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000))
def test_any_bytes_are_a_result_or_a_protocol_error(data: bytes) -> None:
    outcome_of(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(KINDS, JSON), max_size=4))
def test_any_frames_of_json_are_a_result_or_a_protocol_error(
    frames: list[tuple[int, object]],
) -> None:
    data = b"".join(frame(kind, json.dumps(value).encode()) for kind, value in frames)
    result = outcome_of(data + done())
    if isinstance(result, CellResult):
        assert all(
            not name.startswith("/") and ".." not in name.split("/") for name in result.files
        )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "outcome",
                "status",
                "value",
                "error",
                "cpu",
                "max_rss",
                "wait_status",
                "stdout_truncated",
            ]
        ),
        JSON,
    )
)
def test_any_done_is_a_result_or_a_protocol_error(fields: dict[str, object]) -> None:
    outcome_of(frame(DONE, json.dumps(fields).encode()))


@pytest.fixture(autouse=True)
def _no_thread_left() -> Iterator[None]:
    before = threading.active_count()
    yield
    assert threading.active_count() <= before
