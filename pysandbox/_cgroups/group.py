# SPDX-License-Identifier: MIT
"""``SandboxCgroup``: one sandbox's control group in every hierarchy it needs, from creation
to teardown (see the package's docstring for why and where).

``SandboxCgroup`` makes a fresh group (``pysandbox-<pid>-<pidns>-<counter>-<random>``:
the creator's pid and pid namespace, see ``sweep.sweep_dead_callers``) under a
shared parent group ``pysandbox`` in each hierarchy it needs, sets the limits, and hands
the C core what joins it: on cgroup v2 the group's directory, in which ``clone3`` with
``CLONE_INTO_CGROUP`` creates bwrap (no migration, so no wait for an RCU grace period);
on v1 write-only descriptors of the group's ``tasks`` files (``v1_join_fds``), into
which the spawn child writes ``b"0"`` before it executes bwrap: that moves the one
thread the child has, without the global lock (and its RCU grace period) that moving a
whole process through ``cgroup.procs`` takes.  Either way every process of the
sandbox is born inside the group.  Afterwards ``usage()`` tells what happened,
and leaving the ``with`` block kills what is left and removes the group (or, for the
launch, leaves the removal of its empty directories to the reaper thread, after the
call has returned: ``drain``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from collections.abc import Callable

from .._host import owners, tokens
from .._model.errors import SandboxError
from .._model.limits import MAX_LIMIT
from .base import failure
from .files import (
    CONTROL_FILES,
)
from .mounts import CPUACCT, Hierarchy, discover, missing
from .node import (
    KILL_SECONDS,
    PARENT,
    REMOVE_SECONDS,
    Node,
    close_all,
    kill_nodes,
    make_node,
    open_cpu_counter,
    open_tasks,
    remove_all,
    remove_node,
    set_limits,
    sweep_leftovers,
)
from .sweep import reaper
from .usage import CgroupUsage, read_cpu, read_pids_refused, read_usage, settle

__all__ = [
    "SandboxCgroup",
    "check_limits",
]


_counter = itertools.count()


# -- one group in one hierarchy: make, limit, read, remove ---------------------------------


# -- groups left behind ---------------------------------------------------------------------


# -- clean-up after the call ----------------------------------------------------------------


# -- the sandbox's group in every hierarchy -------------------------------------------------


def check_limits(processes: int | None, memory: int | None) -> None:
    """Raise ``TypeError`` or ``ValueError`` for a limit that is not None or a positive int."""
    for name, value in (("processes", processes), ("memory", memory)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int or None, not {type(value).__name__}")
        if not 0 < value <= MAX_LIMIT:
            raise ValueError(
                f"{name} must be > 0 and <= 2**62 (or None for no limit), got {value!r}"
            )


class SandboxCgroup:
    """One sandbox's control group: a cap on its processes and threads and on its memory.

    Use it as a context manager.  ``__enter__`` creates a fresh group
    (``pysandbox-<pid>-<pidns>-<counter>-<random>``) under the parent group ``pysandbox`` in each
    hierarchy it needs, sets ``pids.max`` to ``processes`` and the memory limit to
    ``memory`` (v1: ``memory.limit_in_bytes``, ``memory.memsw.limit_in_bytes`` when
    swap is accounted, so swap does not extend it, and ``memory.kmem.tcp.limit_in_bytes``
    for socket buffers; v2: ``memory.max``, and ``memory.swap.max`` = 0 when present),
    and opens (``O_WRONLY|O_CLOEXEC``) the
    ``cgroup.procs`` file of each of those groups: ``procs_fds`` (and on v1 their
    ``tasks`` files: ``v1_join_fds``).  The spawn child writes ``b"0"`` into the v1
    ones to move itself in before it executes, so every process of the sandbox is
    born inside.  On v1 the ``cpuacct`` hierarchy is
    joined too when mounted, for ``CgroupUsage.cpu_time``.  A limit that is None is not
    set, and its hierarchy not joined (with both None, no group is made at all).

    ``usage()`` reads the counters; ``kill()`` kills every process still in the group.
    ``__exit__`` closes the descriptors, kills what is left and removes the directories
    (within about a second; a directory that cannot be removed in time, because a process
    in it does not die, is retried before the next group is made and at exit).  It
    never raises: only the original exception, if any, propagates.  With
    ``remove_later``, ``__exit__`` still kills what is left and takes the final counters
    before it returns, but leaves the removal of the (empty) directories to this
    process's reaper thread, after the caller has its result: ``drain()`` waits for it,
    and it is done at exit.

    :param processes: the most tasks (processes plus threads) alive at once, or None.
    :param memory: bytes of memory for the whole sandbox (its processes, its page cache,
        the tmpfs pages it writes and its socket buffers; v1 caps the sockets apart, at
        the same size), or None.  v1 rounds it down to whole pages.
    :param remove_later: remove the directories in the reaper thread (see above).
    :param settle: one pass of the kernel's deferred frees (``_sandbox.unix_gc_pass``):
        given, the group is removed only once the shared memory it still holds after its
        last process is gone is freed, or no pass frees more.
    :raises TypeError, ValueError: a limit is not None or a positive int.
    :raises SandboxError: (from ``prepare`` or ``__enter__``) a group or a limit cannot
        be made here; the message names the file and the fix.  Nothing is left behind.
    """

    def __init__(
        self,
        *,
        processes: int | None,
        memory: int | None,
        remove_later: bool = False,
        settle: Callable[[], bool] | None = None,
    ) -> None:
        """Check the limits; nothing is created before ``prepare`` or ``__enter__``."""
        check_limits(processes, memory)
        self._processes = processes
        self._memory = memory
        self._nodes: list[Node] = []
        self._procs_fds: list[int] = []
        #: Per node: the fd the spawn child joins through (see ``v1_join_fds``).
        self._join_fds: list[int] = []
        self._cpu_fd = -1
        self._state = "new"  # -> ("prepared" ->) "entered" -> "exited"
        #: Held to read a counter while the group lives (``pids_refused``, in a caller's
        #: thread) and to mark it exited: its fds are closed only after that.
        self._reading = threading.Lock()
        self._limited = False
        self._final: CgroupUsage | None = None
        self._remove_later = remove_later
        self._settle = settle
        #: The process that made it: a forked child's copy is not the group's.
        self._owner = os.getpid()

    # -- the public surface ------------------------------------------------------------

    @property
    def procs_fds(self) -> list[int]:
        """Write-only, close-on-exec descriptors of the group's ``cgroup.procs`` files, one
        per hierarchy; empty before ``__enter__`` (a prepared group's too: no process
        may join it before its limits are set), after ``__exit__`` and with no limit."""
        return list(self._procs_fds) if self._state == "entered" else []

    @property
    def v1_procs_fds(self) -> list[int]:
        """Those of ``procs_fds`` of cgroup v1 hierarchies: the ones the spawned child
        writes to; the v2 group is joined through ``dir_fd``."""
        fds = zip(self._nodes, self.procs_fds)
        return [fd for node, fd in fds if node.hierarchy.version == 1]

    @property
    def v1_join_fds(self) -> list[int]:
        """What the spawned child writes ``b"0"`` into to join the group's cgroup v1
        hierarchies: write-only, close-on-exec descriptors of each v1 group's ``tasks``
        file (its ``cgroup.procs`` where ``tasks`` cannot be opened).  ``0`` in ``tasks``
        moves the writing thread, which is the whole process for the spawn child (a
        process of one thread, as every process between its clone and its exec is):
        every process of the sandbox is born inside all the same.  Moving one thread
        of the writer itself spares the kernel the global lock that moving a whole
        thread group takes (``cgroup_threadgroup_rwsem``), whose writer waits for an
        RCU grace period: milliseconds on a loaded host, in the middle of every
        spawn.  Empty before ``__enter__``, after ``__exit__`` and with no limit."""
        return list(self._join_fds) if self._state == "entered" else []

    @property
    def dir_fd(self) -> int:
        """A descriptor of the group's directory on cgroup v2, for the C core to create
        the sandbox's first process in it (``clone3`` with ``CLONE_INTO_CGROUP``, or a
        write to its ``cgroup.procs`` where the kernel lacks that); -1 without a v2
        group, before ``__enter__`` and after ``__exit__``.  The group owns it."""
        for node in self._nodes:
            if node.hierarchy.version == 2 and node.fd >= 0 and self._state == "entered":
                return node.fd
        return -1

    @property
    def cpu_counter(self) -> int:
        """A read-only, close-on-exec descriptor of the group's CPU counter (v1
        ``cpuacct.usage``, v2 ``cpu.stat``), for the C core to sample while the sandbox
        runs; -1 when the group has none (no cpuacct hierarchy on v1), before
        ``__enter__`` and after ``__exit__``.  The group owns it."""
        return self._cpu_fd if self._state == "entered" else -1

    @property
    def paths(self) -> list[str]:
        """The group's directories (for messages and tests; never to be opened by path)."""
        return [node.path for node in self._nodes]

    def prepare(self, *, limits: bool = True) -> None:
        """Create the group and open its descriptors now, ahead of ``__enter__``, and set
        the limits unless not ``limits`` (``ahead.py`` makes groups off the calls' path,
        without limits, and gives each its call's with ``limit_to``); a group prepared
        and never entered is ended with ``discard``."""
        if self._state != "new":
            raise RuntimeError("a SandboxCgroup can be prepared only once")
        self._state = "prepared"
        self._limited = limits
        try:
            self._create(limits)
        except BaseException:
            self._teardown()
            raise

    def limit_to(self, processes: int | None, memory: int | None) -> None:
        """For a group prepared without its limits: these are the ones ``__enter__``
        sets.  Each must be None exactly where the group's was (its hierarchies are
        made): ``ValueError`` otherwise; ``TypeError`` or ``ValueError`` for a bad
        limit, as from ``__init__``; ``RuntimeError`` for any other group."""
        if self._state != "prepared" or self._limited:
            raise RuntimeError("only a group prepared without limits takes them later")
        if (processes is None, memory is None) != (self._processes is None, self._memory is None):
            raise ValueError("a group made ahead limits the same controllers as its call")
        check_limits(processes, memory)
        self._processes, self._memory = processes, memory

    def discard(self, *, now: bool = False) -> None:
        """End a group that was prepared and never entered: close and remove it (in the
        reaper thread with ``remove_later``, unless ``now``); never raises."""
        self._teardown(later=self._remove_later and not now)

    def __enter__(self) -> SandboxCgroup:
        """Create the group, open the ``cgroup.procs`` descriptors and set the limits
        (what ``prepare`` did already is not done again)."""
        if self._state == "new":
            self.prepare()
        elif self._state != "prepared":
            raise RuntimeError("a SandboxCgroup can be entered only once")
        if not self._limited:
            try:
                # What making it would have started: the retry of this process's groups
                # left behind, and the sweep of dead callers' (one per call, made or not).
                sweep_leftovers()
                reaper.sweep()
                self._set_limits()
            except BaseException:
                self._teardown()
                raise
            self._limited = True
        self._state = "entered"
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Close the descriptors, kill what is left and remove the group (with
        ``remove_later``, in the reaper thread); never raises."""
        self._teardown(later=self._remove_later)

    def usage(self) -> CgroupUsage:
        """The group's counters now; after ``__exit__``, as they were when it ended."""
        if self._state == "new":
            raise RuntimeError("the SandboxCgroup has not been entered")
        if self._final is not None:
            return self._final
        return read_usage(self._nodes)

    def cpu_time(self) -> float | None:
        """CPU seconds the group's counter holds now (None without one), as ``usage``
        reads it, without its other counters."""
        if self._final is not None:
            return self._final.cpu_time
        return read_cpu(self._nodes)

    def pids_refused(self) -> int | None:
        """Forks and clones the group's ``pids.max`` has refused so far, while the group
        lives; None without a pids controller, or once it has ended."""
        with self._reading:
            if self._state != "entered":
                return None
            return read_pids_refused(self._nodes)

    def kill(self, timeout: float = KILL_SECONDS) -> bool:
        """SIGKILL every process in the group until none is left, for at most ``timeout``
        seconds (``node.kill_nodes``); True when the group is empty."""
        return kill_nodes(self._nodes, timeout)

    # -- the work ---------------------------------------------------------------------

    def _needed(self) -> dict[Hierarchy, frozenset[str]]:
        """The controllers to use, grouped by hierarchy; raises when one is missing."""
        wanted = [
            c for c, v in (("pids", self._processes), ("memory", self._memory)) if v is not None
        ]
        if not wanted:
            return {}
        found = discover()
        by_hierarchy: dict[Hierarchy, set[str]] = {}
        for controller in wanted:
            if controller not in found:
                raise SandboxError(missing(controller))
            by_hierarchy.setdefault(found[controller], set()).add(controller)
        # cpuacct only when none of those groups counts CPU by itself (v2 groups do).
        cpuacct = found.get(CPUACCT)
        if cpuacct is not None and all(
            CONTROL_FILES[h.version].cpu_controller is not None for h in by_hierarchy
        ):
            by_hierarchy.setdefault(cpuacct, set()).add(CPUACCT)
        return {h: frozenset(c) for h, c in by_hierarchy.items()}

    def _create(self, limits: bool = True) -> None:
        """Make the group in every hierarchy, open the procs files, set the limits
        (unless not ``limits``: ``prepare``)."""
        needed = self._needed()
        if not needed:
            return
        sweep_leftovers()
        reaper.sweep()
        owner = f"{os.getpid()}-{owners.pid_namespace()}"
        name = f"{PARENT}-{owner}-{next(_counter)}-{tokens.token_hex(4)}"
        # The limits first (their failures are the ones to report), cpuacct last.
        order = sorted(needed, key=lambda h: (needed[h] == {CPUACCT}, h.home))
        for hierarchy in order:
            node = Node(hierarchy, needed[hierarchy])
            self._nodes.append(node)
            try:
                make_node(node, name)
            except SandboxError:
                if node.controllers != {CPUACCT}:
                    raise
                # Only the CPU counter needs it: go on without.
                self._nodes.remove(node)
                remove_node(node, time.monotonic() + REMOVE_SECONDS)
                node.close()
        for node in self._nodes:
            try:
                fd = os.open(
                    "cgroup.procs", os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=node.fd
                )
            except OSError as exc:
                path = os.path.join(node.path, "cgroup.procs")
                raise failure("open", path, exc, node.hierarchy) from exc
            self._procs_fds.append(fd)
            if node.hierarchy.version == 1:
                self._join_fds.append(open_tasks(node, fd))
        self._cpu_fd = open_cpu_counter(self._nodes)
        if limits:
            self._set_limits()

    def _set_limits(self) -> None:
        """Write the limits into the group's nodes (read back where the table says)."""
        for node in self._nodes:
            set_limits(node, self._processes, self._memory)

    def _teardown(self, *, later: bool = False) -> None:
        """Close, kill, snapshot the counters, remove (``later``: hand the directories to
        the reaper thread); bounded, and never raises.  In a process forked from the one
        that made it (its copy closed there: a context manager's generator collected),
        only the descriptors are closed: the group and its sandbox are the other's."""
        with self._reading:
            if self._state == "exited":
                return
            self._state = "exited"
        if os.getpid() != self._owner:
            for fd in {*self._procs_fds, *self._join_fds, self._cpu_fd} - {-1}:
                with contextlib.suppress(OSError):
                    os.close(fd)
            close_all(self._nodes)
            self._final = CgroupUsage(None, False, False, None)
            return
        for fd in {*self._procs_fds, *self._join_fds}:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._procs_fds = []
        self._join_fds = []
        if self._cpu_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._cpu_fd)
            self._cpu_fd = -1
        try:
            if any(node.fd >= 0 for node in self._nodes):
                if self.kill(KILL_SECONDS) and self._settle is not None:
                    settle(self._nodes, self._settle)
                self._final = read_usage(self._nodes)
        except Exception:
            pass
        if self._final is None:
            self._final = CgroupUsage(None, False, False, None)
        if later and self._nodes:
            reaper.remove(list(self._nodes))
        else:
            remove_all(self._nodes)


# -- what this host allows ------------------------------------------------------------------
