# SPDX-License-Identifier: MIT
"""Warm sandboxes: single-use sandboxes started ahead of need, their interpreter waiting.

A ``WarmPool`` keeps up to ``size`` sandboxes, in all, of the kinds of warm plan its
calls have (``warm_form``; ``Plan.start_key``), started with ``_launch.start(plan)``:
bwrap has built the sandbox, the init runs, and the interpreter runs the waiter
(``_launch/waiter.py``), which waits, as long as it takes, for a call.  A call whose warm
plan has the key of a waiting sandbox takes it (``take``), hands it its code, arguments,
files and environment (``Handover``) and runs it to its end, as a fresh one would; each
sandbox runs one call and is gone.  A call that finds none starts a fresh sandbox, as
without a pool.

Each call asks for one sandbox of its kind to be started once it has returned
(``served``): the one it took is replaced, or the next call of a kind it missed finds
one.  So calls that alternate between kinds find theirs waiting, and the pool never
starts more sandboxes than its size plus the calls it served.  A pool that is full
makes room by retiring a sandbox of the kind whose last call is the oldest; the
requests wait in order, at most ``size`` of them (the oldest are dropped).

A keeper thread starts the sandboxes one at a time, after a call has returned, never
while it runs, so the start-up does not compete with the call for the CPU.  A waiting
sandbox is never retired for its age: an idle pool starts nothing.  The keeper replaces
any that ended by itself (it looks every ``_CHECK_SECONDS``), by one of its kind if a
call of that kind came since it started, else by one of the kind called last; a kind
whose sandboxes failed to start three times in a row is not warmed any more (its calls
start fresh sandboxes, which report what fails).  ``close`` kills and reaps every
waiting sandbox and stops the thread.  A sandbox waiting here dies with this process
like any other (its lifeline).
"""

from __future__ import annotations

import collections
import dataclasses
import os
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .._launch.launcher import Launched, start
from .._launch.plan import Plan
from .._launch.waiter import Handover
from .._model.cancel import CancelEvent
from .._model.errors import SandboxError
from .._model.escape import escape_report

if TYPE_CHECKING:
    from .._launch.copier import Copier

__all__ = ["KeptPool", "WarmPool"]

#: How long the keeper waits after a failed start before it tries again.
_RETRY_SECONDS = 1.0
#: How often the keeper looks for waiting sandboxes that ended by themselves.
_CHECK_SECONDS = 5.0
#: The longest the keeper waits for a sandbox it started to be ready before it starts
#: the next (a template's set-up that takes longer overlaps the next start-up).
_SETTLE_SECONDS = 60.0

_Item = TypeVar("_Item")

_pools: weakref.WeakSet[KeptPool[Any]] = weakref.WeakSet()


def _forget_after_fork() -> None:
    """In a child made by ``fork``: the pools' sandboxes are the parent's, not ours."""
    for pool in list(_pools):
        pool._forked()


os.register_at_fork(after_in_child=_forget_after_fork)


def _set_up_failure(said: bytes) -> SandboxError:
    """The error of a template sandbox whose set-up failed (``X`` and the traceback) or
    did not finish, as a warm sandbox's hand-over raises it."""
    if said.startswith(b"X"):
        shown = escape_report(said[1:].decode("utf-8", "replace")).rstrip()
        return SandboxError("the template's set-up failed in the sandbox:\n" + shown)
    return SandboxError(f"the template's set-up did not finish within {_SETTLE_SECONDS:g} s")


def template_of(plan: Plan) -> Plan:
    """A warm ``plan`` without what belongs to one call: the plan a warm sandbox is
    started for."""
    return dataclasses.replace(
        plan,
        code=None,
        stdin=b"",
        stdin_callback=None,
        on_stdout=None,
        on_stderr=None,
        cancel=None,
    )


class KeptPool(Generic[_Item]):
    """What a pool that a keeper thread fills has: up to ``size`` items ready, a lock
    (a condition the keeper waits on), the counts of started and taken items, the
    keeper's stop, and the fork safety.  A subclass writes ``_keep``, the keeper's loop,
    which ends once ``_closed`` is set by closing every item it holds, and starts
    ``_keeper`` when it is ready."""

    def __init__(self, size: int, name: str) -> None:
        self.size = size
        self._lock = threading.Condition()
        self._ready: list[_Item] = []
        self._closed = False
        self._started = 0
        self._taken = 0
        self._pid = os.getpid()
        _pools.add(self)
        self._keeper = threading.Thread(target=self._keep, name=name, daemon=True)

    @property
    def started(self) -> int:
        """Items this pool has started so far (a gauge for tests and metrics)."""
        with self._lock:
            return self._started

    @property
    def taken(self) -> int:
        """Items this pool has handed out so far."""
        with self._lock:
            return self._taken

    def close(self) -> None:
        """Stop refilling; the keeper closes every waiting item, and this returns once
        they are gone.  Idempotent."""
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        if self._pid == os.getpid() and self._keeper is not threading.current_thread():
            self._keeper.join()

    def _forked(self) -> None:
        """Drop, without touching them, the items a forked child inherited."""
        self._closed = True
        self._ready = []
        self._lock = threading.Condition()

    def _keep(self) -> None:
        raise NotImplementedError


class WarmPool(KeptPool[tuple[tuple[object, ...], Launched]]):
    """Up to ``size`` warm sandboxes of the kinds its calls have.  Thread-safe.

    Close it only once no taken sandbox runs (``Runner.close`` first ends the calls):
    the keeper thread, which started every sandbox of the pool, exits then, and bwrap's
    ``--die-with-parent`` follows the thread that started it.  ``plan``: the warm plan
    of the kind to start first.
    """

    def __init__(self, size: int, plan: Plan) -> None:
        if not plan.layout.waiter:
            raise ValueError("only a warm plan (waiting_plan) can be warmed")
        super().__init__(size, "pysandbox-warm")
        template = template_of(plan)
        #: The kind of the last call served (of ``plan`` before any).
        self._key = template.start_key()
        #: Sandboxes to start, oldest first: ``(key, template)``.
        self._requests: collections.deque[tuple[tuple[object, ...], Plan]] = collections.deque(
            [(self._key, template)] * size, maxlen=size
        )
        #: Each kind's plan to start, when a call of it last came, and its failed starts
        #: in a row.
        self._templates: dict[tuple[object, ...], Plan] = {self._key: template}
        self._last_call: dict[tuple[object, ...], float] = {self._key: time.monotonic()}
        self._kind_failures: dict[tuple[object, ...], int] = {}
        #: The template sandbox of each kind whose sandboxes are its copies
        #: (``Plan.copies``), started and ended by the keeper thread only, and what
        #: the set-up of a kind's last one that failed said.
        self._copiers: dict[tuple[object, ...], Copier] = {}
        self._copy_failures: dict[tuple[object, ...], SandboxError] = {}
        #: Template sandboxes of kinds forgotten, ended once their copies have.
        self._retiring: list[Copier] = []
        self._keeper.start()

    @property
    def ready(self) -> int:
        """Sandboxes of the kind last served whose interpreter waits for its code now."""
        with self._lock:
            return sum(key == self._key and launched.waiting() for key, launched in self._ready)

    def take(
        self,
        plan: Plan,
        code: bytes,
        handover: Handover,
        until: float,
        within: float,
        cancel: CancelEvent | None = None,
    ) -> Launched | None:
        """A sandbox of the warm ``plan``'s kind, already handed ``code`` and
        ``handover``, or None (none there, none usable).  One whose waiter is ready is
        taken first; one still starting is waited for until ``until`` (a
        ``time.monotonic()`` value; ``within`` seconds from the call's start, for the
        message), or until ``cancel`` is set (``Cancelled``).  The caller runs it with
        ``finish`` and the call's own plan."""
        key = plan.start_key()
        while True:
            with self._lock:
                if self._closed:
                    return None
                mine = [i for i, (k, _) in enumerate(self._ready) if k == key]
                if not mine:
                    return None
                index = next((i for i in mine if self._ready[i][1].waiting()), mine[0])
                _, launched = self._ready.pop(index)
            try:
                launched.hand_over(code, handover, until, within, cancel)
            except SandboxError:
                launched.close()
                with self._lock:
                    self._kind_failures[key] = self._kind_failures.get(key, 0) + 1
                continue
            except BaseException:
                launched.close()
                raise
            with self._lock:
                self._taken += 1
                self._kind_failures[key] = 0
            return launched

    def served(self, plan: Plan) -> None:
        """A call of the warm ``plan``'s kind has returned: ask for one sandbox of that
        kind."""
        template = template_of(plan)
        key = template.start_key()
        with self._lock:
            self._key = key
            self._templates[key] = template
            self._last_call[key] = time.monotonic()
            self._requests.append((key, template))
            self._forget_old_kinds()
            self._lock.notify_all()

    def _forget_old_kinds(self) -> None:
        """Keep what the pool knows of kinds bounded (the lock held): past ``4 * size +
        4`` kinds, those whose last call is the oldest and that nothing waits for or
        asks for are forgotten."""
        bound = 4 * self.size + 4
        if len(self._last_call) <= bound:
            return
        held = {key for key, _ in self._ready} | {key for key, _ in self._requests}
        for key in sorted(self._last_call, key=self._last_call.__getitem__):
            if len(self._last_call) <= bound:
                break
            if key not in held:
                del self._last_call[key]
                self._templates.pop(key, None)
                self._kind_failures.pop(key, None)

    def _keep(self) -> None:
        """The keeper thread: retire, then start what is asked for one at a time, until
        closed; then close every waiting sandbox.  The sandboxes are started here, and
        this thread outlives them: bwrap's ``--die-with-parent`` would kill a sandbox
        whose starting thread ended, before its init is reaped."""
        while True:
            with self._lock:
                if self._closed:
                    ready, self._ready = self._ready, []
                    break
                stale = self._stale()
                request = self._next_request() if not stale else None
                evicted = self._make_room(request[0]) if request else []
            for launched in stale + evicted:
                launched.close()
            if stale:
                continue
            if request is not None:
                self._start_one(*request)
                continue
            self._retire_copiers()
            with self._lock:
                if not self._closed and not self._requests:
                    self._lock.wait(_CHECK_SECONDS)
        for _, launched in ready:
            launched.close()
        with self._lock:
            self._retiring += self._copiers.values()
            self._copiers = {}
        self._retire_copiers(every=True)

    def _next_request(self) -> tuple[tuple[object, ...], Plan] | None:
        """The oldest request of a kind still warmed (the lock held), or None."""
        while self._requests:
            key, template = self._requests.popleft()
            if self._kind_failures.get(key, 0) < 3:
                return key, template
        return None

    def _make_room(self, key: tuple[object, ...]) -> list[Launched]:
        """Take out (the lock held) the sandbox to retire so that one of ``key``'s kind
        fits: none when there is room, else one of the kind whose last call is the
        oldest.  A pool full of ``key``'s kind itself has nothing to give: the request
        is dropped by retiring nothing and starting nothing (``_start_one`` checks)."""
        if len(self._ready) < self.size:
            return []
        others = [i for i, (k, _) in enumerate(self._ready) if k != key]
        if not others:
            return []
        oldest = min(others, key=lambda i: self._last_call.get(self._ready[i][0], 0.0))
        return [self._ready.pop(oldest)[1]]

    def _stale(self) -> list[Launched]:
        """Take out (the lock held) the sandboxes that ended by themselves: each is a
        failure of its kind (its interpreter, or its template's set-up, failed), so a
        host that kills every one stops the refilling.  Each is replaced by one of its
        kind if a call of that kind came since it started, else by one of the kind
        called last."""
        keep: list[tuple[tuple[object, ...], Launched]] = []
        stale = []
        for key, launched in self._ready:
            if not launched.exited():
                keep.append((key, launched))
                continue
            self._kind_failures[key] = self._kind_failures.get(key, 0) + 1
            stale.append(launched)
            if self._last_call.get(key, 0.0) < launched.started_at:
                key = self._key
            self._requests.append((key, self._templates[key]))
        self._ready = keep
        return stale

    def _start_one(self, key: tuple[object, ...], template: Plan) -> None:
        """Start one sandbox of ``template``'s kind and add it to the pool, unless the
        pool is full by then; for a kind with a template, wait until it is ready (its
        set-up done) before starting another, so that set-ups run one at a time, not
        side by side with each other and the calls (a plain interpreter's start-up is
        short: the next starts at once, which keeps up with calls back to back).  A
        failure counts against the kind, and the keeper waits a little before it starts
        anything else."""
        with self._lock:
            if len(self._ready) >= self.size:
                return
        try:
            launched = self._copy(key, template) if template.copies else start(template)
        except Exception:
            with self._lock:
                self._kind_failures[key] = self._kind_failures.get(key, 0) + 1
                self._lock.wait(_RETRY_SECONDS)
            return
        with self._lock:
            self._started += 1
            closing = self._closed or len(self._ready) >= self.size
            if not closing:
                self._ready.append((key, launched))
        if closing:
            launched.close()
            return
        if template.template:
            self._settle(key, launched)

    def _copy(self, key: tuple[object, ...], plan: Plan) -> Launched:
        """A copy of the template sandbox of ``plan``'s kind, started first when there is
        none (or it ended), and waited for until its set-up is done (at most
        ``_SETTLE_SECONDS``); the template sandboxes of kinds the pool forgot are ended
        here.  Raises ``SandboxError`` when the set-up failed (what it said is kept for
        the calls: ``start_now``) or the copy could not be started.  The keeper thread
        only: a sandbox dies with the thread that started it."""
        from .._launch.copier import Copier  # only where templates are copied

        with self._lock:
            forgotten = [k for k in self._copiers if k not in self._templates]
            ended = [k for k, c in self._copiers.items() if k not in forgotten and c.exited()]
            self._retiring += [self._copiers.pop(k) for k in forgotten + ended]
            copier = self._copiers.get(key)
        self._retire_copiers()
        if copier is None:
            copier = Copier(plan)
            with self._lock:
                self._copiers[key] = copier
                self._copy_failures.pop(key, None)
            said = copier.ready_within(_SETTLE_SECONDS)
            if not said.startswith(b"R"):
                with self._lock:
                    self._copiers.pop(key, None)
                    self._copy_failures[key] = _set_up_failure(said)
                    self._lock.notify_all()
                copier.close()
                raise self._copy_failures[key]
            with self._lock:
                self._lock.notify_all()
        return copier.copy(plan)

    def _retire_copiers(self, every: bool = False) -> None:
        """End the template sandboxes of forgotten kinds once none of their copies runs
        (ending one ends its copies: a call may still run one), or all of them with
        ``every``.  The keeper thread only."""
        with self._lock:
            done = [c for c in self._retiring if every or c.exited() or not c.busy()]
            self._retiring = [c for c in self._retiring if c not in done]
        for copier in done:
            copier.close()

    def start_now(self, plan: Plan, until: float, within: float) -> Launched:
        """A sandbox of the warm ``plan``'s kind started now for one call, in the
        calling thread: for a kind of copies, a copy of its template sandbox, waited for
        until ``until`` (a ``time.monotonic()`` value) while the keeper starts it;
        otherwise a sandbox that runs the template's set-up first.  Raises
        ``SandboxError`` when the set-up failed (with what it said), or was not done in
        time (``within`` seconds, for the message)."""
        if not plan.copies:
            return start(plan)
        key = plan.start_key()
        with self._lock:
            while True:
                copier = self._copiers.get(key)
                if copier is not None and copier.ready_within(0.0).startswith(b"R"):
                    break
                failure = self._copy_failures.get(key)
                if failure is not None:
                    raise failure
                left = until - time.monotonic()
                if left <= 0 or self._closed:
                    raise SandboxError(f"the template's set-up was not done within {within:g} s")
                if copier is None and all(k != key for k, _ in self._requests):
                    self._templates[key] = template_of(plan)
                    self._requests.append((key, self._templates[key]))
                    self._lock.notify_all()
                self._lock.wait(min(left, 0.05))
        return copier.copy(plan)

    def _settle(self, key: tuple[object, ...], launched: Launched) -> None:
        """Wait until ``launched`` is ready (then its kind's failures are forgotten),
        has ended, or was taken by a call, at most ``_SETTLE_SECONDS``, looking every
        50 ms whether the pool is closing.  Only a sandbox that said it is ready
        clears its kind's failures: a template whose set-up fails is not restarted
        forever."""
        deadline = time.monotonic() + _SETTLE_SECONDS
        while time.monotonic() < deadline:
            with self._lock:
                if self._closed or all(other is not launched for _, other in self._ready):
                    return
            if launched.ready_within(0.05):
                with self._lock:
                    self._kind_failures[key] = 0
                return
            if launched.exited():
                return
