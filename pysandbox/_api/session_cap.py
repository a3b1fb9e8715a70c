# SPDX-License-Identifier: MIT
"""Whether a session's call hit the process cap (``CellResult.processes_exceeded``).

A session's sandbox lives across its calls, so its cgroup's ``pids.events`` ``max``
counts every fork and clone ``pids.max`` refused since it started: a call hit the cap
when the count grew while it ran.  Read on the host before and after each call (one
small read each), exact where a pids cgroup caps the session; without one (the cap is
``RLIMIT_NPROC``) nothing is seen and the field stays False.
"""

from __future__ import annotations

from .._cgroups.group import SandboxCgroup

__all__ = ["ProcessCapWatch"]


class ProcessCapWatch:
    """The session's group, once its launch has made it, and its count of refusals."""

    def __init__(self) -> None:
        self._group: SandboxCgroup | None = None

    def watch(self, group: SandboxCgroup | None) -> None:
        """The launch's ``Plan.on_cgroup``: keep the group (None without one)."""
        self._group = group

    def count(self) -> int:
        """Forks and clones refused so far; 0 without a pids cgroup, or once it ended."""
        group = self._group
        refused = group.pids_refused() if group is not None else None
        return refused or 0
