# SPDX-License-Identifier: MIT
"""The one reader of ``/proc/self/mountinfo``: what is mounted where, as the kernel says.

A line is ``ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE
SUPER-OPTIONS`` (proc(5)), its path fields with octal escapes (``\\040`` for a space).
``parse`` keeps every line with at least the five fields before the separator and a
filesystem type after it, so that a reader that must see every kernel filesystem (the
readable-path check) misses none; a device number it cannot read is None, and the
cgroup reader skips such a line.
"""

from __future__ import annotations

import os

from .._model.record import record

__all__ = ["KERNEL_FILESYSTEMS", "MOUNTINFO", "Mount", "kernel_mount_points", "parse", "unescape"]

MOUNTINFO = "/proc/self/mountinfo"

#: Filesystems whose files are the kernel's state (processes, devices, cgroups,
#: namespaces...), wherever they are mounted.
KERNEL_FILESYSTEMS = frozenset(
    {
        "binfmt_misc",
        "bpf",
        "cgroup",
        "cgroup2",
        "configfs",
        "debugfs",
        "devpts",
        "devtmpfs",
        "efivarfs",
        "fusectl",
        "mqueue",
        "nsfs",
        "proc",
        "pstore",
        "securityfs",
        "sysfs",
        "tracefs",
    }
)


@record
class Mount:
    """One line of mountinfo, its paths unescaped."""

    #: The filesystem's device number; None when the line's ``MAJOR:MINOR`` is not one.
    dev: int | None
    #: The directory of the filesystem that is mounted (``/`` for its whole).
    root: str
    mountpoint: str
    fstype: str
    source: str
    super_options: tuple[str, ...]


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


def _dev(field: str) -> int | None:
    try:
        major, minor = (int(part) for part in field.split(":"))
    except ValueError:
        return None
    return os.makedev(major, minor)


def parse(text: str) -> list[Mount]:
    """Every mount that ``text`` (mountinfo's) lists, in its order; malformed lines are
    skipped."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        separator = fields.index("-")
        head, tail = fields[:separator], fields[separator + 1 :]
        if len(head) < 5 or not tail:
            continue
        mounts.append(
            Mount(
                dev=_dev(head[2]),
                root=unescape(head[3]),
                mountpoint=unescape(head[4]),
                fstype=tail[0],
                source=unescape(tail[1]) if len(tail) > 1 else "",
                super_options=tuple(tail[2].split(",")) if len(tail) > 2 else (),
            )
        )
    return mounts


def read() -> list[Mount]:
    """The mounts of this process's mount namespace."""
    with open(MOUNTINFO, encoding="utf-8", errors="surrogateescape") as mountinfo:
        return parse(mountinfo.read())


def kernel_mount_points() -> list[str]:
    """Where the host (this process's mount namespace) has a kernel filesystem mounted; a
    bind of ``/proc`` to another place is one too."""
    return [
        os.path.normpath(mount.mountpoint) for mount in read() if mount.fstype in KERNEL_FILESYSTEMS
    ]
