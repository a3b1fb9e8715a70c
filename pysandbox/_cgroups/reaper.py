# SPDX-License-Identifier: MIT
"""``Reaper``: clean-up work done in a daemon thread after the call that needs it has
returned, so that no call waits for it.

Two kinds of work: items to remove, one job each, in the order given; and a sweep,
asked for by many and run once for however many asked while it waited.  The thread
starts with the first job, and again in a forked child, which forgets the parent's jobs
(what they would remove is the parent's).  ``drain`` waits until no job is left.  At
exit the jobs left run in the exiting thread, then ``at_exit``.  Where no thread can be
started (interpreter shutdown), a job runs at once in the caller's thread.  A job that
raises is dropped: clean-up never fails a call.

``_cgroup`` uses one to remove the directories of finished groups (whose processes are
already killed and counters read) and to sweep the groups of dead callers.
"""

from __future__ import annotations

import atexit
import collections
import os
import threading
from collections.abc import Callable

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Generic, TypeVar

    T = TypeVar("T")
else:
    #: ``Generic[T]`` at run time, where only subscripting it is needed: a command
    #: line's start-up does without ``typing``.
    T = None

    class Generic:
        """What ``Reaper[T]`` needs of ``typing.Generic``: subscripting, which gives the class."""

        def __class_getitem__(cls, _params: object) -> type:
            return cls


__all__ = ["Reaper"]


class Reaper(Generic[T]):
    """A daemon thread that removes items and runs a coalesced sweep.  Thread-safe;
    never raises from its jobs."""

    def __init__(
        self,
        *,
        name: str,
        remove: Callable[[T], None],
        forget: Callable[[T], None],
        sweep: Callable[[], None],
        at_exit: Callable[[], None],
        exit_seconds: float,
    ) -> None:
        """
        :param name: the thread's name.
        :param remove: removes one item (in the thread).
        :param forget: what a forked child does instead with an item of the parent's
            (close its descriptors, say).
        :param sweep: the sweep.
        :param at_exit: run at exit after the jobs left, and after waiting at most
            ``exit_seconds`` for the one the thread may be doing.
        """
        self._name = name
        self._remove = remove
        self._forget = forget
        self._sweep_once = sweep
        self._at_exit_hook = at_exit
        self._exit_seconds = exit_seconds
        self._ready = threading.Condition()
        self._removals: collections.deque[T] = collections.deque()
        self._sweep = False
        #: Jobs taken and not yet done (by the thread, or by ``_run_pending``).
        self._busy = 0
        self._thread: threading.Thread | None = None
        self._exit_registered = False
        os.register_at_fork(after_in_child=self._forget_all)

    def remove(self, item: T) -> None:
        """Remove ``item``, soon."""
        with self._ready:
            self._removals.append(item)
            started = self._wake()
        if not started:
            self._run_pending()

    def sweep(self) -> None:
        """Run the sweep soon (once for all the requests made meanwhile)."""
        with self._ready:
            self._sweep = True
            started = self._wake()
        if not started:
            self._run_pending()

    def pending(self) -> int:
        """How many jobs are handed over and not done yet."""
        with self._ready:
            return len(self._removals) + int(self._sweep) + self._busy

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every job handed over so far is done; False when ``timeout``
        seconds passed first."""
        with self._ready:
            return self._ready.wait_for(self._idle, timeout)

    def _idle(self) -> bool:
        return not (self._removals or self._sweep or self._busy)

    def _wake(self) -> bool:
        """With ``_ready`` held: notify the thread, started if need be; False when it
        cannot run."""
        if not self._exit_registered:
            atexit.register(self._at_exit)
            self._exit_registered = True
        if self._thread is None:
            thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
            try:
                thread.start()
            except RuntimeError:  # interpreter shutdown, or no thread to be had
                return False
            self._thread = thread
        self._ready.notify_all()
        return True

    def _next(self) -> tuple[list[T], bool]:
        """With ``_ready`` held: take the next job (an item to remove, or the sweep)."""
        if self._removals:
            return [self._removals.popleft()], False
        sweep, self._sweep = self._sweep, False
        return [], sweep

    def _serve(self) -> None:
        """The thread: the jobs one by one, as they come."""
        while True:
            with self._ready:
                self._ready.wait_for(lambda: bool(self._removals or self._sweep))
                items, sweep = self._next()
                self._busy += 1
            self._done(items, sweep)

    def _done(self, items: list[T], sweep: bool) -> None:
        """Do a job taken (counted in ``_busy``), then count it done."""
        try:
            for item in items:
                self._remove(item)
            if sweep:
                self._sweep_once()
        except Exception:
            pass  # clean-up only: what it left is retried by a later sweep or at exit
        finally:
            with self._ready:
                self._busy -= 1
                self._ready.notify_all()

    def _run_pending(self) -> None:
        """Run the jobs left in this thread (the thread may be working on one)."""
        while True:
            with self._ready:
                if not (self._removals or self._sweep):
                    return
                items, sweep = self._next()
                self._busy += 1
            self._done(items, sweep)

    def _at_exit(self) -> None:
        self._run_pending()
        self.drain(self._exit_seconds)
        self._at_exit_hook()

    def _forget_all(self) -> None:
        """In a forked child: the parent's jobs and thread are not this process's."""
        self._ready = threading.Condition()
        for item in self._removals:
            self._forget(item)
        self._removals.clear()
        self._sweep = False
        self._busy = 0
        self._thread = None
