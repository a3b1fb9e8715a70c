# SPDX-License-Identifier: MIT
"""Choose, for one run, what enforces the process cap and the total memory cap.

A per-sandbox cgroup when the host lets this process make one (root, cgroup v1 or v2):
it counts exactly this sandbox's processes and memory, tmpfs pages included.  Else
``RLIMIT_NPROC``, which the kernel counts per uid: for a root caller that uid is the
sandbox's own (drawn afresh for every sandbox); for a non-root caller it is the
caller's, so the cap is set above the caller's current count.  Without a memory
cgroup, the memory limit is the per-process ``RLIMIT_AS`` alone.  ``Confinement``
says which mechanism did what, for ``selftest`` and for the security model
(docs/security.rst).
"""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator, Sequence

from .. import _sandbox
from .._cgroups.ahead import ask as ask_ahead
from .._cgroups.ahead import group_for
from .._cgroups.group import SandboxCgroup
from .._cgroups.probe import CgroupSupport, made_both, probe, probed
from .._cgroups.usage import CgroupUsage
from .._model.errors import SandboxError
from .._model.record import record

__all__ = ["Confinement", "confine"]

#: Tasks the C core adds to the caller's count during a run, after the count is taken:
#: the watchdog thread that keeps the limits while a callback runs.  A non-root caller's
#: ``RLIMIT_NPROC`` leaves room for them, so the sandbox still gets all its processes.
_CORE_THREADS = 1


@record
class Confinement:
    """The mechanisms of one run, and what to hand to the C core."""

    #: How the process cap is enforced, in words.
    processes_by: str
    #: How the total memory cap is enforced, in words ("" when there is none).
    memory_by: str
    #: The rlimits for the C core, ``RLIMIT_NPROC`` included or not as chosen.
    rlimits: list[tuple[int, int, int]]
    #: The fds (v1: ``tasks``, see ``SandboxCgroup.v1_join_fds``) the spawned child
    #: joins through.
    cgroup_procs: list[int]
    #: The group, for its usage after the run; None without one.
    cgroup: SandboxCgroup | None
    #: A readable fd of the group's CPU counter for the C core's watcher; -1 without one.
    cpu_counter: int = -1
    #: The cgroup v2 group's directory the C core creates the child in; -1 without one.
    cgroup_dir_fd: int = -1
    #: Without a pids cgroup: how many tasks the tree under bwrap holds (in one of the
    #: C core's samples, ``peak_tasks``) once ``RLIMIT_NPROC`` refuses the next fork;
    #: 0 when a pids cgroup caps the run (its ``pids.events`` tells, exactly).
    tasks_at_cap: int = 0

    def usage(self) -> CgroupUsage | None:
        return self.cgroup.usage() if self.cgroup is not None else None


def _processes_of(uid: int) -> int:
    """How many processes (threads included, as RLIMIT_NPROC counts) uid has now."""
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = os.stat(f"/proc/{entry}")
            if status.st_uid == uid:
                count += len(os.listdir(f"/proc/{entry}/task"))
        except OSError:
            continue
    return count


@contextlib.contextmanager
def confine(
    *,
    processes: int,
    memory_total: int | None,
    rlimits: Sequence[tuple[int, int, int]],
) -> Iterator[Confinement]:
    """Set up the caps of one run; on exit the cgroup (if any) has every process left in
    it killed and its counters read, and is removed soon after (by ``_cgroup``'s reaper
    thread, off the caller's path).  ``rlimits`` may hold an ``RLIMIT_NPROC`` entry, which is
    replaced by the choice made here."""
    base = [item for item in rlimits if item[0] != resource.RLIMIT_NPROC]
    with contextlib.ExitStack() as stack:
        support, group = _made(stack, processes, memory_total)
        if group is None:
            yield _without_cgroup(processes, base, support.reason)
            return
        version = f"cgroup v{support.version}"
        where = f" (groups under {os.path.dirname(group.paths[0])})" if group.paths else ""
        at_cap = 0
        if support.pids:
            processes_by = f"{version} pids controller, this sandbox only{where}"
            limits = base
        else:
            fallback = _without_cgroup(processes, base, support.reason)
            processes_by, limits = fallback.processes_by, fallback.rlimits
            at_cap = fallback.tasks_at_cap
        memory_by = (
            f"{version} memory controller, this sandbox only{where}"
            if support.memory and memory_total is not None
            else ""
        )
        yield Confinement(
            processes_by,
            memory_by,
            limits,
            group.v1_join_fds,
            group,
            group.cpu_counter,
            group.dir_fd,
            at_cap,
        )


def _made(
    stack: contextlib.ExitStack, processes: int, memory_total: int | None
) -> tuple[CgroupSupport, SandboxCgroup | None]:
    """What this host supports, and this run's group entered on ``stack`` (None without one).

    Before this process's first probe, the group is made with both limits at once: made,
    it answers the probe as the probe's two trial groups would, and spares them (a
    command line's one run pays for no trial group); refused, the probe finds out what
    this host allows, as it does for every later run.
    """
    if probed() is None and memory_total is not None:
        with contextlib.suppress(SandboxError):
            group = _group(stack, processes, memory_total)
            return made_both(), group
    support = probe()
    want_pids = processes if support.pids else None
    want_memory = memory_total if support.memory else None
    if want_pids is None and want_memory is None:
        return support, None
    return support, _group(stack, want_pids, want_memory)


def _group(stack: contextlib.ExitStack, processes: int | None, memory: int | None) -> SandboxCgroup:
    """A run's group, entered on ``stack``: made ahead when the last calls limited the
    same controllers (``ahead.py``), else made now; its empty directories are removed after the
    call returns (``ahead.drain``), once the memory it held is freed
    (``_cgroup._settle``), and the next one is asked for once it has ended."""
    entered: list[SandboxCgroup] = []

    def ask_for_the_next() -> None:
        """Once the group has ended (registered first, so it runs after), if it began."""
        if entered:
            ask_ahead(processes, memory, _sandbox.unix_gc_pass)

    stack.callback(ask_for_the_next)
    entered.append(stack.enter_context(group_for(processes, memory, _sandbox.unix_gc_pass)))
    return entered[0]


def _without_cgroup(processes: int, base: list[tuple[int, int, int]], reason: str) -> Confinement:
    """``RLIMIT_NPROC`` for the process cap.  A root caller's bwrap runs as root, outside
    the sandbox uid's count, so the tree under it holds one task more than the count at
    the cap; a non-root caller's bwrap counts."""
    at_cap = processes
    if os.geteuid() == 0:
        cap, by = processes, "RLIMIT_NPROC of the sandbox's own uid"
        at_cap += 1
    else:
        hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
        cap = _processes_of(os.getuid()) + _CORE_THREADS + processes
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        by = (
            "RLIMIT_NPROC of the caller's uid, above its current count: concurrent sandboxes "
            "of this uid share one count"
        )
    note = f" (no cgroup: {reason})" if reason else ""
    rlimits = [*base, (resource.RLIMIT_NPROC, cap, cap)]
    return Confinement(by + note, "", rlimits, [], None, tasks_at_cap=at_cap)
