# SPDX-License-Identifier: MIT
"""The Runner's sessions: the cap on live ones and its evictions (``SessionBook``), and
warm sessions started ahead of need (``WarmSessions``).

A session a Runner makes is a ``HeldSession``: a ``Session`` that tells its book when a
call begins and ends, so the book knows which sessions are running a call and which has
been idle the longest.  The book counts the live sessions; one that ended (closed, lost,
its idle timeout or lifetime passed) leaves the count as soon as anyone looks.  A new
session is started first and admitted after: at the cap, the admission closes the
session idle the longest (its next call raises ``SandboxError`` saying it was evicted),
or, when every live session is running a call, closes the new one and raises.  So a
session that cannot start (a bad argument, a host fault) never evicts another, and the
cap is passed only by the one session starting, for the ~60 ms of its start.

``WarmSessions`` keeps up to ``size`` sessions of one kind (the Runner's defaults)
started by a keeper thread; each is handed out once, and the keeper starts its
replacement at once.  A session's clocks (its lifetime, its idle timeout) run from its
start, so a warm one is retired after ``max_age`` of waiting.  The keeper thread only
starts and closes sessions: each session's sandbox is held by a thread of its own.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from .._api.session import DEFAULT_CPU_BUDGET, DEFAULT_IDLE_TIMEOUT, DEFAULT_LIFETIME, Session
from .._model.errors import SandboxError
from .._model.session_result import CellResult
from .warm import KeptPool

__all__ = [
    "SESSION_DEFAULTS",
    "HeldSession",
    "SessionBook",
    "WarmSessions",
    "check_count",
    "open_session",
]

#: ``Session``'s own defaults for the clocks a Runner does not set (a test keeps them
#: equal): a Runner's warm sessions are made with them.
SESSION_DEFAULTS: dict[str, float] = {
    "lifetime": DEFAULT_LIFETIME,
    "idle_timeout": DEFAULT_IDLE_TIMEOUT,
    "cpu_budget": DEFAULT_CPU_BUDGET,
}
#: The longest a warm session waits before it is retired and replaced, in seconds.
WARM_MAX_AGE = 60.0
#: The longest the keeper waits after failed starts before it tries again, in seconds.
_MAX_RETRY_SECONDS = 30.0


def check_count(value: object, name: str, least: int) -> int:
    """``value`` as an int >= ``least``, or a ``TypeError``/``ValueError`` naming
    ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < least:
        raise ValueError(f"{name} must be at least {least}, got {value!r}")
    return int(value)


class HeldSession(Session):
    """A ``Session`` counted in a Runner's ``SessionBook``: its calls tell the book when
    they begin and end, and a session the book evicted refuses its next call."""

    def __init__(self, book: SessionBook, **options: Any) -> None:
        self._book = book
        self._calls = 0
        self._last_used = time.monotonic()
        self._evicted = False
        super().__init__(**options)

    def run(self, code: str, **options: Any) -> CellResult:
        """``Session.run``, counted by the Runner: while it runs (or waits for another
        call of this session) the session is never evicted.

        :raises SandboxError: also when the Runner evicted this session to make room for
            a new one (``max_sessions``).
        """
        self._book.begin(self)
        try:
            return super().run(code, **options)
        finally:
            self._book.end(self)

    def close(self) -> None:
        """``Session.close``; the session's place in the Runner is free at once."""
        super().close()
        self._book.forget(self)


class SessionBook:
    """The live sessions of one Runner, at most ``size``.  Thread-safe."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._live: list[HeldSession] = []
        self._closed = False

    @property
    def live(self) -> int:
        """Sessions admitted and not ended."""
        with self._lock:
            ended = self._prune()
        _close_all(ended)
        return len(self._live)

    def check_room(self) -> None:
        """Raise ``SandboxError`` now if a new session could not be admitted (every
        live session is running a call at the cap), before one is started in vain."""
        with self._lock:
            ended = self._prune()
            full = len(self._live) >= self.size and self._idlest() is None
        _close_all(ended)
        if full:
            raise self._full()

    def admit(self, session: HeldSession) -> None:
        """Count ``session``, evicting the sessions idle the longest to stay within the
        cap; when every live session is running a call, close ``session`` and raise
        ``SandboxError``.  A closed book closes it and raises ``RuntimeError``."""
        evicted: list[HeldSession] = []
        with self._lock:
            ended = self._prune()
            refusal: Exception | None = None
            if self._closed:
                refusal = RuntimeError("the Runner is closed: make a new Runner to run more")
            while refusal is None and len(self._live) >= self.size:
                victim = self._idlest()
                if victim is None:
                    refusal = self._full()
                else:
                    victim._evicted = True
                    self._live.remove(victim)
                    evicted.append(victim)
            if refusal is None:
                session._last_used = time.monotonic()
                self._live.append(session)
        _close_all(ended + evicted + ([] if refusal is None else [session]))
        if refusal is not None:
            raise refusal

    def begin(self, session: HeldSession) -> None:
        """A call of ``session`` begins (it may wait for one running): refuse it if the
        session was evicted, else count it as running a call."""
        with self._lock:
            if session._evicted:
                raise SandboxError(
                    f"the session was evicted to respect max_sessions={self.size}: the "
                    "Runner needed its place for a new session, and it had been idle the "
                    "longest"
                )
            session._calls += 1

    def end(self, session: HeldSession) -> None:
        """A call of ``session`` has returned: it is idle from now on."""
        with self._lock:
            session._calls -= 1
            session._last_used = time.monotonic()

    def forget(self, session: HeldSession) -> None:
        """``session`` was closed: its place is free."""
        with self._lock:
            if session in self._live:
                self._live.remove(session)

    def close(self) -> None:
        """Close every live session (a running call ends ``lost``) and admit no more;
        returns once they are gone.  Idempotent."""
        with self._lock:
            self._closed = True
            sessions, self._live = self._live, []
        _close_all(sessions)

    def _prune(self) -> list[HeldSession]:
        """Take out (the lock held) the sessions that ended, to be closed outside it."""
        ended = [session for session in self._live if not session.alive]
        self._live = [session for session in self._live if session.alive]
        return ended

    def _idlest(self) -> HeldSession | None:
        """The live session running no call whose last call ended first (the lock
        held), or None when every one is running a call."""
        idle = [session for session in self._live if session._calls == 0]
        return min(idle, key=lambda session: session._last_used, default=None)

    def _full(self) -> SandboxError:
        return SandboxError(
            f"max_sessions={self.size} sessions are live and every one is running a "
            "call: wait for a call to end, close a session, or raise max_sessions"
        )


def _close_all(sessions: list[HeldSession]) -> None:
    """Close each of ``sessions`` (each returns once its sandbox is reaped)."""
    for session in sessions:
        session.close()


def open_session(
    book: SessionBook,
    warm: WarmSessions | None,
    options: dict[str, Any],
    files: object,
) -> HeldSession:
    """A session with ``options`` (``Session``'s keywords but ``files``) admitted in
    ``book``: a warm one when ``warm`` keeps sessions of exactly these options and
    ``files`` gives none, else a fresh one (whose start checks every argument)."""
    book.check_room()
    session = None
    if warm is not None and not files and options == warm.options:
        session = warm.take()
        if session is not None:
            session.touch()  # its idle timeout counts from the hand-over
    if session is None:
        session = HeldSession(book, files=files, **options)
    book.admit(session)
    return session


class WarmSessions(KeptPool[tuple[float, HeldSession]]):
    """Up to ``size`` sessions of ``options`` (``Session``'s keywords) counted in
    ``book`` once handed out, started ahead of need by a keeper thread, each handed out
    once.  Thread-safe."""

    def __init__(self, size: int, book: SessionBook, options: dict[str, Any]) -> None:
        super().__init__(size, "pysandbox-warm-sessions")
        self.options = options
        lifetime, idle = float(options["lifetime"]), float(options["idle_timeout"])
        #: The longest a session waits here: its clocks run while it waits.
        self.max_age = min(WARM_MAX_AGE, lifetime / 10, idle / 2)
        self._book = book
        #: Failed starts in a row (the keeper waits longer after each).
        self._failures = 0
        #: Sessions ``take`` found unfit, for the keeper to close.
        self._retired: list[HeldSession] = []
        self._keeper.start()

    @property
    def ready(self) -> int:
        """Warm sessions waiting to be handed out now."""
        with self._lock:
            return sum(session.alive for _, session in self._ready)

    def take(self) -> HeldSession | None:
        """The warm session that has waited the longest, alive and younger than
        ``max_age``, or None; the keeper starts its replacement."""
        with self._lock:
            now = time.monotonic()
            while self._ready and not self._closed:
                started, session = self._ready.pop(0)
                self._lock.notify_all()
                if session.alive and now - started < self.max_age:
                    self._taken += 1
                    return session
                self._retired.append(session)  # closing waits for the reaping: the keeper's
        return None

    def _keep(self) -> None:
        """The keeper thread: retire, then refill one at a time, until closed; then
        close every waiting session."""
        while True:
            with self._lock:
                if self._closed:
                    leftover = [session for _, session in self._ready] + self._retired
                    self._ready, self._retired = [], []
                    break
                stale = self._stale()
                wanted = len(self._ready) < self.size
            _close_all(stale)
            if stale:
                continue
            if wanted:
                self._start_one()
                continue
            with self._lock:
                if not self._closed and not self._retired:
                    self._lock.wait(self._next_expiry())
        _close_all(leftover)

    def _stale(self) -> list[HeldSession]:
        """Take out (the lock held) the sessions to close: too old, ended, or retired
        by ``take``."""
        now = time.monotonic()
        fresh: list[tuple[float, HeldSession]] = []
        stale, self._retired = self._retired, []
        for started, session in self._ready:
            if session.alive and now - started < self.max_age:
                fresh.append((started, session))
            else:
                stale.append(session)
        self._ready = fresh
        return stale

    def _next_expiry(self) -> float:
        """Seconds until the oldest waiting session must be retired (the lock held)."""
        if not self._ready:
            return self.max_age
        return max(0.01, self._ready[0][0] + self.max_age - time.monotonic())

    def _start_one(self) -> None:
        """Start one session and add it to the pool; after a failure, wait before the
        next try, longer after each failure in a row (a host that cannot start one:
        ``Runner.session`` then starts fresh ones, which report what fails)."""
        started = time.monotonic()
        try:
            session = HeldSession(self._book, **self.options)
        except Exception:
            with self._lock:
                self._failures += 1
                self._lock.wait(min(_MAX_RETRY_SECONDS, 2.0**self._failures))
            return
        with self._lock:
            self._started += 1
            self._failures = 0
            closing = self._closed
            if not closing:
                self._ready.append((started, session))
        if closing:
            session.close()
