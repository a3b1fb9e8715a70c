"""Where the cgroup hierarchies are: found in ``/proc/self/mountinfo``, not by guessing
paths.

cgroup v2 is one hierarchy (most hosts); cgroup v1 is one hierarchy per controller, or
per set of controllers mounted together; a hybrid host has both.  For each controller a
sandbox may need, ``discover()`` chooses the v2 hierarchy when its root offers the
controller, else the v1 hierarchy it is bound to.

``parse_mountinfo`` and ``choose`` are pure functions of their input, so the discovery
of a v1, v2 or hybrid host can be tested on any host; only ``discover`` reads the running
system (mountinfo, and the ``cgroup.controllers`` file of each v2 root).
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Iterable

from ._cgroup_files import open_dir, read_bytes, read_control

__all__ = [
    "CPUACCT",
    "LIMITED",
    "Hierarchy",
    "choose",
    "discover",
    "hierarchies",
    "missing",
    "parse_mountinfo",
    "unescape",
    "with_controllers",
]

MOUNTINFO = "/proc/self/mountinfo"
#: The controllers that carry a sandbox's limits.
LIMITED = ("pids", "memory")
#: The controller giving a group's CPU time on cgroup v1 (v2 counts CPU in every group).
CPUACCT = "cpuacct"


@dataclasses.dataclass(frozen=True)
class Hierarchy:
    """One mounted cgroup hierarchy."""

    version: int
    #: Where it is mounted (decoded from mountinfo) and the device number of that mount.
    mountpoint: str
    dev: int
    #: The controllers it offers, among ``LIMITED`` and ``CPUACCT`` (v1: bound to it, as
    #: mountinfo lists them; v2: listed in its root's ``cgroup.controllers``, which
    #: ``with_controllers`` reads: empty until then).
    controllers: frozenset[str]


def unescape(field: str) -> str:
    """A mountinfo path field with its octal escapes (``\\040`` for a space) decoded."""
    if "\\" not in field:
        return field
    out = bytearray()
    raw = field.encode("utf-8", "surrogateescape")
    i = 0
    while i < len(raw):
        if raw[i] == 0x5C and raw[i + 1 : i + 4].isdigit() and len(raw[i + 1 : i + 4]) == 3:
            out.append(int(raw[i + 1 : i + 4], 8) & 0xFF)
            i += 4
        else:
            out.append(raw[i])
            i += 1
    return out.decode("utf-8", "surrogateescape")


def parse_mountinfo(text: str) -> list[Hierarchy]:
    """Every cgroup hierarchy mounted, as the mountinfo ``text`` lists them, the preferred
    first: those under /sys/fs/cgroup, then the others, each in the listed order.

    A line is ``ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE
    SOURCE SUPER-OPTIONS`` (proc(5)); a v1 hierarchy's controllers are among its super
    options.  Lines that are not cgroup mounts, or are malformed, are skipped.
    """
    found: list[tuple[int, Hierarchy]] = []
    for line in text.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, tail_fields = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(tail_fields) < 3:
            continue
        fstype = tail_fields[0]
        if fstype not in ("cgroup", "cgroup2"):
            continue
        try:
            major, minor = (int(part) for part in fields[2].split(":"))
        except ValueError:
            continue
        mountpoint = unescape(fields[4])
        if fstype == "cgroup":
            controllers = frozenset(tail_fields[2].split(",")) & {*LIMITED, CPUACCT}
            version = 1
        else:
            controllers = frozenset()
            version = 2
        rank = 0 if mountpoint.startswith("/sys/fs/cgroup") else 1
        found.append((rank, Hierarchy(version, mountpoint, os.makedev(major, minor), controllers)))
    return [hierarchy for _rank, hierarchy in sorted(found, key=lambda item: item[0])]


def with_controllers(hierarchy: Hierarchy) -> Hierarchy | None:
    """A v2 hierarchy with the controllers its root's ``cgroup.controllers`` lists (none
    when that file cannot be read); None when its mount point cannot be opened as the
    very mount mountinfo names.  A v1 hierarchy is returned as it is."""
    if hierarchy.version == 1:
        return hierarchy
    try:
        root_fd = open_dir(hierarchy.mountpoint, hierarchy.dev)
    except OSError:
        return None
    try:
        controllers = frozenset(read_control(root_fd, "cgroup.controllers").split())
    except OSError:
        controllers = frozenset()
    finally:
        os.close(root_fd)
    return dataclasses.replace(hierarchy, controllers=controllers)


def hierarchies(mountinfo: str) -> list[Hierarchy]:
    """The hierarchies of ``parse_mountinfo(mountinfo)`` that can be opened, each v2 one
    with its controllers read from its root."""
    found = (with_controllers(hierarchy) for hierarchy in parse_mountinfo(mountinfo))
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


def discover() -> dict[str, Hierarchy]:
    """``choose`` among this host's hierarchies, from ``/proc/self/mountinfo``; cached per
    process (none found when mountinfo cannot be read)."""
    global _discovered
    with _discover_lock:
        if _discovered is None:
            try:
                text = read_bytes(MOUNTINFO, None).decode("utf-8", "surrogateescape")
            except OSError:
                text = ""
            _discovered = choose(hierarchies(text))
        return dict(_discovered)


def missing(controller: str) -> str:
    """Why ``controller`` ("pids", "memory", or "pids and memory") cannot be used at all,
    and the fix."""
    plural = "s" if " " in controller else ""
    return (
        f"no cgroup hierarchy offers the {controller} controller{plural} (not mounted as "
        f"cgroup v1, and not in the cgroup v2 root's cgroup.controllers): enable {controller} "
        f"in the kernel and mount it, or run without the per-sandbox {controller} limit{plural}"
    )
