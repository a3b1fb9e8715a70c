# SPDX-License-Identifier: MIT
"""``probe()``: whether this host lets this process make per-sandbox pids and memory groups,
found with a real trial group and cached."""

from __future__ import annotations

import os
import threading

from .._model.errors import SandboxError
from .._model.record import record
from .group import SandboxCgroup
from .mounts import LIMITED, Hierarchy, discover, missing, open_base
from .node import (
    PARENT,
    open_parent,
    parent_lock,
)

__all__ = [
    "CgroupSupport",
    "made_both",
    "probe",
    "probed",
]


#: The limits the probe tries on a trial group.
_TRIAL_PROCESSES = 64


_TRIAL_MEMORY = 256 * 2**20


@record
class CgroupSupport:
    """What per-sandbox control groups this host allows this process to make.

    Found by ``probe()`` with a real trial group, so ``True`` means a group was made and
    its limit set here a moment ago.
    """

    #: A per-sandbox ``pids`` group (a cap on processes and threads) can be made here.
    pids: bool
    #: A per-sandbox ``memory`` group (a cap on the sandbox's total memory) can be made.
    memory: bool
    #: The cgroup version of the hierarchies that hold those controllers: 1 or 2 (2 when
    #: any of them is on v2), also when making a group there is not allowed; None when
    #: neither controller is found at all.
    version: int | None
    #: When something is missing, why, and the fix; ``""`` when both are supported.
    reason: str


_probed: CgroupSupport | None = None


_probe_lock = threading.Lock()


def probe() -> CgroupSupport:
    """Whether per-sandbox pids and memory groups can be made here; cached per process.

    Each controller is tried for real: a trial group is made with a limit set, then
    removed, and so is the parent group ``pysandbox`` when the probe made it.  On cgroup
    v2 the controllers the probe enabled in the base's ``cgroup.subtree_control`` stay
    enabled, and the base's processes stay in ``pysandbox-callers`` (as the first
    sandbox would leave them: turning the controllers off could break another user of
    the hierarchy, and they cost nothing while no group uses them).
    """
    global _probed
    with _probe_lock:
        if _probed is None:
            _probed = _probe()
        return _probed


def probed() -> CgroupSupport | None:
    """``probe()``'s answer when this process has one; None before (nothing is tried)."""
    return _probed


def made_both() -> CgroupSupport:
    """What a group just made here with both a pids and a memory limit shows: both
    controllers work, as both trial groups of ``probe()`` would have found.  Kept as
    ``probe()``'s answer unless one was found first."""
    global _probed
    found = discover()
    support = CgroupSupport(
        pids=True,
        memory=True,
        version=max(found[c].version for c in LIMITED if c in found),
        reason="",
    )
    with _probe_lock:
        if _probed is None:
            _probed = support
    return support


def _probe() -> CgroupSupport:
    """The uncached probe."""
    found = discover()
    versions = {found[c].version for c in LIMITED if c in found}
    parents_before = {h: _parent_exists(h) for h in set(found.values())}
    supported: dict[str, bool] = {}
    # Why each controller failed, and a key telling failures of one cause apart.
    failures: dict[str, tuple[str, object]] = {}
    for controller, (processes, memory) in (
        ("pids", (_TRIAL_PROCESSES, None)),
        ("memory", (None, _TRIAL_MEMORY)),
    ):
        supported[controller] = False
        if controller not in found:
            failures[controller] = (missing(controller), "missing")
            continue
        try:
            with SandboxCgroup(processes=processes, memory=memory):
                pass
        except SandboxError as exc:
            cause = exc.__cause__
            key = cause.errno if isinstance(cause, OSError) else str(exc)
            failures[controller] = (str(exc), key)
        else:
            supported[controller] = True
    for hierarchy, existed in parents_before.items():
        if not existed:
            _remove_parent(hierarchy)
    if not failures:
        reason = ""
    elif len(failures) == 2 and failures["pids"][1] == failures["memory"][1]:
        reason = missing("pids and memory") if not versions else failures["pids"][0]
    else:
        reason = "; ".join(f"{controller}: {why}" for controller, (why, _) in failures.items())
    return CgroupSupport(
        pids=supported["pids"],
        memory=supported["memory"],
        version=max(versions) if versions else None,
        reason=reason,
    )


def _parent_exists(hierarchy: Hierarchy) -> bool:
    """Whether ``<base>/pysandbox`` exists now."""
    try:
        fd = open_parent(hierarchy, frozenset(), create=False)
    except (OSError, SandboxError):
        return False
    os.close(fd)
    return True


def _remove_parent(hierarchy: Hierarchy) -> None:
    """Remove ``<base>/pysandbox`` if it is empty (another sandbox may be using it)."""
    try:
        root_fd = open_base(hierarchy)
    except OSError:
        return
    try:
        with parent_lock:
            os.rmdir(PARENT, dir_fd=root_fd)
    except OSError:
        pass  # EBUSY: a group of another sandbox lives there now; ENOENT: gone
    finally:
        os.close(root_fd)
