# SPDX-License-Identifier: MIT
"""``Slots``: the concurrency cap of a ``Runner``, a semaphore that can be closed.

Every call of a ``Runner`` holds a ``Ticket`` from the moment it is accepted until its
sandbox is reaped.  The ticket waits for a free slot (in the caller's thread, or in the
thread that an async call already runs in, so the event loop never blocks), and carries
the ``stop`` event that ``Slots.close`` sets: the C core asks it every tick, kills the
sandbox and the call raises ``Cancelled``.  A call still waiting when ``close`` comes is
released with ``Cancelled`` too; a call made after ``close`` raises ``RuntimeError``.

Slots are taken in the order the tickets began to wait.  A Runner with ``short_slots``
keeps that many of its slots for *short* calls, those whose wall time is at most
``short_wall_time``: a short call takes a short slot when one is free, else a general
one; a long call only a general one.  A ticket takes a slot only when no ticket before
it in the queue could take one now, so a long ticket that finds only short slots free
is passed over (it waits), and the general slots still go in queue order: a short call
never takes a general slot a long call before it is waiting for, and long calls are not
starved.  A short slot is held by short calls alone, each for at most its wall time
plus its sandbox's start and reaping, which is what bounds a short call's wait
(``docs/services.rst``, *Short slots*).  Without short slots the queue is first come
first served.

A map's jobs run on threads of
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
import math
import threading
import time
from collections.abc import Iterator
from types import TracebackType

from .._model.cancel import CancelEvent, Cancelled

__all__ = ["Slots", "Ticket", "Turns", "check_short_slots", "place_in_line"]

#: Seconds between two looks at a caller's own cancel event while its call waits for a
#: slot: the C core's tick, so a cancel takes effect as fast waiting as running.
CANCEL_POLL = 0.05


def check_short_slots(
    short_slots: object, short_wall_time: object, size: int
) -> tuple[int, float | None]:
    """A Runner's ``short_slots`` (an int from 0, none, to ``size - 1``: a long call
    needs a slot too) and ``short_wall_time`` (seconds > 0, given exactly when
    ``short_slots`` is not 0), checked; the errors name the argument."""
    if isinstance(short_slots, bool) or not isinstance(short_slots, int):
        raise TypeError(f"short_slots must be an int, not {type(short_slots).__name__}")
    if short_slots < 0:
        raise ValueError(f"short_slots must be at least 0 (0: none), got {short_slots!r}")
    if short_slots >= size:
        raise ValueError(
            f"short_slots must be less than max_concurrent ({size}), got {short_slots!r}: "
            "long calls need at least one slot of their own"
        )
    if short_wall_time is None:
        if short_slots:
            raise ValueError("short_slots needs short_wall_time: which calls are short")
        return 0, None
    if isinstance(short_wall_time, bool) or not isinstance(short_wall_time, (int, float)):
        raise TypeError(
            f"short_wall_time must be a number of seconds or None, "
            f"not {type(short_wall_time).__name__}"
        )
    if not (math.isfinite(short_wall_time) and short_wall_time > 0):
        raise ValueError(f"short_wall_time must be > 0 and finite, got {short_wall_time!r}")
    if not short_slots:
        raise ValueError("short_wall_time needs short_slots >= 1: the slots kept for short calls")
    return int(short_slots), float(short_wall_time)


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
        #: The call may take a short slot (its wall time is at most ``short_wall_time``).
        self.short = False
        #: The slot held is a short one (meaningful while ``holds_slot``).
        self.in_short_slot = False

    def wait(self, cancel: CancelEvent | None = None, *, wall_time: float | None = None) -> float:
        """Block until a slot is free and take it; return the seconds waited.
        ``wall_time`` is the call's: one of at most ``short_wall_time`` may take a short
        slot.

        Raises ``Cancelled`` when the ``Slots`` close or ``cancel`` is set meanwhile:
        nothing ran.
        """
        return self._slots.acquire(self, cancel, wall_time)

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
    """At most ``size`` tickets hold a slot at once, ``short_slots`` of the slots only
    for tickets whose call's wall time is at most ``short_wall_time``; the others wait
    in a queue, in order.  Thread-safe."""

    def __init__(
        self, size: int, short_slots: int = 0, short_wall_time: float | None = None
    ) -> None:
        self.size = size
        self.short_slots = short_slots
        self.short_wall_time = short_wall_time
        self._condition = threading.Condition()
        #: Free general slots, and free short ones.
        self._free = size - short_slots
        self._free_short = short_slots
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
            return self.size - self._free - self._free_short

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

    def acquire(
        self, ticket: Ticket, cancel: CancelEvent | None, wall_time: float | None = None
    ) -> float:
        """``Ticket.wait``: join the queue (in the thread's ``place_in_line``, if it has
        one), then take a slot for ``ticket`` once one it may take is free and no ticket
        before it could take one; or raise ``Cancelled``, leaving the queue."""
        started = time.monotonic()
        ticket.short = (
            self.short_wall_time is not None
            and wall_time is not None
            and wall_time <= self.short_wall_time
        )
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
                    kind = self._turn(ticket)
                    if kind is not None:
                        self._queue.remove(ticket)
                        if kind == "short":
                            self._free_short -= 1
                        else:
                            self._free -= 1
                        ticket.in_short_slot = kind == "short"
                        ticket.holds_slot = True
                        return time.monotonic() - started
                    self._condition.wait(CANCEL_POLL if cancel is not None else None)
            finally:
                if not ticket.holds_slot:
                    self._queue.remove(ticket)
                # The next in the queue may take a slot that is still free.
                self._condition.notify_all()

    def _free_for(self, ticket: Ticket) -> str | None:
        """The kind of slot ``ticket`` would take now (the lock held): a short one first
        for a short ticket, else a general one; None when none it may take is free."""
        if ticket.short and self._free_short > 0:
            return "short"
        return "general" if self._free > 0 else None

    def _turn(self, ticket: Ticket) -> str | None:
        """The kind of slot ``ticket`` takes now, or None while it must wait (the lock
        held): a ticket before it in the queue that could take a slot goes first; one
        that could not (a long ticket when only short slots are free) is passed over.
        Without short slots: the head of the queue, when a slot is free."""
        for queued in self._queue:
            kind = self._free_for(queued)
            if queued is ticket or kind is not None:
                return kind if queued is ticket else None
        return None

    def leave(self, ticket: Ticket) -> None:
        """Give back ``ticket``'s slot, if it holds one, and forget it."""
        with self._condition:
            if ticket.holds_slot:
                ticket.holds_slot = False
                if ticket.in_short_slot:
                    self._free_short += 1
                else:
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
