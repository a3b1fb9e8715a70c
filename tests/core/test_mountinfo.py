# SPDX-License-Identifier: MIT
"""The one mountinfo parser (``_host/mountinfo.py``) answers as the two it replaced did.

Before the layers, the readable-path check and the cgroup finder each read
``/proc/self/mountinfo`` with a parser of its own, with different tolerance.  Both are
kept here as oracles (``old_kernel_mount_points``, ``old_parse_mountinfo``), written as
they were, and fed the offline cgroup samples, this host's own mountinfo, and lines with
escapes and damage: the merged parser must give what each gave.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.mountinfo_samples import DEBIAN_12, LEGACY_V1, THIS_HOST

from pysandbox._cgroups.mounts import CPUACCT, LIMITED, Hierarchy, parse_mountinfo
from pysandbox._host import mountinfo
from pysandbox._host.mountinfo import KERNEL_FILESYSTEMS, unescape

pytestmark = pytest.mark.no_bwrap

EDGES = "\n".join(
    [
        r"50 31 0:99 / /srv/with\040space rw - proc proc rw",
        r"51 31 0:98 / /srv/tab\011here rw shared:7 master:2 - sysfs sysfs rw",
        r"52 31 bad / /srv/nodev rw - cgroup2 cgroup2 rw",
        r"53 31 0:97 / /srv/short rw - cgroup2",
        r"54 31 0:96 /sub /srv/v1 rw - cgroup cgroup rw,pids,memory",
        "garbage",
        "",
        r"56 31 0:94 / /srv/\134back rw - tmpfs tmpfs rw",
        "57 31 0:93 / /srv/nomark rw proc proc rw",
    ]
)
SAMPLES = [DEBIAN_12, LEGACY_V1, THIS_HOST, EDGES, Path("/proc/self/mountinfo").read_text()]


def old_kernel_mount_points(text: str) -> list[str]:
    points = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        fstype = fields[fields.index("-") + 1]
        if fstype in KERNEL_FILESYSTEMS:
            points.append(os.path.normpath(unescape(fields[4])))
    return points


def old_parse_mountinfo(text: str) -> list[Hierarchy]:
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
        mountpoint, root = unescape(fields[4]), unescape(fields[3])
        if fstype == "cgroup":
            controllers = frozenset(tail_fields[2].split(",")) & {*LIMITED, CPUACCT}
            version = 1
        else:
            controllers, version = frozenset(), 2
        rank = 0 if mountpoint.startswith("/sys/fs/cgroup") else 1
        found.append(
            (rank, Hierarchy(version, mountpoint, os.makedev(major, minor), controllers, root=root))
        )
    return [hierarchy for _rank, hierarchy in sorted(found, key=lambda item: item[0])]


def kernel_points(text: str) -> list[str]:
    return [
        os.path.normpath(m.mountpoint)
        for m in mountinfo.parse(text)
        if m.fstype in KERNEL_FILESYSTEMS
    ]


@pytest.mark.parametrize("text", SAMPLES, ids=["debian12", "legacy", "host", "edges", "live"])
def test_the_kernel_mount_points_are_the_old_ones(text: str) -> None:
    assert kernel_points(text) == old_kernel_mount_points(text)


@pytest.mark.parametrize("text", SAMPLES, ids=["debian12", "legacy", "host", "edges", "live"])
def test_the_cgroup_hierarchies_are_the_old_ones(text: str) -> None:
    assert parse_mountinfo(text) == old_parse_mountinfo(text)


def test_the_edges_are_read_as_the_kernel_wrote_them() -> None:
    points = kernel_points(EDGES)
    assert points == ["/srv/with space", "/srv/tab\there", "/srv/nodev", "/srv/short", "/srv/v1"]
    (v1,) = parse_mountinfo(EDGES)
    assert (v1.mountpoint, v1.root, v1.controllers) == ("/srv/v1", "/sub", {"pids", "memory"})
    (tmpfs,) = [m for m in mountinfo.parse(EDGES) if m.fstype == "tmpfs"]
    assert tmpfs.mountpoint == "/srv/\\back"


def test_the_live_answer_is_read_from_this_process() -> None:
    live = mountinfo.kernel_mount_points()
    assert "/proc" in live
    assert live == old_kernel_mount_points(Path("/proc/self/mountinfo").read_text())
