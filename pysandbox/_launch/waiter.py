# SPDX-License-Identifier: MIT
"""Warm sandboxes, the host's side: the waiter's plan, its fds and what it is handed.

A warm sandbox's interpreter runs the waiter (``waiter_program.py``) instead of the code:
it starts, runs a template's set-up if there is one, says it is ready and waits, as long
as it takes, for its call.  What a call brings that a sandbox's kind does not fix (its
code, its arguments, its input files, the environment variables the interpreter does
not read as it starts, which of its files come back) is written into the payload memfd
at the hand-over; the C core
then writes one byte into the go pipe as it starts the clock, and the waiter makes the
interpreter what a fresh one would be at the code's first line and runs the code.

``waiting_plan`` turns a plan into its warm form (same sandbox, the waiter as its
program, no code yet); ``WaiterEnds`` holds the host's ends of the pipes and the memfd;
``Handover`` is one call's part; ``starts_up`` tells the environment variables that
the interpreter reads as it starts (those stay part of a sandbox's kind).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence

from .._model.cancel import CancelEvent
from .._model.errors import SandboxError
from .._model.record import record, replace
from .plan import Plan

__all__ = [
    "READY_CAP",
    "Handover",
    "WaiterEnds",
    "encode_template",
    "starts_up",
    "waiting_plan",
]

#: Bytes of the ready pipe kept: ``R``, or ``X`` and a traceback or a failure.
READY_CAP = 4096
#: Environment variables the interpreter (or the C library under it) reads as it
#: starts, by name and by prefix: a call that adds one needs a sandbox started with it.
#: A heuristic: a ``.pth`` file run at start-up may read anything (setuptools' reads
#: ``SETUPTOOLS_USE_DISTUTILS``); a call with a template keeps its whole ``env`` in the
#: kind, as the template's modules read theirs as they are imported.
_STARTUP_NAMES = frozenset(
    {"HOME", "LANG", "LANGUAGE", "PATH", "TZ", "TMPDIR", "TERM", "LOCPATH", "GCONV_PATH"}
)
_STARTUP_PREFIXES = ("PYTHON", "LC_", "LD_", "GLIBC_", "MALLOC_", "SETUPTOOLS_")

_program_text: str | None = None


def starts_up(name: str) -> bool:
    """The interpreter, or the C library under it, may read ``name`` as it starts."""
    return name in _STARTUP_NAMES or name.startswith(_STARTUP_PREFIXES)


def _record(tag: bytes, body: bytes) -> bytes:
    """One payload record: the tag byte, the body's length (8 bytes), the body."""
    return tag + len(body).to_bytes(8, "big") + body


def encode_template(imports: Sequence[str], setup: str, serve: int | None = None) -> bytes:
    """The payload a warm sandbox starts with: the template's imports and set-up, and
    with ``serve``, the fd of the control socket on which it then serves copies
    (``copies.py``) rather than wait for a call."""
    parts = [_record(b"i", name.encode()) for name in imports]
    if setup:
        parts.append(_record(b"s", setup.encode("utf-8")))
    if serve is not None:
        parts.append(_record(b"z", str(serve).encode()))
    return b"".join(parts)


@record
class Handover:
    """One call's part of a warm sandbox's run."""

    #: The program line a fresh sandbox would run (``python -u /sandbox/main.py ARGS``).
    program: tuple[str, ...]
    #: Where the code's path is in ``program``: ``sys.argv`` is ``program[code_at:]``.
    code_at: int
    #: Environment variables to add (none that ``starts_up``).
    env: tuple[tuple[str, str], ...] = ()
    #: Input files, in the init's stream format (``encode_files``); b"": none.
    files: bytes = b""
    #: A template's copy's: the fd of its code file and the code the waiter writes in
    #: it (``copies.py``); None: the host's code file shows the code.
    code: tuple[int, bytes] | None = None
    #: The call's ``files_include`` and ``files_exclude`` patterns (checked): read from
    #: the payload by the init (``--files-filter-fd``) once the program has ended; the
    #: waiter skips them.
    files_include: tuple[str, ...] = ()
    files_exclude: tuple[str, ...] = ()

    def encode(self) -> bytes:
        """The payload the waiter reads once told to go."""
        parts = [
            _record(
                b"p", b"\0".join(item.encode("utf-8", "surrogateescape") for item in self.program)
            ),
            _record(b"c", str(self.code_at).encode()),
        ]
        for key, value in self.env:
            parts.append(_record(b"e", f"{key}={value}".encode("utf-8", "surrogateescape")))
        if self.files:
            parts.append(_record(b"f", self.files))
        if self.code is not None:
            fd, code = self.code
            parts.append(_record(b"m", b"%d\n" % fd + code))
        parts += [_record(b"+", pattern.encode()) for pattern in self.files_include]
        parts += [_record(b"-", pattern.encode()) for pattern in self.files_exclude]
        return b"".join(parts)


def _waiter_text() -> str:
    """The waiter's source, read once."""
    global _program_text
    if _program_text is None:
        path = os.path.join(os.path.dirname(__file__), "waiter_program.py")
        with open(path, encoding="utf-8") as file:
            _program_text = file.read()
    return _program_text


def waiting_plan(plan: Plan, template: bytes = b"") -> Plan:
    """``plan``'s warm form: the same sandbox, its interpreter running the waiter with
    the flags ``plan.program`` gives it (``python -u``), no code yet, ``template`` (made
    by ``encode_template``) to run before it waits.  ``ValueError`` unless ``plan`` was
    built with its waiter's fds (``FdLayout.of(waiter=True)``: every fd number in its
    command line counts them) and runs its code file as ``[python, FLAGS...,
    CODE_PATH, ARGS...]``."""
    if not plan.layout.waiter:
        raise ValueError("the plan's fd layout has no waiter")
    if plan.code_path is None or plan.code_path not in plan.program[1:]:
        raise ValueError("only a plan that runs its code file can wait for it")
    flags = list(plan.program[1 : list(plan.program).index(plan.code_path)])
    return replace(
        plan,
        program=[plan.program[0], *flags, "-c", _waiter_text(), *map(str, plan.layout.waiter)],
        code=None,
        template=template,
    )


class WaiterEnds:
    """The host's ends of a warm sandbox's waiter fds: the go pipe (both ends: the read
    end kept here means writing the go byte never raises ``EPIPE``), the ready pipe's
    read end, the payload memfd.  ``sandbox_fds`` gives the sandbox's copies once."""

    def __init__(self, template: bytes) -> None:
        self._fds: list[int] = []
        self._said = b""
        #: ``said`` is called by a pool's keeper and by the call that takes the sandbox.
        self._reading = threading.Lock()
        try:
            self._go_read, self.go = self._pipe(1)
            self._ready, ready_write = self._pipe(0)
            self._sandbox_ready: int = ready_write
            self._payload = os.memfd_create("pysandbox-waiter", os.MFD_CLOEXEC)
            self._fds.append(self._payload)
            self.write(template)
        except OSError as exc:
            self.close()
            raise SandboxError(f"cannot make a warm sandbox's pipes: {exc.strerror}") from exc
        except BaseException:
            self.close()
            raise

    def _pipe(self, host_end: int) -> tuple[int, int]:
        """A pipe, both ends held here; only ``host_end`` (0: read, 1: write) is made
        non-blocking (an end shares its flags with every copy of it)."""
        ends = os.pipe2(os.O_CLOEXEC)
        self._fds += ends
        os.set_blocking(ends[host_end], False)
        return ends

    def sandbox_fds(self) -> list[int]:
        """New fds for the C core's ``pass_fds`` (the caller closes them once the
        sandbox has its own): the go pipe's read end, the ready pipe's write end (this
        object keeps none of it, so the sandbox's end is the last), the payload."""
        fds = [os.dup(self._go_read)]
        try:
            fds.append(self._sandbox_ready)
            self._fds.remove(self._sandbox_ready)
            self._sandbox_ready = -1
            fds.append(os.dup(self._payload))
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return fds

    def write(self, payload: bytes) -> None:
        """Make the payload memfd hold exactly ``payload``; ``OSError`` (no memory)."""
        os.ftruncate(self._payload, 0)
        view, at = memoryview(payload), 0
        while at < len(view):
            at += os.pwrite(self._payload, view[at:], at)

    def hand(self, payload: bytes) -> None:
        """``write`` at the hand-over: its ``OSError`` as a ``SandboxError``."""
        try:
            self.write(payload)
        except OSError as exc:
            raise SandboxError(f"cannot hand a warm sandbox its call: {exc.strerror}") from exc

    def said(self, wait: float = 0.0, cancel: CancelEvent | None = None) -> bytes:
        """What the waiter said on the ready pipe so far (at most ``READY_CAP`` bytes),
        waiting up to ``wait`` seconds for its first word, or until ``cancel`` is set
        (asked every 50 ms).  Thread-safe."""
        with self._reading:
            if self._ready not in self._fds:  # closed: its number may be another fd's
                return self._said
            return self._read_said(time.monotonic() + wait, cancel)

    def _read_said(self, deadline: float, cancel: CancelEvent | None) -> bytes:
        while len(self._said) < READY_CAP:
            try:
                chunk = os.read(self._ready, READY_CAP - len(self._said))
            except BlockingIOError:
                left = deadline - time.monotonic()
                if self._said or left <= 0 or (cancel is not None and cancel.is_set()):
                    break
                import select  # only where a call waits for a sandbox still starting

                select.select([self._ready], [], [], left if cancel is None else min(left, 0.05))
                continue
            if not chunk:
                break
            self._said += chunk
        return self._said

    def close(self) -> None:
        """Close every fd held here, once no ``said`` reads (it answers from what it
        kept after this).  Idempotent."""
        with self._reading:
            fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)
