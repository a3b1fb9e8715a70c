# SPDX-License-Identifier: MIT
"""The next run's group, made ahead: once a call's sandbox has ended, a daemon thread
makes a group in the same hierarchies, between that call and the next, so that the
next call finds its directories made and its descriptors open (about 0.4 ms of a fresh
call on cgroup v1) and only writes its own limits.

At most one group waits.  It is a group like any other (``SandboxCgroup.prepare``),
empty and without limits, its descriptors this process's; no process can be in it
before a call has set its limits (``limit_to``) and entered it.  A call that limits
other controllers makes its own, as without this module, and the waiting one is
discarded by the thread; a group is made ahead only when two calls in a row limited
the same controllers, so a single call (a command line's) makes nothing ahead.  A
forked child never takes its parent's (it closes its descriptors, as for any of the
parent's groups), ``drain`` discards it, and the one waiting at exit is removed then.
A failure to make one ahead is dropped: the call that comes makes its own and reports
what fails.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable

from .group import SandboxCgroup, check_limits
from .sweep import reaper

__all__ = ["ask", "drain", "group_for"]

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    #: A group's limits: its processes and its memory (None: not limited).
    GroupLimits = tuple[int | None, int | None]
    #: What a group made ahead must have to serve a call: which of those it limits.
    Kind = tuple[bool, bool]


def _kind(limits: GroupLimits) -> Kind:
    """Which controllers a group with ``limits`` limits: the hierarchies it is made in."""
    return (limits[0] is not None, limits[1] is not None)


#: How long ``drain`` and the exit wait for the thread's work in hand (one group made
#: or discarded: milliseconds).
_WORK_SECONDS = 5.0


class _Ahead:
    """The waiting group, and the thread that makes it and discards those no call will
    take.  Every decision about a group is made under ``_ready``; ``_busy`` counts the
    thread's work in hand, which ``forget``, the exit and a fork wait for."""

    def __init__(self) -> None:
        self._ready = threading.Condition()
        #: The group made ahead, and its kind.
        self._waiting: tuple[Kind, SandboxCgroup] | None = None
        #: The limits of the group to make, and how it settles.
        self._wanted: tuple[GroupLimits, Callable[[], bool]] | None = None
        #: The kind of the last call's group, and whether the call before had it too.
        self._last: Kind | None = None
        self._again = False
        #: Groups made ahead that no call will take, for the thread to discard.
        self._unwanted: list[SandboxCgroup] = []
        self._busy = 0
        self._generation = 0
        self._thread: threading.Thread | None = None
        self._closed = False
        atexit.register(self._close)
        os.register_at_fork(
            before=self._hold_for_fork,
            after_in_parent=lambda: self._ready.release(),
            after_in_child=self._forget_in_child,
        )

    def take(self, limits: GroupLimits) -> SandboxCgroup | None:
        """The waiting group, given ``limits`` (checked already), if it limits the same
        controllers; else None (the waiting one is discarded by the thread)."""
        kind = _kind(limits)
        with self._ready:
            waiting, self._waiting = self._waiting, None
            if waiting is not None and waiting[0] != kind:
                self._unwanted.append(waiting[1])
                self._wake()
                waiting = None
            self._again = waiting is not None or self._last == kind
            self._last = kind
        if waiting is None:
            return None
        waiting[1].limit_to(*limits)
        return waiting[1]

    def ask(self, limits: GroupLimits, settle: Callable[[], bool]) -> None:
        """Once a call's group has ended: have another group for ``limits`` made, when
        the call took one made ahead or the call before it limited the same controllers,
        and no group waits or is being made."""
        kind = _kind(limits)
        with self._ready:
            idle = self._waiting is None and self._wanted is None and not self._busy
            if self._again and self._last == kind and idle:
                self._wanted = (limits, settle)
                if not self._wake():
                    self._wanted = None

    def forget(self, timeout: float | None) -> bool:
        """Discard the waiting group and every other made ahead, once the thread's work
        in hand is done; False when that took more than ``timeout`` seconds (then the
        group being made is discarded by the thread when it is)."""
        with self._ready:
            self._generation += 1
            self._wanted = None
            self._last = None
            done = self._ready.wait_for(lambda: not self._busy, timeout)
            groups = self._all_groups()
        for group in groups:
            group.discard()
        return done

    def _all_groups(self) -> list[SandboxCgroup]:
        """With ``_ready`` held: take the waiting group and the unwanted ones."""
        groups, self._unwanted = self._unwanted, []
        if self._waiting is not None:
            groups.append(self._waiting[1])
        self._waiting = None
        return groups

    def _close(self) -> None:
        """At exit: make no more, and remove the groups made ahead at once."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()
            self._ready.wait_for(lambda: not self._busy, _WORK_SECONDS)
            groups = self._all_groups()
        for group in groups:
            group.discard(now=True)

    def _wake(self) -> bool:
        """With ``_ready`` held: notify the thread, started if need be; False when it
        cannot run (at exit, or no thread to be had)."""
        if self._closed:
            return False
        if self._thread is None:
            thread = threading.Thread(target=self._serve, name="pysandbox-cgroup-ahead")
            thread.daemon = True
            try:
                thread.start()
            except RuntimeError:
                return False
            self._thread = thread
        self._ready.notify_all()
        return True

    def _serve(self) -> None:
        """The thread: discard what no call will take, make the group wanted."""
        while True:
            with self._ready:
                self._ready.wait_for(lambda: bool(self._wanted or self._unwanted) or self._closed)
                if self._closed:
                    return
                unwanted, self._unwanted = self._unwanted, []
                wanted, self._wanted = self._wanted, None
                generation = self._generation
                self._busy += 1
            made = None
            try:
                for group in unwanted:
                    group.discard()
                if wanted is not None:
                    made = self._made(*wanted)
            finally:
                with self._ready:
                    self._busy -= 1
                    if made is not None and wanted is not None:
                        self._keep(made, _kind(wanted[0]), generation)
                    self._ready.notify_all()

    @staticmethod
    def _made(limits: GroupLimits, settle: Callable[[], bool]) -> SandboxCgroup | None:
        """A group for ``limits``, made without them; None when it cannot be (the next
        call makes its own, and says what fails)."""
        processes, memory = limits
        try:
            group = SandboxCgroup(
                processes=processes, memory=memory, remove_later=True, settle=settle
            )
            group.prepare(limits=False)
        except Exception:
            return None
        return group

    def _keep(self, group: SandboxCgroup, kind: Kind, generation: int) -> None:
        """With ``_ready`` held: leave ``group`` waiting, or among the unwanted when it
        is no longer wanted (``forget`` since, the exit, or a group already waits)."""
        if generation == self._generation and not self._closed and self._waiting is None:
            self._waiting = (kind, group)
        else:
            self._unwanted.append(group)

    def _hold_for_fork(self) -> None:
        """Before a fork: take ``_ready`` once the thread's work in hand is done, so that
        the child gets no lock of the cgroup layer taken by it (released after)."""
        self._ready.acquire()
        self._ready.wait_for(lambda: not self._busy, _WORK_SECONDS)

    def _forget_in_child(self) -> None:
        """In a forked child: the parent's groups and thread are not this process's."""
        groups = self._all_groups()
        self._ready = threading.Condition()
        for group in groups:
            group.discard()  # closes its descriptors only: the parent owns it
        self._wanted = None
        self._last = None
        self._busy = 0
        self._thread = None


_ahead = _Ahead()


def group_for(
    processes: int | None, memory: int | None, settle: Callable[[], bool]
) -> SandboxCgroup:
    """A group for one run with these limits, to be entered (``SandboxCgroup``'s
    arguments, removed later, settled with ``settle``): the one made ahead when it has
    them, else a new one; raises as ``SandboxCgroup`` does for a bad limit, before
    anything is taken.  Once the run's group has ended, ``ask`` for the next."""
    check_limits(processes, memory)
    waiting = _ahead.take((processes, memory))
    if waiting is not None:
        return waiting
    return SandboxCgroup(processes=processes, memory=memory, remove_later=True, settle=settle)


def ask(processes: int | None, memory: int | None, settle: Callable[[], bool]) -> None:
    """After a run whose group ``group_for`` gave and that entered it: have the next one
    made ahead (off the run's path: its sandbox has ended), when calls keep limiting
    these controllers."""
    _ahead.ask((processes, memory), settle)


def drain(timeout: float | None = None) -> bool:
    """Discard the groups made ahead, then wait until the groups this process has
    finished with are removed (or, if they could not be yet, left for the retry before
    the next group and at exit), and the sweep of dead callers' groups asked for so far
    has run; False when ``timeout`` seconds passed first (each wait gets it whole).
    Only tests and tools need it: the groups are removed soon anyway, and at exit."""
    forgotten = _ahead.forget(timeout)
    return reaper.drain(timeout) and forgotten
