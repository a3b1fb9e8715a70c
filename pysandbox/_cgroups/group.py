"""Per-sandbox control groups: a process cap and a total memory cap for ONE sandbox.

``RLIMIT_NPROC`` is per uid (shared by every sandbox of that uid, and not enforced for
root) and ``RLIMIT_AS`` is per process (ten processes get ten times the memory, and no
rlimit counts tmpfs pages).  A control group counts the whole sandbox, and only it:

* the ``pids`` controller caps the tasks (processes and threads) alive in the group at
  once; a ``fork``/``clone`` past ``pids.max`` fails with ``EAGAIN``;
* the ``memory`` controller caps the memory charged to the group: anonymous memory of
  every process, page cache, and the tmpfs pages its processes write; past the limit
  the kernel reclaims, then OOM-kills a process of the group (never one outside it).
  Socket buffers count too: v2 in the same limit; v1 on a counter of their own, capped
  at the same size (so a v1 group may hold twice the limit: memory plus sockets).
  Past it a TCP send waits (``EAGAIN`` when non-blocking) and a datagram is dropped.

``SandboxCgroup`` makes a fresh group (``pysandbox-<pid>-<pidns>-<counter>-<random>``:
the creator's pid and pid namespace, see ``_sweep_dead_callers``) under a
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

This module holds that lifecycle: create, join, limit, read, kill, remove, the sweeps
of leftover groups and of dead callers' groups, and the probe.  Three modules serve it:
``_cgroup_mounts`` finds the hierarchies and where in each the groups go,
``_cgroup_base`` readies that place (cgroup v2's rule on processes), and
``_cgroup_files`` names the control files of each cgroup version (one table) and reads
and writes them.

Where the groups live
    cgroup v2 (one hierarchy, most hosts): under the caller's own group C, as
    ``/proc/self/cgroup`` names it (a systemd service's group, a delegated user scope, a
    container's root): ``C/pysandbox/<group>``.  The controllers are enabled in the
    ``cgroup.subtree_control`` of C and of ``pysandbox``; as v2 allows that only for a
    group without processes, the processes of C are first moved into ``C/pysandbox-callers``
    (``_cgroup_base``).  A non-root caller can do all this in a group delegated to it.
    cgroup v1 (this project's CI host): one directory per hierarchy,
    ``<pids mount>/pysandbox/<group>`` and ``<memory mount>/pysandbox/<group>``, and the
    ``cpuacct`` hierarchy too when it is mounted (for the group's CPU time).  A host
    with both (hybrid) uses, for each controller, v2 when C offers it, else v1.
    The hierarchies are found in ``/proc/self/mountinfo``, not by guessing paths.

Safety
    Every path is built here from the mount points and fixed names; nothing from outside
    input is ever a path.  Directories are opened with ``O_NOFOLLOW|O_DIRECTORY`` (and
    the mount point checked to be the very mount ``mountinfo`` names, by device number)
    and every control file, ``mkdir`` and ``rmdir`` is relative to such a directory
    descriptor, so no symlink is ever followed.

Failing closed
    A limit that was asked for and cannot be set raises ``SandboxError`` naming the file
    and the fix: the caller must then refuse to run, never run with less.  ``probe()``
    tells beforehand whether the host can do it at all, so a caller can choose another
    mechanism (and say which one enforced the cap).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import errno
import itertools
import mmap
import os
import re
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterable

from .._host import owners
from .._model.errors import SandboxError
from .._model.limits import MAX_LIMIT
from .base import DEFAULT_FIX, enable, failure, open_ready_base
from .files import (
    CONTROL_FILES,
    ControlFiles,
    LimitFile,
    open_dir,
    read_control,
    read_int,
    read_keyed,
    write_control,
)
from .mounts import CPUACCT, LIMITED, Hierarchy, discover, missing, open_base
from .reaper import Reaper

__all__ = [
    "PARENT",
    "CgroupSupport",
    "CgroupUsage",
    "SandboxCgroup",
    "drain",
    "probe",
]

#: The name of the shared parent group, at the root of each hierarchy.
PARENT = "pysandbox"

#: ``pids.max`` accepts at most the kernel's PID_MAX_LIMIT (2**22 on 64-bit): no group
#: can hold more tasks than that anyway, so a larger cap is written as this one.
_PID_MAX_LIMIT = 4 * 1024 * 1024
#: Budgets of the clean-up in ``__exit__``: killing, then removing the directories.  Both
#: together stay under one second.
_KILL_SECONDS = 0.5
_REMOVE_SECONDS = 0.4
#: The most shared memory a dead group may still show once settled: its counters fold
#: in up to 64 pages per CPU late.
_SETTLED_SHMEM = 64 * (os.cpu_count() or 1) * mmap.PAGESIZE
#: Passes of the kernel's deferred frees to wait for, at most, before a group goes.
_SETTLE_PASSES = 16

#: The limits the probe tries on a trial group.
_TRIAL_PROCESSES = 64
_TRIAL_MEMORY = 256 * 2**20

#: Held while this process opens or makes the parent group and a group in it, and while
#: the probe removes a parent it made, so that the two never interleave in one process.
_parent_lock = threading.Lock()

_counter = itertools.count()

#: The fix when cgroup v2 refuses to enable a controller for the children of a group.
_INTERNAL_PROCESSES_FIX = (
    "processes live in that cgroup, and cgroup v2 enables controllers only for the "
    "children of a group without processes: move those processes into a child group"
)


@dataclasses.dataclass(frozen=True)
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


@dataclasses.dataclass(frozen=True)
class CgroupUsage:
    """What one sandbox's control group counted.  A counter this host lacks is None or
    False."""

    #: Bytes: the highest memory the group was charged (v1 ``memory.max_usage_in_bytes``,
    #: v2 ``memory.peak``, Linux 5.19+); None without a memory group.
    peak_memory: int | None
    #: The memory limit was hit: v1 ``memory.failcnt``, ``memory.memsw.failcnt`` or
    #: ``memory.kmem.tcp.failcnt`` (socket buffers) > 0, or
    #: ``memory.oom_control`` ``under_oom``/``oom_kill`` > 0; v2 ``memory.events``
    #: ``max``/``oom``/``oom_kill`` > 0.  Hitting the limit makes the kernel reclaim first
    #: (page cache), so this can be true for a program that still ended well.
    memory_exceeded: bool
    #: A fork or clone was refused by ``pids.max`` (``pids.events`` ``max`` > 0).
    pids_exceeded: bool
    #: Seconds of CPU (user + system) of every process that ran in the group: v1
    #: ``cpuacct.usage`` (when the cpuacct hierarchy is mounted), v2 ``cpu.stat``
    #: ``usage_usec``; None when neither is available.
    cpu_time: float | None


class _Node:
    """The sandbox's group in one hierarchy: open descriptors of its parent and itself."""

    def __init__(self, hierarchy: Hierarchy, controllers: frozenset[str]) -> None:
        self.hierarchy = hierarchy
        #: The controllers the sandbox uses from this hierarchy.
        self.controllers = controllers
        self.parent_fd = -1
        self.fd = -1
        self.name = ""

    @property
    def files(self) -> ControlFiles:
        """The names of the control files on this hierarchy's cgroup version."""
        return CONTROL_FILES[self.hierarchy.version]

    @property
    def path(self) -> str:
        """The group's path, for messages only (never opened by path)."""
        return os.path.join(self.hierarchy.home, PARENT, self.name)

    def close(self) -> None:
        """Close both descriptors (idempotent)."""
        for fd in (self.fd, self.parent_fd):
            if fd >= 0:
                os.close(fd)
        self.fd = self.parent_fd = -1


# -- one group in one hierarchy: make, limit, read, remove ---------------------------------


def _open_parent(hierarchy: Hierarchy, controllers: frozenset[str], *, create: bool) -> int:
    """A descriptor of ``<base>/pysandbox``, made (and on v2 given ``controllers``) when
    ``create``; raises ``SandboxError``, or ``FileNotFoundError`` without ``create``."""
    parent_path = os.path.join(hierarchy.home, PARENT)
    if create:
        base_fd = open_ready_base(hierarchy, controllers)
    else:
        try:
            base_fd = open_base(hierarchy)
        except OSError as exc:
            if isinstance(exc, FileNotFoundError):
                raise
            raise failure("open the cgroup", hierarchy.home, exc, hierarchy) from exc
    try:
        if create:
            try:
                os.mkdir(PARENT, 0o755, dir_fd=base_fd)
            except FileExistsError:
                pass
            except OSError as exc:
                raise failure("create the cgroup", parent_path, exc, hierarchy) from exc
        try:
            parent_fd = open_dir(PARENT, hierarchy.dev, dir_fd=base_fd)
        except FileNotFoundError as exc:
            if not create:
                raise
            raise SandboxError(
                f"cannot open the cgroup {parent_path}: it vanished; {DEFAULT_FIX}"
            ) from exc
        except OSError as exc:
            raise failure("open the cgroup", parent_path, exc, hierarchy) from exc
    finally:
        os.close(base_fd)
    if create and hierarchy.version == 2:
        try:
            enable(parent_fd, controllers, hierarchy)
        except OSError as exc:
            os.close(parent_fd)
            fix = _INTERNAL_PROCESSES_FIX if exc.errno == errno.EBUSY else None
            path = os.path.join(parent_path, "cgroup.subtree_control")
            raise failure("enable the controllers in", path, exc, hierarchy, fix) from exc
    return parent_fd


def _make(node: _Node, name: str) -> None:
    """Create ``node``'s directory ``name``; retried when a probe removed the parent
    meanwhile.  Raises ``SandboxError``; ``node`` keeps what was opened, to be closed."""
    limited = node.controllers - {CPUACCT}
    with _parent_lock:
        _make_locked(node, name, limited)
    try:
        node.fd = open_dir(name, node.hierarchy.dev, dir_fd=node.parent_fd)
    except OSError as exc:
        raise failure("open the cgroup", node.path, exc, node.hierarchy) from exc


def _make_locked(node: _Node, name: str, limited: frozenset[str]) -> None:
    """The body of ``_make``, under ``_parent_lock``."""
    # Another process's probe may remove the parent at any moment (this process's
    # probe holds _parent_lock to do it): an operation on it then fails with ENOENT or
    # ENODEV, and is tried again with a new parent.
    vanished = (errno.ENOENT, errno.ENODEV)
    for attempt in range(3):
        try:
            node.parent_fd = _open_parent(node.hierarchy, limited, create=True)
        except SandboxError as exc:
            cause = exc.__cause__
            if isinstance(cause, OSError) and cause.errno in vanished and attempt < 2:
                continue
            raise
        node.name = name
        try:
            os.mkdir(name, 0o755, dir_fd=node.parent_fd)
        except OSError as exc:
            if exc.errno in vanished and attempt < 2:
                os.close(node.parent_fd)
                node.parent_fd = -1
                continue
            path = node.path
            node.name = ""  # not ours: never to be removed
            raise failure("create the cgroup", path, exc, node.hierarchy) from exc
        return


def _set(node: _Node, limit: LimitFile, value: str) -> bool:
    """Write one limit; False when the file is optional and does not exist.  The file's
    own fix replaces the usual advice when it does not exist."""
    try:
        write_control(node.fd, limit.name, value)
    except OSError as exc:
        if limit.optional and exc.errno == errno.ENOENT:
            return False
        advice = limit.fix if exc.errno == errno.ENOENT else None
        path = os.path.join(node.path, limit.name)
        raise failure(f"set {value} in", path, exc, node.hierarchy, advice) from exc
    return True


def _check(node: _Node, file: str, most: int) -> None:
    """Read a limit back: the kernel must hold one no larger than ``most``."""
    path = os.path.join(node.path, file)
    try:
        text = read_control(node.fd, file).strip()
    except OSError as exc:
        raise failure("read back", path, exc, node.hierarchy) from exc
    if not text.isdigit() or int(text) > most:
        raise SandboxError(f"the limit in {path} is {text!r} after setting {most}; {DEFAULT_FIX}")


def _set_cap(node: _Node, limits: tuple[LimitFile, ...], cap: int) -> None:
    """Write ``cap`` (or 0 where the table says so) to each of ``limits``, in order, and
    read back those the table says to check."""
    for limit in limits:
        if _set(node, limit, "0" if limit.zero else str(cap)) and limit.check:
            _check(node, limit.name, cap)


def _set_limits(node: _Node, processes: int | None, memory: int | None) -> None:
    """Set the limits this node's controllers carry (None: not set); raises
    ``SandboxError`` naming the file and the fix."""
    if "pids" in node.controllers and processes is not None:
        _set_cap(node, node.files.pids_limit, min(processes, _PID_MAX_LIMIT))
    if "memory" in node.controllers and memory is not None:
        _set_cap(node, node.files.memory_limit, memory)


def _counts_cpu(node: _Node) -> bool:
    """Whether ``node``'s group counts the CPU time of its processes."""
    needed = node.files.cpu_controller
    return needed is None or needed in node.controllers


def _read_cpu(node: _Node) -> float | None:
    """Seconds in ``node``'s CPU counter, or None when it cannot be read."""
    files = node.files
    if files.cpu_key is None:
        count = read_int(node.fd, files.cpu_usage)
    else:
        count = read_keyed(node.fd, files.cpu_usage).get(files.cpu_key)
    return None if count is None else count / files.cpu_per_second


def _read_usage(nodes: Iterable[_Node]) -> CgroupUsage:
    """Read the counters of every hierarchy; a counter that cannot be read is None/False."""
    peak: int | None = None
    memory_exceeded = pids_exceeded = False
    cpu_time: float | None = None
    for node in nodes:
        files = node.files
        if "memory" in node.controllers:
            peak = read_int(node.fd, files.memory_peak)
            events = read_keyed(node.fd, files.memory_events)
            memory_exceeded = any(
                (read_int(node.fd, name) or 0) > 0 for name in files.memory_failcnt
            ) or any(events.get(key, 0) > 0 for key in files.memory_event_keys)
        if "pids" in node.controllers:
            pids_exceeded = read_keyed(node.fd, files.pids_events).get("max", 0) > 0
        if cpu_time is None and _counts_cpu(node):
            cpu_time = _read_cpu(node)
    return CgroupUsage(
        peak_memory=peak,
        memory_exceeded=memory_exceeded,
        pids_exceeded=pids_exceeded,
        cpu_time=cpu_time,
    )


def _shmem(nodes: Iterable[_Node]) -> int | None:
    """Bytes of shared memory charged to the group, or None without a memory node."""
    for node in nodes:
        if "memory" in node.controllers and node.fd >= 0:
            return read_keyed(node.fd, node.files.memory_stat).get("shmem")
    return None


def _settle(nodes: list[_Node], gc_pass: Callable[[], bool]) -> None:
    """Wait, while the group (empty now) still holds shared memory, for the kernel to
    free it: memfds a sandbox left in a unix socket cycle that its own processes had the
    collector free are put by a kernel worker, batch after batch, after the sandbox is
    gone (``src/unixgc.c``).  Each ``gc_pass`` returns once everything put before it is
    freed; two passes also cover the files queued on a socket freed in the first.  Stops
    when a pass after those frees nothing more: what is left is held on purpose (a file
    on a host tmpfs the sandbox could write)."""
    held = _shmem(nodes)
    passes = 0
    while held is not None and held > _SETTLED_SHMEM and passes < _SETTLE_PASSES:
        if not gc_pass():
            return
        passes += 1
        now = _shmem(nodes)
        if passes > 2 and now is not None and now >= held:
            return
        held = now


def _open_tasks(node: _Node, procs_fd: int) -> int:
    """The v1 group's ``tasks`` file opened write-only (close-on-exec), or ``procs_fd``
    (its ``cgroup.procs``) when it cannot be opened; the caller owns the descriptor."""
    try:
        return os.open("tasks", os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=node.fd)
    except OSError:
        return procs_fd


def _open_cpu_counter(nodes: Iterable[_Node]) -> int:
    """The group's CPU counter opened for reading (close-on-exec), or -1 when it has
    none; the caller owns the descriptor."""
    for node in nodes:
        if not _counts_cpu(node):
            continue
        try:
            return os.open(
                node.files.cpu_usage, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=node.fd
            )
        except OSError:
            continue
    return -1


def _remove(node: _Node, deadline: float) -> None:
    """rmdir the node's group, retrying while the kernel finishes the last exits; left
    for ``_sweep_leftovers`` when ``deadline`` passes.  ``node.fd`` is closed."""
    if node.fd >= 0:
        os.close(node.fd)
        node.fd = -1
    if node.parent_fd < 0 or not node.name:
        return
    pause = 0.001
    while True:
        try:
            os.rmdir(node.name, dir_fd=node.parent_fd)
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                _remove_later(node.hierarchy, node.name)
                return
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


# -- groups left behind ---------------------------------------------------------------------

# Groups whose removal ran out of time, with the pid that made them: retried before each
# new group and at exit, by that process only (not by a forked child).
_leftovers: list[tuple[int, Hierarchy, str]] = []
_leftovers_lock = threading.Lock()
_atexit_registered = False


def _remove_later(hierarchy: Hierarchy, name: str) -> None:
    """Remember a group that could not be removed yet."""
    global _atexit_registered
    with _leftovers_lock:
        _leftovers.append((os.getpid(), hierarchy, name))
        if not _atexit_registered:
            atexit.register(_sweep_leftovers)
            _atexit_registered = True


def _sweep_leftovers() -> None:
    """Try once more to remove the groups of this process that could not be removed."""
    with _leftovers_lock:
        pending = [entry for entry in _leftovers if entry[0] == os.getpid()]
        _leftovers[:] = [entry for entry in _leftovers if entry[0] != os.getpid()]
    kept = []
    for entry in pending:
        _pid, hierarchy, name = entry
        try:
            parent_fd = _open_parent(hierarchy, frozenset(), create=False)
        except FileNotFoundError:
            continue  # no parent, so no group either
        except (OSError, SandboxError):
            kept.append(entry)
            continue
        try:
            os.rmdir(name, dir_fd=parent_fd)
        except FileNotFoundError:
            pass
        except OSError:
            kept.append(entry)
        finally:
            os.close(parent_fd)
    if kept:
        with _leftovers_lock:
            _leftovers.extend(kept)


#: A group's name: the creator's pid, its pid namespace, a counter and a random part.
_GROUP_NAME = re.compile(r"pysandbox-([1-9][0-9]{0,8})-([0-9]+)-[0-9]+-[0-9a-f]+")


def _sweep_dead_callers() -> None:
    """Kill and remove the groups of callers that died without removing them (``kill -9``
    skips every clean-up): a group whose creator's pid is in this process's pid namespace
    and no longer alive.  Its processes should be gone already (the lifeline ends a
    sandbox whose caller died): whatever is left is killed first, by ``_teardown``.

    Groups of live callers are never touched, nor those of other pid namespaces, whose
    pids mean nothing here.  A pid that was reused keeps a dead caller's group until that
    process exits too.  Never raises."""
    namespace = owners.pid_namespace()
    if not namespace:
        return
    dead: dict[str, list[_Node]] = {}
    for hierarchy in set(discover().values()):
        try:
            parent_fd = _open_parent(hierarchy, frozenset(), create=False)
        except (OSError, SandboxError):
            continue
        try:
            names = os.listdir(parent_fd)
        except OSError:
            names = []
        for name in names:
            match = _GROUP_NAME.fullmatch(name)
            if match is None or int(match[2]) != namespace or owners.alive(int(match[1])):
                continue
            node = _Node(hierarchy, frozenset())
            node.name = name
            try:
                node.parent_fd = os.dup(parent_fd)
                node.fd = open_dir(name, hierarchy.dev, dir_fd=parent_fd)
            except OSError:
                node.close()
                continue
            dead.setdefault(name, []).append(node)
        os.close(parent_fd)
    for nodes in dead.values():
        SandboxCgroup._adopt(nodes)._teardown()


# -- clean-up after the call ----------------------------------------------------------------


def drain(timeout: float | None = None) -> bool:
    """Wait until the groups this process has finished with are removed (or, if they
    could not be yet, left for the retry before the next group and at exit), and the
    sweep of dead callers' groups asked for so far has run; False when ``timeout``
    seconds passed first.  Only tests and tools need it: the groups are removed soon
    anyway, and at exit."""
    return _reaper.drain(timeout)


# -- the sandbox's group in every hierarchy -------------------------------------------------


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
    :raises SandboxError: (from ``__enter__``) a limit cannot be set here; the message
        names the file and the fix.  Nothing is left behind.
    """

    def __init__(
        self,
        *,
        processes: int | None,
        memory: int | None,
        remove_later: bool = False,
        settle: Callable[[], bool] | None = None,
    ) -> None:
        """Check the limits; nothing is created before ``__enter__``."""
        for name, value in (("processes", processes), ("memory", memory)):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int or None, not {type(value).__name__}")
            if not 0 < value <= MAX_LIMIT:
                raise ValueError(
                    f"{name} must be > 0 and <= 2**62 (or None for no limit), got {value!r}"
                )
        self._processes = processes
        self._memory = memory
        self._nodes: list[_Node] = []
        self._procs_fds: list[int] = []
        #: Per node: the fd the spawn child joins through (see ``v1_join_fds``).
        self._join_fds: list[int] = []
        self._cpu_fd = -1
        self._state = "new"  # -> "entered" -> "exited"
        self._final: CgroupUsage | None = None
        self._remove_later = remove_later
        self._settle = settle

    @classmethod
    def _adopt(cls, nodes: list[_Node]) -> SandboxCgroup:
        """An entered group made of ``nodes`` (open groups this object did not make, such
        as a dead caller's): it owns them, to kill and remove them."""
        group = cls(processes=None, memory=None)
        group._state = "entered"
        group._nodes = nodes
        return group

    # -- the public surface ------------------------------------------------------------

    @property
    def procs_fds(self) -> list[int]:
        """Write-only, close-on-exec descriptors of the group's ``cgroup.procs`` files, one
        per hierarchy; empty before ``__enter__``, after ``__exit__`` and with no limit."""
        return list(self._procs_fds)

    @property
    def v1_procs_fds(self) -> list[int]:
        """Those of ``procs_fds`` of cgroup v1 hierarchies: the ones the spawned child
        writes to; the v2 group is joined through ``dir_fd``."""
        return [fd for node, fd in zip(self._nodes, self._procs_fds) if node.hierarchy.version == 1]

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
        return list(self._join_fds)

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
        return self._cpu_fd

    @property
    def paths(self) -> list[str]:
        """The group's directories (for messages and tests; never to be opened by path)."""
        return [node.path for node in self._nodes]

    def __enter__(self) -> SandboxCgroup:
        """Create the group, set the limits and open the ``cgroup.procs`` descriptors."""
        if self._state != "new":
            raise RuntimeError("a SandboxCgroup can be entered only once")
        self._state = "entered"
        try:
            self._create()
        except BaseException:
            self._teardown()
            raise
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
        return _read_usage(self._nodes)

    def kill(self, timeout: float = _KILL_SECONDS) -> bool:
        """SIGKILL every process in the group until none is left, for at most ``timeout``
        seconds.  Uses v2 ``cgroup.kill`` when present (which also stops forks racing
        with it).  True when the group is empty (zombies waiting to be reaped by their
        parent are not in it)."""
        deadline = time.monotonic() + timeout
        for node in self._nodes:
            if node.fd >= 0 and node.files.kill is not None:
                # Before Linux 5.14 there is no cgroup.kill: each process is signalled below.
                with contextlib.suppress(OSError):
                    write_control(node.fd, node.files.kill, "1")
        pause = 0.001
        while True:
            pids = self._members()
            if not pids:
                return True
            self._kill_round(pids)
            if time.monotonic() >= deadline:
                return not self._members()
            time.sleep(pause)
            pause = min(pause * 2, 0.02)

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

    def _create(self) -> None:
        """Make the group in every hierarchy, set the limits, open the procs files."""
        needed = self._needed()
        if not needed:
            return
        _sweep_leftovers()
        _reaper.sweep()
        owner = f"{os.getpid()}-{owners.pid_namespace()}"
        name = f"{PARENT}-{owner}-{next(_counter)}-{secrets.token_hex(4)}"
        # The limits first (their failures are the ones to report), cpuacct last.
        order = sorted(needed, key=lambda h: (needed[h] == {CPUACCT}, h.home))
        for hierarchy in order:
            node = _Node(hierarchy, needed[hierarchy])
            self._nodes.append(node)
            try:
                _make(node, name)
            except SandboxError:
                if node.controllers != {CPUACCT}:
                    raise
                # Only the CPU counter needs it: go on without.
                self._nodes.remove(node)
                _remove(node, time.monotonic() + _REMOVE_SECONDS)
                node.close()
        for node in self._nodes:
            _set_limits(node, self._processes, self._memory)
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
                self._join_fds.append(_open_tasks(node, fd))
        self._cpu_fd = _open_cpu_counter(self._nodes)

    def _members(self) -> set[int]:
        """The pids (thread-group ids) in the group, in any of its hierarchies."""
        pids: set[int] = set()
        for node in self._nodes:
            if node.fd < 0:
                continue
            try:
                text = read_control(node.fd, "cgroup.procs")
            except OSError:
                continue
            pids.update(int(word) for word in text.split() if word.isdigit())
        pids.discard(os.getpid())  # cannot be listed; but never kill the caller anyway
        return pids

    def _kill_round(self, pids: set[int]) -> None:
        """SIGKILL the listed pids that are still members, never a reused pid.

        A pidfd is opened for each pid first, the membership read again, and only then
        the signal sent through the pidfd: a pid that exited and was reused outside the
        group is no longer listed, and a pidfd always names the process it was opened
        for.  Without pidfds (Linux < 5.3, Python without ``os.pidfd_open``), plain kill.
        """
        pidfd_open = getattr(os, "pidfd_open", None)
        send = getattr(signal, "pidfd_send_signal", None)
        pidfds: dict[int, int] = {}
        plain: set[int] = set()
        for pid in pids:
            if pidfd_open is None or send is None:
                plain.add(pid)
                continue
            try:
                pidfds[pid] = pidfd_open(pid)
            except ProcessLookupError:
                pass
            except OSError:
                plain.add(pid)  # ENOSYS, or EINVAL for an odd task: fall back
        try:
            inside = self._members() if pidfds else set()
            for pid, pidfd in pidfds.items():
                if pid in inside and send is not None:
                    with contextlib.suppress(OSError):
                        send(pidfd, signal.SIGKILL)
        finally:
            for pidfd in pidfds.values():
                os.close(pidfd)
        for pid in plain:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def _teardown(self, *, later: bool = False) -> None:
        """Close, kill, snapshot the counters, remove (``later``: hand the directories to
        the reaper thread); bounded, and never raises."""
        if self._state == "exited":
            return
        self._state = "exited"
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
                if self.kill(_KILL_SECONDS) and self._settle is not None:
                    _settle(self._nodes, self._settle)
                self._final = _read_usage(self._nodes)
        except Exception:
            pass
        if self._final is None:
            self._final = CgroupUsage(None, False, False, None)
        if later and self._nodes:
            _reaper.remove(list(self._nodes))
        else:
            _remove_all(self._nodes)


def _remove_all(nodes: list[_Node]) -> None:
    """Remove the groups of ``nodes`` (within ``_REMOVE_SECONDS``, else left for
    ``_sweep_leftovers``) and close their descriptors; never raises."""
    deadline = time.monotonic() + _REMOVE_SECONDS
    for node in nodes:
        try:
            _remove(node, deadline)
        except Exception:
            pass
        finally:
            node.close()


# -- what this host allows ------------------------------------------------------------------

_probed: CgroupSupport | None = None
_probe_lock = threading.Lock()


def _close_all(nodes: list[_Node]) -> None:
    """Close the descriptors of ``nodes`` and remove nothing (a forked child's part)."""
    for node in nodes:
        node.close()


#: Removes finished groups and sweeps dead callers' after the calls have returned.
_reaper: Reaper[list[_Node]] = Reaper(
    name="pysandbox-cgroup-reaper",
    remove=_remove_all,
    forget=_close_all,
    sweep=_sweep_dead_callers,
    at_exit=_sweep_leftovers,
    exit_seconds=_KILL_SECONDS + _REMOVE_SECONDS,
)


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
        fd = _open_parent(hierarchy, frozenset(), create=False)
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
        with _parent_lock:
            os.rmdir(PARENT, dir_fd=root_fd)
    except OSError:
        pass  # EBUSY: a group of another sandbox lives there now; ENOENT: gone
    finally:
        os.close(root_fd)
