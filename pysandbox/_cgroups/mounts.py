# SPDX-License-Identifier: MIT
"""Where the cgroup hierarchies are, and where in each the sandboxes' groups go: found in
``/proc/self/mountinfo`` and ``/proc/self/cgroup``, not by guessing paths.

cgroup v2 is one hierarchy (most hosts); cgroup v1 is one hierarchy per controller, or
per set of controllers mounted together; a hybrid host has both.  For each controller a
sandbox may need, ``discover()`` chooses the v2 hierarchy when it offers the controller
where the groups go, else the v1 hierarchy the controller is bound to.

Where the groups go (a hierarchy's ``base``): on v1, the root of the hierarchy.  On v2,
the caller's own cgroup, as ``/proc/self/cgroup`` names it: that is where systemd lets a
service or a user session make groups (a cgroup delegated to it with ``Delegate=yes``),
and where a container's cgroup namespace puts it.  When the caller was already moved
into the leaf ``LEAF`` (see ``_cgroup``), the base is the leaf's parent.

``parse_mountinfo``, ``own_cgroup``, ``base_of`` and ``choose`` are pure functions of
their input, so the discovery of a v1, v2 or hybrid host can be tested on any host; only
``discover`` reads the running system (mountinfo, /proc/self/cgroup, and the
``cgroup.controllers`` file of each v2 base).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable

from .._host import mountinfo
from .._host.mountinfo import MOUNTINFO
from .._model.record import record, replace
from .files import open_dir, read_bytes, read_control

__all__ = [
    "CPUACCT",
    "LEAF",
    "LIMITED",
    "Hierarchy",
    "base_of",
    "choose",
    "discover",
    "hierarchies",
    "missing",
    "open_base",
    "own_cgroup",
    "parse_mountinfo",
    "with_controllers",
]

CGROUP = "/proc/self/cgroup"
#: The child group of a v2 base that holds the processes that lived in the base itself,
#: the caller among them: cgroup v2 enables controllers for the children of a group only
#: when no process lives in it (the root group excepted).  ``_cgroup`` makes it when
#: needed; a process in it has the leaf's parent as its base.
LEAF = "pysandbox-callers"
#: The controllers that carry a sandbox's limits.
LIMITED = ("pids", "memory")
#: The controller giving a group's CPU time on cgroup v1 (v2 counts CPU in every group).
CPUACCT = "cpuacct"


@record
class Hierarchy:
    """One mounted cgroup hierarchy."""

    version: int
    #: Where it is mounted (decoded from mountinfo) and the device number of that mount.
    mountpoint: str
    dev: int
    #: The controllers it offers, among ``LIMITED`` and ``CPUACCT`` (v1: bound to it, as
    #: mountinfo lists them; v2: listed in its base's ``cgroup.controllers``, which
    #: ``with_controllers`` reads: empty until then).
    controllers: frozenset[str]
    #: The directory whose child ``pysandbox`` holds the sandboxes' groups: the mount
    #: point on v1, the caller's own cgroup on v2 (``base_of``); "" for the mount point.
    base: str = ""
    #: The group of the hierarchy that is mounted at the mount point (mountinfo's root
    #: field): "/" unless a subtree is mounted, as in a container.
    root: str = "/"

    @property
    def home(self) -> str:
        """The absolute path of the directory the sandboxes' parent group goes in."""
        return self.base or self.mountpoint


def parse_mountinfo(text: str) -> list[Hierarchy]:
    """Every cgroup hierarchy mounted, as the mountinfo ``text`` lists them, the preferred
    first: those under /sys/fs/cgroup, then the others, each in the listed order.

    A line is ``ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE
    SOURCE SUPER-OPTIONS`` (proc(5)); a v1 hierarchy's controllers are among its super
    options.  Lines that are not cgroup mounts, or are malformed, are skipped.
    """
    found: list[tuple[int, Hierarchy]] = []
    for mount in mountinfo.parse(text):
        if mount.fstype not in ("cgroup", "cgroup2") or mount.dev is None:
            continue
        if not mount.super_options:
            continue
        if mount.fstype == "cgroup":
            controllers = frozenset(mount.super_options) & {*LIMITED, CPUACCT}
            version = 1
        else:
            controllers = frozenset()
            version = 2
        rank = 0 if mount.mountpoint.startswith("/sys/fs/cgroup") else 1
        hierarchy = Hierarchy(version, mount.mountpoint, mount.dev, controllers, root=mount.root)
        found.append((rank, hierarchy))
    return [hierarchy for _rank, hierarchy in sorted(found, key=lambda item: item[0])]


def own_cgroup(text: str) -> str | None:
    """The caller's cgroup v2 group, from the ``text`` of ``/proc/self/cgroup`` (its
    ``0::PATH`` line); None without one, or when it was removed (`` (deleted)``)."""
    for line in text.splitlines():
        if line.startswith("0::/"):
            path = line[3:]
            return None if path.endswith(" (deleted)") else path
    return None


def base_of(hierarchy: Hierarchy, own: str | None) -> str | None:
    """Where the sandboxes' groups go in ``hierarchy``: v1, its mount point; v2, the
    caller's own group ``own`` (the parent of ``LEAF`` when ``own`` is that leaf) under
    the mount point.  None on v2 when ``own`` is unknown or not inside the mounted
    subtree (a process outside a container's cgroup namespace sees ``/..`` paths)."""
    if hierarchy.version == 1:
        return hierarchy.mountpoint
    if own is None:
        return None
    parts = [part for part in own.split("/") if part]
    mounted = [part for part in hierarchy.root.split("/") if part]
    if parts[: len(mounted)] != mounted or ".." in parts:
        return None
    parts = parts[len(mounted) :]
    if parts and parts[-1] == LEAF:
        parts.pop()
    return os.path.join(hierarchy.mountpoint, *parts)


def open_base(hierarchy: Hierarchy) -> int:
    """Open ``hierarchy.home``: the mount point checked to be the very mount mountinfo
    names, then each directory below it opened on its own (no symlink followed, the
    same mount throughout).  The descriptor is the caller's to close."""
    fd = open_dir(hierarchy.mountpoint, hierarchy.dev)
    relative = os.path.relpath(hierarchy.home, hierarchy.mountpoint)
    for part in [] if relative == "." else relative.split("/"):
        try:
            below = open_dir(part, hierarchy.dev, dir_fd=fd)
        finally:
            os.close(fd)
        fd = below
    return fd


def with_controllers(hierarchy: Hierarchy, own: str | None = "/") -> Hierarchy | None:
    """``hierarchy`` with its ``base`` set (``base_of``) and, on v2, the controllers its
    base's ``cgroup.controllers`` lists (none when that file cannot be read).  None when
    its mount point cannot be opened as the very mount mountinfo names, or a v2 base
    cannot be found."""
    base = base_of(hierarchy, own)
    if base is None:
        return None
    hierarchy = replace(hierarchy, base=base)
    try:
        fd = open_base(hierarchy)
    except OSError:
        return None
    try:
        if hierarchy.version == 1:
            return hierarchy
        try:
            controllers = frozenset(read_control(fd, "cgroup.controllers").split())
        except OSError:
            controllers = frozenset()
    finally:
        os.close(fd)
    return replace(hierarchy, controllers=controllers)


def hierarchies(mountinfo: str, own: str | None = "/") -> list[Hierarchy]:
    """The hierarchies of ``parse_mountinfo(mountinfo)`` that can be opened, each with
    its base for a caller whose v2 group is ``own``, and each v2 one with the
    controllers its base offers."""
    found = (with_controllers(hierarchy, own) for hierarchy in parse_mountinfo(mountinfo))
    return [hierarchy for hierarchy in found if hierarchy is not None]


def choose(found: Iterable[Hierarchy]) -> dict[str, Hierarchy]:
    """The hierarchy to use for each of pids, memory and (v1 only) cpuacct, among
    ``found`` (in order of preference, v2 controllers filled in).

    For each controller: the first v2 hierarchy when it offers the controller, else the
    first v1 hierarchy bound to it.  cpuacct is only looked for on v1: v2 counts CPU in
    every group.
    """
    v1: dict[str, Hierarchy] = {}
    v2: Hierarchy | None = None
    for hierarchy in found:
        if hierarchy.version == 2:
            v2 = v2 or hierarchy
        else:
            for controller in hierarchy.controllers:
                v1.setdefault(controller, hierarchy)
    chosen: dict[str, Hierarchy] = {}
    for controller in LIMITED:
        if v2 is not None and controller in v2.controllers:
            chosen[controller] = v2
        elif controller in v1:
            chosen[controller] = v1[controller]
    if CPUACCT in v1:
        chosen[CPUACCT] = v1[CPUACCT]
    return chosen


_discovered: dict[str, Hierarchy] | None = None
_discover_lock = threading.Lock()


def _read_text(path: str) -> str:
    """A /proc file's text; "" when it cannot be read."""
    try:
        return read_bytes(path, None).decode("utf-8", "surrogateescape")
    except OSError:
        return ""


def discover() -> dict[str, Hierarchy]:
    """``choose`` among this host's hierarchies, from ``/proc/self/mountinfo`` and (for
    the v2 base) ``/proc/self/cgroup``; cached per process (none found when mountinfo
    cannot be read)."""
    global _discovered
    with _discover_lock:
        if _discovered is None:
            own = own_cgroup(_read_text(CGROUP))
            _discovered = choose(hierarchies(_read_text(MOUNTINFO), own))
        return dict(_discovered)


def missing(controller: str) -> str:
    """Why ``controller`` ("pids", "memory", or "pids and memory") cannot be used at all,
    and the fix."""
    plural = "s" if " " in controller else ""
    v2 = next((h for h in parse_mountinfo(_read_text(MOUNTINFO)) if h.version == 2), None)
    own = own_cgroup(_read_text(CGROUP))
    base = base_of(v2, own) if v2 is not None else None
    where = (
        f"not in the cgroup.controllers of this process's cgroup v2 group {base}"
        if base is not None
        else "and no cgroup v2 group of this process was found"
    )
    return (
        f"no cgroup hierarchy offers the {controller} controller{plural} here (not mounted as "
        f"cgroup v1, {where}): on cgroup v2, have {controller} delegated to this process's "
        f"group (systemd: Delegate=yes in its unit, or systemd-run --user --scope -p "
        f"Delegate=yes -- COMMAND) or enabled in its parents' cgroup.subtree_control"
    )
