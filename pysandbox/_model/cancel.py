# SPDX-License-Identifier: MIT
"""Cancellation: what a caller sets to stop a run, and what a cancelled run raises."""

from __future__ import annotations

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol
else:
    #: A plain base at run time: a command line's start-up does without ``typing``.
    Protocol = object

__all__ = ["AnyOf", "CancelEvent", "Cancelled"]


class CancelEvent(Protocol):
    """What the C core asks each tick (``threading.Event`` fits)."""

    def is_set(self) -> bool: ...


class Cancelled(Exception):
    """The run was cancelled through its ``cancel`` event; the sandbox is gone."""


class AnyOf:
    """A cancel event that is set once any of ``events`` is (None entries are skipped)."""

    def __init__(self, *events: CancelEvent | None) -> None:
        self._events = [event for event in events if event is not None]

    def is_set(self) -> bool:
        """True once one of the events is set."""
        return any(event.is_set() for event in self._events)
