# SPDX-License-Identifier: MIT
"""The base of the sandboxes' groups in one hierarchy: opened, and on cgroup v2 made able
to give its children controllers.

cgroup v2 enables a controller for the children of a group only while no process lives
in the group itself (the "no internal processes" rule; the root group is exempt).  The
base of a v2 hierarchy is the caller's own group (``_cgroup_mounts.base_of``), which
holds the caller: a systemd service's group, a user's ``systemd-run --scope``, a
container's namespace root.  So before enabling, every process of the base is moved
into its child group ``LEAF`` (the caller among them, and the other processes of the
service, which stay in its group's subtree).  This is what systemd asks of a delegated
service (``Delegate=yes``): to keep its processes in leaves of its own.  The base then
holds two children: ``LEAF`` and ``pysandbox`` (the sandboxes' parent).

A process that is not allowed to write the base's control files (a non-root caller
whose group is not delegated to it) gets a ``SandboxError`` naming the fix:
``permission_fix``.
"""

from __future__ import annotations

import contextlib
import errno
import os

from .._model.errors import SandboxError, errno_text, process_wide_fix
from .files import CONTROL_FILES, open_dir, read_control, write_control
from .mounts import LEAF, Hierarchy, open_base

__all__ = [
    "DEFAULT_FIX",
    "DELEGATION",
    "enable",
    "failure",
    "open_ready_base",
    "permission_fix",
]

#: How to give a process a cgroup v2 group of its own that it may make groups in.
DELEGATION = (
    "give the caller a delegated cgroup: in its systemd unit, add Delegate=yes to the "
    "[Service] section (with User= for a non-root service); from a login shell, start it "
    "with systemd-run --user --scope -p Delegate=yes -- COMMAND; in a container, give it "
    "its own cgroup namespace and a writable /sys/fs/cgroup (docker run --cgroupns=private)"
)

#: Rounds of moving the base's processes into the leaf: a process may fork in the base
#: between the listing and the enabling, and is moved in the next round.
_ROUNDS = 8


def permission_fix(hierarchy: Hierarchy) -> str:
    """The fix when this process may not make or configure a group in ``hierarchy``."""
    if hierarchy.version == 1:
        return (
            "on cgroup v1 only root can make cgroups: run as root, or on a cgroup v2 host "
            f"(boot with systemd.unified_cgroup_hierarchy=1) in a delegated group: {DELEGATION}"
        )
    return (
        f"this process's cgroup {hierarchy.home} is not delegated to uid {os.geteuid()}: "
        + DELEGATION
    )


#: The fix for a failed cgroup operation, by errno (permissions: ``permission_fix``).
_FIXES = {
    errno.EROFS: (
        "the cgroup filesystem is mounted read-only (as in a container without its own "
        "cgroup namespace): mount it read-write, e.g. run the container with "
        "--cgroupns=private and a writable /sys/fs/cgroup"
    ),
    errno.ENOENT: (
        "the controller is not enabled for this group: check that it is listed in "
        "cgroup.controllers and not disabled on the kernel command line (cgroup_disable=)"
    ),
    errno.ENOSPC: (
        "the host allows no more cgroups: raise cgroup.max.descendants / cgroup.max.depth "
        "or wait for running sandboxes to end"
    ),
}
_FIXES[errno.EAGAIN] = _FIXES[errno.ENOSPC]
DEFAULT_FIX = "check the cgroup setup of the host and the kernel log (dmesg)"


def failure(
    action: str, path: str, exc: OSError, hierarchy: Hierarchy, fix: str | None = None
) -> SandboxError:
    """A ``SandboxError`` saying which operation on which file of ``hierarchy`` failed,
    why, and the fix (``fix``, else the one for the errno)."""
    if fix is None:
        fix = process_wide_fix(exc)
    if fix is None and exc.errno in (errno.EACCES, errno.EPERM):
        fix = permission_fix(hierarchy)
    if fix is None:
        fix = _FIXES.get(exc.errno or 0, DEFAULT_FIX)
    return SandboxError(f"cannot {action} {path}: {errno_text(exc)}; {fix}")


def enable(dir_fd: int, controllers: frozenset[str], hierarchy: Hierarchy) -> None:
    """Enable ``controllers`` for the children of the v2 group ``dir_fd``; raises
    ``OSError`` as the kernel refuses (``EBUSY``: processes live in it)."""
    name = CONTROL_FILES[hierarchy.version].subtree_control
    if name is None:
        return
    enabled = set(read_control(dir_fd, name).split())
    needed = sorted(controllers - enabled)
    if needed:
        write_control(dir_fd, name, " ".join(f"+{c}" for c in needed))


def _move_into_leaf(base_fd: int, hierarchy: Hierarchy) -> None:
    """Move every process of the base group into its child ``LEAF`` (made if needed,
    and only then).  A process that exits meanwhile is skipped; raises ``OSError``
    otherwise."""
    pids = read_control(base_fd, "cgroup.procs").split()
    if not pids:
        return
    with contextlib.suppress(FileExistsError):
        os.mkdir(LEAF, 0o755, dir_fd=base_fd)
    leaf_fd = open_dir(LEAF, hierarchy.dev, dir_fd=base_fd)
    try:
        for word in pids:
            try:
                write_control(leaf_fd, "cgroup.procs", word)
            except ProcessLookupError:
                continue
    finally:
        os.close(leaf_fd)


def open_ready_base(hierarchy: Hierarchy, controllers: frozenset[str]) -> int:
    """Open the base of ``hierarchy`` and, on v2, enable ``controllers`` for its children,
    first moving its processes into ``LEAF`` when the kernel asks for it.  Returns the
    base's descriptor (the caller's to close); raises ``SandboxError`` with the fix."""
    path = hierarchy.home
    try:
        base_fd = open_base(hierarchy)
    except OSError as exc:
        raise failure("open the cgroup", path, exc, hierarchy) from exc
    try:
        if hierarchy.version == 2 and controllers:
            _enable_in_base(base_fd, controllers, hierarchy)
    except BaseException:
        os.close(base_fd)
        raise
    return base_fd


def _enable_in_base(base_fd: int, controllers: frozenset[str], hierarchy: Hierarchy) -> None:
    """The v2 part of ``open_ready_base``: unless the base is the hierarchy's root group
    (the only one allowed processes beside children with controllers: it has no
    ``cgroup.type``), move its processes into ``LEAF`` and enable ``controllers``.

    The move comes first, not only on ``EBUSY``: a group with processes where a threaded
    controller (``pids``) is enabled becomes a thread root, and the kernel then accepts
    ``+pids`` but refuses domain controllers (``memory``) below it with ``EOPNOTSUPP``.
    A process that enters the base later (a unit's ``ExecReload=``) is moved by the next
    call."""
    path = os.path.join(hierarchy.home, "cgroup.subtree_control")
    try:
        os.stat("cgroup.type", dir_fd=base_fd, follow_symlinks=False)
        root_group = False
    except FileNotFoundError:
        root_group = True
    except OSError as exc:
        raise failure("read", path, exc, hierarchy) from exc
    for _ in range(_ROUNDS):
        if not root_group:
            try:
                _move_into_leaf(base_fd, hierarchy)
            except OSError as exc:
                leaf = os.path.join(hierarchy.home, LEAF)
                raise failure("move the processes of its group into", leaf, exc, hierarchy) from exc
        try:
            enable(base_fd, controllers, hierarchy)
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or root_group:
                raise failure("enable the controllers in", path, exc, hierarchy) from exc
    raise SandboxError(
        f"cannot enable the controllers in {path}: processes keep entering that group; "
        f"move them into a child group (cgroup v2 gives controllers only to the children "
        f"of a group without processes)"
    )
