# SPDX-License-Identifier: MIT
"""``close_soon``: what is left of a warm sandbox once its call has its facts, closed in
a daemon thread so that the caller does not wait for it.

When ``Launched.finish`` has its facts, bwrap is reaped and every process of the
sandbox is gone (its init was pid 1 of the sandbox's pid namespace), and the cgroup's
counters are read.  What is left is clean-up no result depends on: the cgroup's last
kill, the settling of its shared memory and its removal, the lifeline, the code file,
the waiter's fds; about 0.5 ms a call.  A run that ended at its init's report
(``end_at_report``) also leaves bwrap and the init, which end by themselves, to be
reaped.  The thread (``_cgroups.reaper.Reaper``) does them one sandbox after the other;
``drain`` waits for it (``Runner.close`` does), and what is left at exit is done then.
The backlog stays short: a call that finds the thread with ``_BACKLOG`` sandboxes to
close already closes its own in its thread, so calls in a row are held back by their clean-up
as without the thread (the memory a sandbox left to the kernel is freed by then too).
A forked child forgets the parent's (its copies of the fds are the only thing of them
it has).
"""

from __future__ import annotations

import contextlib

from .._cgroups.reaper import Reaper

__all__ = ["close_soon", "drain"]

#: How long the exit waits for the sandbox the thread is closing (a cgroup's removal
#: is the longest part, bounded by ``_cgroups``).
_EXIT_SECONDS = 5.0

#: How many sandboxes the thread may have to close before a call closes its own.
_BACKLOG = 1


def _nothing() -> None:
    """No sweep, nothing at exit but the jobs left."""


def _forget(_resources: contextlib.ExitStack) -> None:
    """A forked child leaves the parent's sandbox alone."""


_closer: Reaper[contextlib.ExitStack] = Reaper(
    name="pysandbox-closer",
    remove=contextlib.ExitStack.close,
    forget=_forget,
    sweep=_nothing,
    at_exit=_nothing,
    exit_seconds=_EXIT_SECONDS,
)


def close_soon(resources: contextlib.ExitStack) -> None:
    """Close ``resources`` in the closer's thread, or in this one when the thread is
    behind (or cannot be started); never raises."""
    if _closer.pending() >= _BACKLOG:
        with contextlib.suppress(Exception):  # clean-up only, as in the thread
            resources.close()
        return
    _closer.remove(resources)


def drain(timeout: float | None = None) -> bool:
    """Wait until everything handed to ``close_soon`` so far is closed; False when
    ``timeout`` seconds passed first."""
    return _closer.drain(timeout)
