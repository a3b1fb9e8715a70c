# SPDX-License-Identifier: MIT
"""One sandbox's group in one hierarchy (a node): made, limited, read, killed and removed
through directory descriptors, and the groups whose removal must be retried."""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import threading
import time
from collections.abc import Iterable

from .._model.errors import SandboxError
from .base import DEFAULT_FIX, enable, failure, open_ready_base
from .files import (
    CONTROL_FILES,
    ControlFiles,
    LimitFile,
    open_dir,
    read_control,
    write_control,
)
from .mounts import CPUACCT, Hierarchy, open_base

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _signal
else:
    import _signal  # what signal wraps, without the enums it builds at import

__all__ = [
    "KILL_SECONDS",
    "PARENT",
    "REMOVE_SECONDS",
    "Node",
    "close_all",
    "counts_cpu",
    "kill_nodes",
    "make_node",
    "open_cpu_counter",
    "open_parent",
    "open_tasks",
    "parent_lock",
    "remove_all",
    "remove_later",
    "remove_node",
    "set_limits",
    "sweep_leftovers",
]


#: The name of the shared parent group, at the root of each hierarchy.
PARENT = "pysandbox"


#: ``pids.max`` accepts at most the kernel's PID_MAX_LIMIT (2**22 on 64-bit): no group
#: can hold more tasks than that anyway, so a larger cap is written as this one.
_PID_MAX_LIMIT = 4 * 1024 * 1024


#: Budgets of the clean-up in ``__exit__``: killing, then removing the directories.  Both
#: together stay under one second.
KILL_SECONDS = 0.5


REMOVE_SECONDS = 0.4


#: Held while this process opens or makes the parent group and a group in it, and while
#: the probe removes a parent it made, so that the two never interleave in one process.
parent_lock = threading.Lock()


#: The fix when cgroup v2 refuses to enable a controller for the children of a group.
_INTERNAL_PROCESSES_FIX = (
    "processes live in that cgroup, and cgroup v2 enables controllers only for the "
    "children of a group without processes: move those processes into a child group"
)


class Node:
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


def open_parent(hierarchy: Hierarchy, controllers: frozenset[str], *, create: bool) -> int:
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


def make_node(node: Node, name: str) -> None:
    """Create ``node``'s directory ``name``; retried when a probe removed the parent
    meanwhile.  Raises ``SandboxError``; ``node`` keeps what was opened, to be closed."""
    limited = node.controllers - {CPUACCT}
    with parent_lock:
        _make_locked(node, name, limited)
    try:
        node.fd = open_dir(name, node.hierarchy.dev, dir_fd=node.parent_fd)
    except OSError as exc:
        raise failure("open the cgroup", node.path, exc, node.hierarchy) from exc


def _make_locked(node: Node, name: str, limited: frozenset[str]) -> None:
    """The body of ``make_node``, under ``parent_lock``."""
    # Another process's probe may remove the parent at any moment (this process's
    # probe holds parent_lock to do it): an operation on it then fails with ENOENT or
    # ENODEV, and is tried again with a new parent.
    vanished = (errno.ENOENT, errno.ENODEV)
    for attempt in range(3):
        try:
            node.parent_fd = open_parent(node.hierarchy, limited, create=True)
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


def _set(node: Node, limit: LimitFile, value: str) -> bool:
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


def _check(node: Node, file: str, most: int) -> None:
    """Read a limit back: the kernel must hold one no larger than ``most``."""
    path = os.path.join(node.path, file)
    try:
        text = read_control(node.fd, file).strip()
    except OSError as exc:
        raise failure("read back", path, exc, node.hierarchy) from exc
    if not text.isdigit() or int(text) > most:
        raise SandboxError(f"the limit in {path} is {text!r} after setting {most}; {DEFAULT_FIX}")


def _set_cap(node: Node, limits: tuple[LimitFile, ...], cap: int) -> None:
    """Write ``cap`` (or 0 where the table says so) to each of ``limits``, in order, and
    read back those the table says to check."""
    for limit in limits:
        if _set(node, limit, "0" if limit.zero else str(cap)) and limit.check:
            _check(node, limit.name, cap)


def set_limits(node: Node, processes: int | None, memory: int | None) -> None:
    """Set the limits this node's controllers carry (None: not set); raises
    ``SandboxError`` naming the file and the fix."""
    if "pids" in node.controllers and processes is not None:
        _set_cap(node, node.files.pids_limit, min(processes, _PID_MAX_LIMIT))
    if "memory" in node.controllers and memory is not None:
        _set_cap(node, node.files.memory_limit, memory)


def open_tasks(node: Node, procs_fd: int) -> int:
    """The v1 group's ``tasks`` file opened write-only (close-on-exec), or ``procs_fd``
    (its ``cgroup.procs``) when it cannot be opened; the caller owns the descriptor."""
    try:
        return os.open("tasks", os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=node.fd)
    except OSError:
        return procs_fd


def open_cpu_counter(nodes: Iterable[Node]) -> int:
    """The group's CPU counter opened for reading (close-on-exec), or -1 when it has
    none; the caller owns the descriptor."""
    for node in nodes:
        if not counts_cpu(node):
            continue
        try:
            return os.open(
                node.files.cpu_usage, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=node.fd
            )
        except OSError:
            continue
    return -1


def remove_node(node: Node, deadline: float) -> None:
    """rmdir the node's group, retrying while the kernel finishes the last exits; left
    for ``sweep_leftovers`` when ``deadline`` passes.  ``node.fd`` is closed."""
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
                remove_later(node.hierarchy, node.name)
                return
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


# Groups whose removal ran out of time, with the pid that made them: retried before each
# new group and at exit, by that process only (not by a forked child).
_leftovers: list[tuple[int, Hierarchy, str]] = []


_leftovers_lock = threading.Lock()


_atexit_registered = False


def remove_later(hierarchy: Hierarchy, name: str) -> None:
    """Remember a group that could not be removed yet."""
    global _atexit_registered
    with _leftovers_lock:
        _leftovers.append((os.getpid(), hierarchy, name))
        if not _atexit_registered:
            atexit.register(sweep_leftovers)
            _atexit_registered = True


def sweep_leftovers() -> None:
    """Try once more to remove the groups of this process that could not be removed."""
    with _leftovers_lock:
        pending = [entry for entry in _leftovers if entry[0] == os.getpid()]
        _leftovers[:] = [entry for entry in _leftovers if entry[0] != os.getpid()]
    kept = []
    for entry in pending:
        _pid, hierarchy, name = entry
        try:
            parent_fd = open_parent(hierarchy, frozenset(), create=False)
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


def remove_all(nodes: list[Node]) -> None:
    """Remove the groups of ``nodes`` (within ``REMOVE_SECONDS``, else left for
    ``sweep_leftovers``) and close their descriptors; never raises."""
    deadline = time.monotonic() + REMOVE_SECONDS
    for node in nodes:
        try:
            remove_node(node, deadline)
        except Exception:
            pass
        finally:
            node.close()


def close_all(nodes: list[Node]) -> None:
    """Close the descriptors of ``nodes`` and remove nothing (a forked child's part)."""
    for node in nodes:
        node.close()


def kill_nodes(nodes: list[Node], timeout: float = KILL_SECONDS) -> bool:
    """SIGKILL every process in the groups of ``nodes`` until none is left, for at most ``timeout``
    seconds.  Uses v2 ``cgroup.kill`` when present (which also stops forks racing
    with it).  True when the group is empty (zombies waiting to be reaped by their
    parent are not in it)."""
    deadline = time.monotonic() + timeout
    for node in nodes:
        if node.fd >= 0 and node.files.kill is not None:
            # Before Linux 5.14 there is no cgroup.kill: each process is signalled below.
            with contextlib.suppress(OSError):
                write_control(node.fd, node.files.kill, "1")
    pause = 0.001
    while True:
        pids = _members(nodes)
        if not pids:
            return True
        _kill_round(nodes, pids)
        if time.monotonic() >= deadline:
            return not _members(nodes)
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


def _members(nodes: list[Node]) -> set[int]:
    """The pids (thread-group ids) in the group, in any of its hierarchies."""
    pids: set[int] = set()
    for node in nodes:
        if node.fd < 0:
            continue
        try:
            text = read_control(node.fd, "cgroup.procs")
        except OSError:
            continue
        pids.update(int(word) for word in text.split() if word.isdigit())
    pids.discard(os.getpid())  # cannot be listed; but never kill the caller anyway
    return pids


def _kill_round(nodes: list[Node], pids: set[int]) -> None:
    """SIGKILL the listed pids that are still members, never a reused pid.

    A pidfd is opened for each pid first, the membership read again, and only then
    the signal sent through the pidfd: a pid that exited and was reused outside the
    group is no longer listed, and a pidfd always names the process it was opened
    for.  Without pidfds (Linux < 5.3, Python without ``os.pidfd_open``), plain kill.
    """
    pidfd_open = getattr(os, "pidfd_open", None)
    send = getattr(_signal, "pidfd_send_signal", None)
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
        inside = _members(nodes) if pidfds else set()
        for pid, pidfd in pidfds.items():
            if pid in inside and send is not None:
                with contextlib.suppress(OSError):
                    send(pidfd, _signal.SIGKILL)
    finally:
        for pidfd in pidfds.values():
            os.close(pidfd)
    for pid in plain:
        with contextlib.suppress(OSError):
            os.kill(pid, _signal.SIGKILL)


def counts_cpu(node: Node) -> bool:
    """Whether ``node``'s group counts the CPU time of its processes."""
    needed = node.files.cpu_controller
    return needed is None or needed in node.controllers
