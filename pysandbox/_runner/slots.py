# SPDX-License-Identifier: MIT
"""``Slots``: the concurrency cap of a ``Runner``, a semaphore that can be closed.

Every call of a ``Runner`` holds a ``Ticket`` from the moment it is accepted until its
sandbox is reaped.  The ticket waits for a free slot (in the caller's thread, or in the
thread that an async call already runs in, so the event loop never blocks), and carries
the ``stop`` event that ``Slots.close`` sets: the C core asks it every tick, kills the
sandbox and the call raises ``Cancelled``.  A call still waiting when ``close`` comes is
released with ``Cancelled`` too; a call made after ``close`` raises ``RuntimeError``.

Slots are given in the order the tickets began to wait.  A map's jobs run on threads of
their own, which reach ``wait`` in whatever order the scheduler lets them, so a map
hands each job thread a ``place_in_line``: the ticket made under it joins the queue only
once the job before it has joined (or ended without a ticket).  Without that a job read
later could take the slot of one read earlier, and jobs that wait for something could
hold every slot while the quick ones before them had not even started.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import threading
import time
from collections.abc import Iterator
from types import TracebackType

from .._model.cancel import CancelEvent, Cancelled

__all__ = ["Slots", "Ticket", "Turns", "place_in_line"]

#: Seconds between two looks at a caller's own cancel event while its call waits for a
#: slot: the C core's tick, so a cancel takes effect as fast waiting as running.
CANCEL_POLL = 0.05


class Turns:
    """The order in which a map's job threads may join the queue for a slot: place ``n``
    joins once every place before it has joined or left.  Thread-safe."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._next = 0
        self._done: set[int] = set()

    def wait_for(self, place: int) -> None:
        """Block until every place before ``place`` is done.  Each is done within its own
        job's planning (``done`` runs when it joins the queue or when its job ends), so
        this always returns."""
        with self._condition:
            while self._next < place:
                self._condition.wait()

    def done(self, place: int) -> None:
        """``place`` has joined the queue or will never join it; idempotent."""
        with self._condition:
            if place < self._next:
                return
            self._done.add(place)
            while self._next in self._done:
                self._done.remove(self._next)
                self._next += 1
            self._condition.notify_all()


class _Place:
    """A job thread's place in ``turns``, used by the first ticket that waits under it."""

    def __init__(self, turns: Turns, place: int) -> None:
        self.turns = turns
        self.place = place


_PLACE: contextvars.ContextVar[_Place | None] = contextvars.ContextVar(
    "pysandbox_place_in_line", default=None
)


@contextlib.contextmanager
def place_in_line(turns: Turns, place: int) -> Iterator[None]:
    """Within the block, the calling thread's next ticket joins the slots' queue in its
    place: after those of every place before it.  Leaving the block gives the place up
    whether or not a ticket used it, so the places after it never wait for it in vain."""
    token = _PLACE.set(_Place(turns, place))
    try:
        yield
    finally:
        _PLACE.reset(token)
        turns.done(place)


class Ticket:
    """One accepted call of a ``Runner``: a context manager that gives its slot back, if
    it got one, and leaves the ``Slots`` on exit."""

    def __init__(self, slots: Slots) -> None:
        self._slots = slots
        #: Set by ``Slots.close``: the call must end (the C core kills its sandbox).
        self.stop = threading.Event()
        self.thread = threading.get_ident()
        self.holds_slot = False

    def wait(self, cancel: CancelEvent | None = None) -> float:
        """Block until a slot is free and take it; return the seconds waited.

        Raises ``Cancelled`` when the ``Slots`` close or ``cancel`` is set meanwhile:
        nothing ran.
        """
        return self._slots.acquire(self, cancel)

    def __enter__(self) -> Ticket:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._slots.leave(self)


class Slots:
    """At most ``size`` tickets hold a slot at once; the others wait in a queue, first
    come first served.  Thread-safe."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._condition = threading.Condition()
        self._free = size
        self._closed = False
        self._tickets: set[Ticket] = set()
        self._queue: collections.deque[Ticket] = collections.deque()

    @property
    def closed(self) -> bool:
        """``close`` was called."""
        return self._closed

    @property
    def running(self) -> int:
        """Tickets that hold a slot now."""
        with self._condition:
            return self.size - self._free

    @property
    def waiting(self) -> int:
        """Tickets that wait for a slot or are being checked before they wait."""
        with self._condition:
            return sum(not ticket.holds_slot for ticket in self._tickets)

    def ticket(self) -> Ticket:
        """A ticket for a new call; ``RuntimeError`` once the slots are closed."""
        with self._condition:
            if self._closed:
                raise RuntimeError("the Runner is closed: make a new Runner to run more")
            made = Ticket(self)
            self._tickets.add(made)
            return made

    def acquire(self, ticket: Ticket, cancel: CancelEvent | None) -> float:
        """``Ticket.wait``: join the queue (in the thread's ``place_in_line``, if it has
        one), then take a slot for ``ticket`` once it heads the queue and one is free;
        or raise ``Cancelled``, leaving the queue."""
        started = time.monotonic()
        place = _PLACE.get()
        if place is not None:
            _PLACE.set(None)
            place.turns.wait_for(place.place)
        try:
            with self._condition:
                self._queue.append(ticket)
        finally:
            if place is not None:
                place.turns.done(place.place)
        with self._condition:
            try:
                while True:
                    if ticket.stop.is_set():
                        raise Cancelled("the Runner was closed while the call waited for a slot")
                    if cancel is not None and cancel.is_set():
                        raise Cancelled("the run was cancelled while it waited for a slot")
                    if self._free > 0 and self._queue[0] is ticket:
                        self._queue.popleft()
                        self._free -= 1
                        ticket.holds_slot = True
                        return time.monotonic() - started
                    self._condition.wait(CANCEL_POLL if cancel is not None else None)
            finally:
                if not ticket.holds_slot:
                    self._queue.remove(ticket)
                # The next in the queue may take a slot that is still free.
                self._condition.notify_all()

    def leave(self, ticket: Ticket) -> None:
        """Give back ``ticket``'s slot, if it holds one, and forget it."""
        with self._condition:
            if ticket.holds_slot:
                ticket.holds_slot = False
                self._free += 1
            self._tickets.discard(ticket)
            self._condition.notify_all()

    def close(self) -> None:
        """Refuse new tickets, stop every call, and wait until each has left, but for those
        of the calling thread (a callback of a run that closes its own ``Runner``).
        Idempotent."""
        with self._condition:
            self._closed = True
            for ticket in self._tickets:
                ticket.stop.set()
            self._condition.notify_all()
            me = threading.get_ident()
            while any(ticket.thread != me for ticket in self._tickets):
                self._condition.wait()
