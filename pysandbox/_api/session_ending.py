# SPDX-License-Identifier: MIT
"""How a ``Session`` ended, from its sandbox's facts: the status of the call it was lost
in, and why it ended, in words (the sandbox's own end first)."""

from __future__ import annotations

from .._launch.plan import Facts
from .._model.status import Status

__all__ = ["ending_words", "lost_status"]


def lost_status(facts: Facts | None) -> Status:
    """The status of a call the session was lost in: the sandbox's limit that ended it,
    else ``SIGNALED``."""
    raw = facts.raw if facts is not None else None
    if raw is not None and raw["cpu_exceeded"]:
        return Status.CPU_TIME_EXCEEDED
    if raw is not None and raw["timed_out"]:
        return Status.WALL_TIME_EXCEEDED
    usage = facts.usage if facts is not None else None
    if usage is not None and usage.memory_exceeded:
        return Status.MEMORY_EXCEEDED
    return Status.SIGNALED


def ending_words(
    facts: Facts | None,
    *,
    lifetime: float,
    cpu_budget: float,
    closed: bool,
    failure: BaseException | None,
    lost_reason: str,
) -> str:
    """Why the session ended, in words: its sandbox's ``lifetime``, ``cpu_budget`` or
    memory first, then its closing, the launch's ``failure`` or ``lost_reason`` (with
    the tail of the sandbox's stderr)."""
    if facts is not None and facts.raw["timed_out"]:
        return f"its lifetime of {lifetime:g} s passed"
    if facts is not None and facts.raw["cpu_exceeded"]:
        return f"its CPU budget of {cpu_budget:g} s was used up"
    if facts is not None and facts.usage is not None and facts.usage.memory_exceeded:
        return "its memory limit was reached"
    if closed and not lost_reason:
        return "it was closed"
    if failure is not None and not lost_reason:
        return str(failure)
    tail = ""
    if facts is not None and isinstance(facts.raw["stderr"], bytes):
        tail = facts.raw["stderr"].decode("utf-8", "replace").strip()[-400:]
    reason = lost_reason or "the keeper ended"
    return f"{reason} ({tail})" if tail else reason
