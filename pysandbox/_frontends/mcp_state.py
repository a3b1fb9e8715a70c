# SPDX-License-Identifier: MIT
"""What ``pysandbox mcp`` keeps and decides, without the protocol's SDK: its options, the
limits a tool call may ask for, its live sessions by id (each with the files its calls
returned), and how a call's output reads as text.

A tool call may only tighten the server's limits: a larger one is refused with a
``ValueError`` that names the server's limit (never clamped silently, so the agent
learns what it may ask for).  Sessions are named by ``secrets.token_urlsafe`` ids,
counted against ``ServerOptions.max_sessions`` (the ones starting included), and expire
after ``idle_timeout`` seconds without a call; a session that ended leaves a short note
(why) for its id, so the agent is told, not just "unknown".  Everything from a sandbox
is hostile: the files of a session are kept within ``Limits.files_out`` bytes in all
(the oldest dropped first), and text is shown with its control characters escaped.
"""

from __future__ import annotations

import math
import secrets
import threading
import time
from collections.abc import Mapping

from .._api.session import Session
from .._model.escape import escape_controls
from .._model.limits import Limits
from .._model.record import record, replace
from .._model.units import parse_seconds, parse_size
from .._model.verdict import size_text

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_SESSIONS",
    "FileStore",
    "LiveSession",
    "ServerOptions",
    "SessionTable",
    "asked_limits",
    "capped_text",
    "file_text",
]

#: The server's defaults: live sessions at once, and seconds without a call before a
#: session is closed.
DEFAULT_MAX_SESSIONS = 8
DEFAULT_IDLE_TIMEOUT = 600.0
#: How many ended sessions' notes are kept (the oldest forgotten first).
ENDED_NOTES = 256


@record
class ServerOptions:
    """The server's options: the largest limits a call may have (and its defaults), the
    sessions' cap and idle timeout, what every sandbox gets (``env``, ``readable``), and
    how many sandboxes are kept started ahead for fresh runs."""

    limits: Limits
    max_sessions: int = DEFAULT_MAX_SESSIONS
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    warm_sessions: int = 1
    max_fresh: int = 4
    env: Mapping[str, str] | None = None
    readable: tuple[str, ...] = ()


def _seconds(value: float | str, name: str, most: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{name} must be a number of seconds or a string like '2s'")
    seconds = parse_seconds(value) if isinstance(value, str) else float(value)
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"{name} must be more than 0 seconds, got {value!r}")
    if seconds > most:
        raise ValueError(
            f"{name} {value!r} is more than this server allows ({most:g} s); ask for at most that"
        )
    return seconds


def _bytes(value: int | str, name: str, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"{name} must be a number of bytes or a string like '512M'")
    size = parse_size(value) if isinstance(value, str) else value
    if size <= 0:
        raise ValueError(f"{name} must be more than 0 bytes, got {value!r}")
    if size > most:
        raise ValueError(
            f"{name} {value!r} is more than this server allows ({size_text(most)}); "
            "ask for at most that"
        )
    return size


def asked_limits(
    server: Limits,
    wall_time: float | str | None = None,
    cpu_time: float | str | None = None,
    memory: int | str | None = None,
) -> Limits:
    """``server`` with the limits a tool call asked for, each at most the server's.

    :raises ValueError: a value that is no limit, or more than the server's."""
    changes: dict[str, object] = {}
    if wall_time is not None:
        changes["wall_time"] = _seconds(wall_time, "wall_time", server.wall_time)
    if cpu_time is not None:
        changes["cpu_time"] = _seconds(cpu_time, "cpu_time", server.cpu_time)
    if memory is not None:
        changes["memory"] = _bytes(memory, "memory", server.memory)
    return replace(server, **changes) if changes else server


def capped_text(data: bytes | str, most: int) -> str:
    """Output of the sandbox as text for an agent: decoded (bad UTF-8 replaced), its
    control characters but newline and tab escaped, at most ``most`` characters (a note
    says what was cut)."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    if len(text) > most:
        text = text[:most] + f"\n[... {len(text) - most} more characters not shown]"
    return escape_controls(text)


def file_text(data: bytes) -> str | None:
    """A file's content as text when it is UTF-8 with no control character but tab,
    newline and carriage return; None for anything else (returned as bytes)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if escape_controls(text.replace("\r", "")) != text.replace("\r", ""):
        return None
    return text


class FileStore:
    """The latest version of each file a session's calls returned, at most ``most``
    bytes in all: past them the file updated the longest ago is dropped."""

    def __init__(self, most: int) -> None:
        self.most = most
        #: Path to content, the least recently updated first.
        self._files: dict[str, bytes] = {}
        self._size = 0
        #: How many files were dropped to stay within ``most``.
        self.dropped = 0

    def update(self, files: Mapping[str, bytes]) -> None:
        for path, data in files.items():
            old = self._files.pop(path, None)
            if old is not None:
                self._size -= len(old)
            self._files[path] = data
            self._size += len(data)
        while self._size > self.most and self._files:
            oldest = next(iter(self._files))
            self._size -= len(self._files.pop(oldest))
            self.dropped += 1

    def listing(self) -> list[tuple[str, int]]:
        """Each file's path and size, by path."""
        return sorted((path, len(data)) for path, data in self._files.items())

    def read(self, path: str) -> bytes:
        """:raises KeyError: no such file was returned (or it was dropped)."""
        return self._files[path]


class LiveSession:
    """One session of the server: the ``Session``, its limits, the files its calls
    returned, and when it was last used (or is in use)."""

    def __init__(self, session_id: str, session: Session, limits: Limits) -> None:
        self.session_id = session_id
        self.session = session
        self.limits = limits
        self.files = FileStore(limits.files_out)
        self.calls = 0
        self.last_used = time.monotonic()


class SessionTable:
    """The live sessions by id, at most ``most`` of them (starting ones included),
    each closed after ``idle_timeout`` seconds without a call.  Thread-safe."""

    def __init__(self, most: int, idle_timeout: float) -> None:
        self.most = most
        self.idle_timeout = idle_timeout
        self._lock = threading.Lock()
        self._live: dict[str, LiveSession] = {}
        self._starting = 0
        #: Why each recently ended session ended, by id.
        self._ended: dict[str, str] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._live)

    def reserve(self) -> None:
        """Count a session about to start; ``ValueError`` at the cap."""
        with self._lock:
            if len(self._live) + self._starting >= self.most:
                raise ValueError(
                    f"this server already has {self.most} live sessions (its limit): "
                    "close one with close_session, or use run_python for a fresh run"
                )
            self._starting += 1

    def unreserve(self) -> None:
        with self._lock:
            self._starting -= 1

    def add(self, session: Session, limits: Limits) -> LiveSession:
        """The reserved session, given a new unguessable id."""
        with self._lock:
            self._starting -= 1
            session_id = secrets.token_urlsafe(16)
            live = LiveSession(session_id, session, limits)
            self._live[session_id] = live
            return live

    def get(self, session_id: str) -> LiveSession:
        """The live session ``session_id``; ``ValueError`` saying why when there is none
        (it ended, or never was).  A session that ended by itself is forgotten here."""
        with self._lock:
            live = self._live.get(session_id)
            if live is not None and not live.session.alive:
                self._forget(session_id, "it was lost (its sandbox ended)")
                live = None
            if live is not None:
                return live
            why = self._ended.get(session_id, "")
        if why:
            raise ValueError(f"session {session_id!r} has ended: {why}; create a new one")
        raise ValueError(f"no session has the id {session_id!r}")

    def pop(self, session_id: str, why: str) -> LiveSession:
        """Take ``session_id`` out (the caller closes it); ``ValueError`` as ``get``."""
        live = self.get(session_id)
        with self._lock:
            self._forget(session_id, why)
        return live

    def discard(self, session_id: str, why: str) -> None:
        """Take ``session_id`` out if it is still in (closing it is the caller's)."""
        with self._lock:
            if session_id in self._live:
                self._forget(session_id, why)

    def _forget(self, session_id: str, why: str) -> None:
        """Take ``session_id`` out of the live ones, its note kept (the lock held)."""
        self._live.pop(session_id, None)
        self._ended[session_id] = why
        while len(self._ended) > ENDED_NOTES:
            del self._ended[next(iter(self._ended))]

    def expired(self) -> list[LiveSession]:
        """Take out the sessions idle for ``idle_timeout`` (running no call), for the
        caller to close."""
        now = time.monotonic()
        why = f"no call for {self.idle_timeout:g} s (the server's idle timeout)"
        with self._lock:
            idle = [
                live
                for live in self._live.values()
                if not live.calls and now - live.last_used >= self.idle_timeout
            ]
            for live in idle:
                self._forget(live.session_id, why)
        return idle

    def take_all(self) -> list[LiveSession]:
        """Take out every session, for the caller to close (the server is ending)."""
        with self._lock:
            taken = list(self._live.values())
            for live in taken:
                self._forget(live.session_id, "the server ended")
        return taken
