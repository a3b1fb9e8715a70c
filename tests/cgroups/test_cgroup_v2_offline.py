# SPDX-License-Identifier: MIT
"""The cgroup code of both versions, run on any host: discovery on mountinfo samples, and
the control-file logic on a hierarchy laid out in a temporary directory.

This project's CI host is cgroup v1 (hybrid: its cgroup2 mount offers only hugetlb), so
``tests/cgroups/test_cgroup.py`` runs the v1 files against the kernel and the v2 ones never.
Here the v2 branches run too, in the spirit of psutil's mocked ``/proc`` files:

* ``parse_mountinfo`` and ``choose`` are pure, and get realistic samples: Debian 12
  (pure v2), this host (hybrid), systemd's legacy layout (pure v1), and escapes;
* every control-file operation is relative to a directory descriptor, and ``open_dir``
  checks only the device number, so a directory in ``tmp_path`` serves as a cgroup
  hierarchy.  A real kernel fills a new group with its control files; here the test
  creates them (empty regular files, as a kernel-made file is there before anything is
  written) and writes the counters a kernel would.  A write never creates a file
  (no ``O_CREAT``), so writing a name the version does not have fails as on a kernel.

The expected names are written out below, not taken from ``_cgroup_files``, so that
these tests check its table rather than repeat it.  This does not replace a real v2
host: what the kernel accepts, refuses or counts is tested there only.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.mountinfo_samples import (
    DEBIAN_12,
    DEBIAN_12_CONTROLLERS,
    LEGACY_V1,
    THIS_HOST,
    THIS_HOST_V1,
)

from pysandbox import _sandbox
from pysandbox._cgroups.mounts import (
    Hierarchy,
    base_of,
    choose,
    hierarchies,
    own_cgroup,
    parse_mountinfo,
)
from pysandbox._cgroups.node import (
    PARENT,
    Node,
    kill_nodes,
    make_node,
    open_cpu_counter,
    open_parent,
    set_limits,
)
from pysandbox._cgroups.usage import CgroupUsage, read_usage
from pysandbox._model.errors import SandboxError
from pysandbox._model.record import replace

pytestmark = pytest.mark.no_bwrap

MiB = 2**20

# -- mountinfo samples ----------------------------------------------------------------------


def test_debian_12_is_one_v2_hierarchy() -> None:
    assert parse_mountinfo(DEBIAN_12) == [
        Hierarchy(2, "/sys/fs/cgroup", os.makedev(0, 26), frozenset())
    ]
    (v2,) = parse_mountinfo(DEBIAN_12)
    v2 = replace(v2, controllers=DEBIAN_12_CONTROLLERS)
    # pids and memory in the one v2 group; no cpuacct: every v2 group counts CPU.
    assert choose([v2]) == {"pids": v2, "memory": v2}


def test_this_hosts_hybrid_uses_v1_for_what_v2_does_not_offer() -> None:
    found = parse_mountinfo(THIS_HOST)
    # Every cgroup mount, the tmpfs above them not; v1 keeps only the controllers used.
    assert [(h.version, h.mountpoint, h.dev) for h in found] == [
        (1, f"/sys/fs/cgroup/{name}", os.makedev(0, minor))
        for minor, name in zip(
            range(29, 38),
            [
                "cpu",
                "cpuacct",
                "cpuset",
                "memory",
                "devices",
                "freezer",
                "blkio",
                "pids",
                "systemd",
            ],
        )
    ] + [(2, "/sys/fs/cgroup/unified", os.makedev(0, 38))]
    by_mount = {h.mountpoint.rsplit("/", 1)[1]: h.controllers for h in found}
    assert by_mount["pids"] == {"pids"} and by_mount["memory"] == {"memory"}
    assert by_mount["cpuacct"] == {"cpuacct"} and by_mount["cpu"] == frozenset()
    # Its cgroup2 root offers only hugetlb: everything comes from v1.
    v2 = found[-1]
    chosen = choose([*found[:-1], replace(v2, controllers=frozenset({"hugetlb"}))])
    assert {c: h.mountpoint for c, h in chosen.items()} == {
        "pids": "/sys/fs/cgroup/pids",
        "memory": "/sys/fs/cgroup/memory",
        "cpuacct": "/sys/fs/cgroup/cpuacct",
    }
    # Were pids offered on v2, one sandbox would mix versions: pids on v2, memory on v1.
    chosen = choose([*found[:-1], replace(v2, controllers=frozenset({"pids"}))])
    assert (chosen["pids"].version, chosen["memory"].version) == (2, 1)


def test_legacy_v1_finds_cpuacct_mounted_with_cpu() -> None:
    chosen = choose(parse_mountinfo(LEGACY_V1))
    assert {c: (h.version, h.mountpoint, h.dev) for c, h in chosen.items()} == {
        "pids": (1, "/sys/fs/cgroup/pids", os.makedev(0, 26)),
        "memory": (1, "/sys/fs/cgroup/memory", os.makedev(0, 24)),
        "cpuacct": (1, "/sys/fs/cgroup/cpu,cpuacct", os.makedev(0, 23)),
    }
    assert chosen["cpuacct"].controllers == {"cpuacct"}


def test_escaped_mount_points_are_decoded() -> None:
    """mountinfo escapes space, tab, newline and backslash as octal: a mount point with
    `` - `` in it cannot be mistaken for the separator."""
    text = (
        "40 22 0:40 / /mnt/cgroup\\040v2 rw,relatime shared:20 master:3 - cgroup2 none rw\n"
        "41 22 0:41 / /mnt/a\\040-\\040b\\134c\\011d rw,relatime - cgroup cgroup rw,pids\n"
        "42 22 0:42 / /mnt/odd\\04 rw - cgroup cgroup rw,memory\n"
    )
    assert [(h.mountpoint, h.dev) for h in parse_mountinfo(text)] == [
        ("/mnt/cgroup v2", os.makedev(0, 40)),
        ("/mnt/a - b\\c\td", os.makedev(0, 41)),
        ("/mnt/odd\\04", os.makedev(0, 42)),  # not a whole escape: kept as it is
    ]


def test_the_mount_under_sys_fs_cgroup_wins_then_the_first_listed() -> None:
    text = (
        "50 22 0:50 / /mnt/elsewhere rw - cgroup2 cgroup2 rw\n"
        "51 22 0:51 / /mnt/pids-too rw - cgroup cgroup rw,pids\n"
        "52 22 0:52 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
        "53 22 0:53 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n"
        "54 22 0:54 / /sys/fs/cgroup/pids-again rw - cgroup cgroup rw,pids\n"
    )
    found = parse_mountinfo(text)
    assert [h.dev for h in found] == [os.makedev(0, minor) for minor in (52, 53, 54, 50, 51)]
    chosen = choose(found)
    assert chosen == {"pids": found[1]}  # the v2 roots offer nothing here


@pytest.mark.parametrize(
    "line",
    [
        "",
        "not a mountinfo line",
        "60 22 0:60 / /x rw cgroup2 cgroup2 rw",  # no separator
        "60 22 zero:60 / /x rw - cgroup2 cgroup2 rw",  # no device number
        "60 22 0:60 / /x rw - cgroup2 cgroup2",  # no super options
        "60 22 0:60 / - cgroup2 cgroup2 rw",  # too few fields before the separator
        "60 22 0:60 / /sys/fs/cgroup/pids rw - tmpfs cgroup rw,pids",  # not a cgroup
    ],
)
def test_malformed_and_other_lines_are_skipped(line: str) -> None:
    assert parse_mountinfo(line + "\n" + DEBIAN_12) == parse_mountinfo(DEBIAN_12)


def test_this_hosts_mountinfo_names_the_mounts_it_finds() -> None:
    """On the running host, every hierarchy parsed is the mount it names: the device
    number read from mountinfo is the one the mount point has."""
    for hierarchy in parse_mountinfo(Path("/proc/self/mountinfo").read_text()):
        assert os.stat(hierarchy.mountpoint).st_dev == hierarchy.dev, hierarchy


# -- a hierarchy in a temporary directory -----------------------------------------------------

#: The control files a kernel puts in a new group, by version (those pysandbox uses).
GROUP_FILES = {
    2: (
        "cgroup.procs",
        "cgroup.kill",
        "cgroup.subtree_control",
        "pids.max",
        "pids.events",
        "memory.max",
        "memory.swap.max",
        "memory.peak",
        "memory.events",
        "cpu.stat",
    ),
    1: (
        "cgroup.procs",
        "pids.max",
        "pids.events",
        "memory.limit_in_bytes",
        "memory.memsw.limit_in_bytes",
        "memory.kmem.tcp.limit_in_bytes",
        "memory.max_usage_in_bytes",
        "memory.failcnt",
        "memory.memsw.failcnt",
        "memory.kmem.tcp.failcnt",
        "memory.oom_control",
        "cpuacct.usage",
    ),
}
#: The controllers of the fake hierarchy: v1 has pids, memory and cpuacct mounted
#: together (``mount -t cgroup -o pids,memory,cpuacct``), v2 offers Debian 12's.
FAKE_CONTROLLERS = {1: frozenset({"pids", "memory", "cpuacct"}), 2: DEBIAN_12_CONTROLLERS}
#: The controllers a sandbox uses from it (v2 counts CPU without cpuacct).
USED = {1: frozenset({"pids", "memory", "cpuacct"}), 2: frozenset({"pids", "memory"})}
GROUP = "pysandbox-1-2-3-abcdef01"


@dataclasses.dataclass
class Fake:
    """A cgroup hierarchy in a temporary directory, and the sandbox's group in it."""

    version: int
    root: Path
    hierarchy: Hierarchy
    node: Node

    @property
    def group(self) -> Path:
        return self.root / PARENT / GROUP

    def write(self, name: str, text: str) -> None:
        """Write a counter the way the kernel would show it."""
        (self.group / name).write_text(text)

    def read(self, name: str) -> str:
        return (self.group / name).read_text()


def lay_out(root: Path, version: int, v1_controllers: frozenset[str] = USED[1]) -> Hierarchy:
    """An empty hierarchy at ``root``, found the way ``discover`` finds one: through a
    mountinfo line (its path escaped, as the kernel writes it) and, on v2, its root's
    ``cgroup.controllers``.  A v1 one has ``v1_controllers`` bound to it."""
    root.mkdir()
    if version == 2:
        (root / "cgroup.controllers").write_text(" ".join(sorted(DEBIAN_12_CONTROLLERS)) + "\n")
        (root / "cgroup.subtree_control").write_text("")
        options = "rw,nsdelegate"
    else:
        options = "rw," + ",".join(sorted(v1_controllers))
    dev = os.stat(root).st_dev
    escaped = str(root).replace("\\", "\\134").replace(" ", "\\040")
    fstype = "cgroup2" if version == 2 else "cgroup"
    line = f"70 22 {os.major(dev)}:{os.minor(dev)} / {escaped} rw - {fstype} {fstype} {options}"
    (hierarchy,) = hierarchies(line)
    return hierarchy


@pytest.fixture(params=[2, 1], ids=["v2", "v1"])
def fake(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Fake]:
    """The sandbox's group made by ``make_node`` in a fake hierarchy (with a space in its
    path), then filled with the empty control files a kernel would create."""
    version: int = request.param
    root = tmp_path / "cgroup fs"
    hierarchy = lay_out(root, version)
    assert hierarchy.controllers == FAKE_CONTROLLERS[version]
    if version == 2:
        # The kernel gives the new parent its own subtree_control.
        (root / PARENT).mkdir()
        (root / PARENT / "cgroup.subtree_control").write_text("")
    node = Node(hierarchy, USED[version])
    try:
        make_node(node, GROUP)
        for name in GROUP_FILES[version]:
            (root / PARENT / GROUP / name).write_text("")
        yield Fake(version, root, hierarchy, node)
    finally:
        node.close()


def test_v1_uses_each_hierarchy_for_its_own_controller(tmp_path: Path) -> None:
    """This host's layout: pids, memory and cpuacct each on a hierarchy of its own.  Each
    limit goes to its own group (a file of another controller is not there), and the
    usage comes from all three: the CPU time from cpuacct's."""
    nodes = []
    try:
        for controller in ("memory", "pids", "cpuacct"):
            hierarchy = lay_out(tmp_path / controller, 1, frozenset({controller}))
            assert hierarchy.controllers == {controller}
            node = Node(hierarchy, hierarchy.controllers)
            nodes.append(node)
            make_node(node, GROUP)
            group = tmp_path / controller / PARENT / GROUP
            for name in GROUP_FILES[1]:
                if name.startswith((f"{controller}.", "cgroup.")):
                    (group / name).write_text("")
        for node in nodes:
            set_limits(node, 7, 50 * MiB)
        assert (tmp_path / "pids" / PARENT / GROUP / "pids.max").read_text() == "7"
        limit = tmp_path / "memory" / PARENT / GROUP / "memory.limit_in_bytes"
        assert limit.read_text() == str(50 * MiB)
        for name, text in HIT[1].items():
            (tmp_path / name.split(".")[0] / PARENT / GROUP / name).write_text(text)
        assert read_usage(nodes) == CgroupUsage(48 * MiB, True, True, 2.5)
        fd = open_cpu_counter(nodes)
        try:
            counter = tmp_path / "cpuacct" / PARENT / GROUP / "cpuacct.usage"
            assert os.readlink(f"/proc/self/fd/{fd}") == str(counter)
        finally:
            os.close(fd)
    finally:
        for node in nodes:
            node.close()


def test_discovery_finds_a_v2_hierarchy_and_its_controllers(tmp_path: Path) -> None:
    """The whole v2 discovery, but for reading /proc: a cgroup2 line of mountinfo, the
    mount point opened and checked by device number, its ``cgroup.controllers`` read."""
    hierarchy = lay_out(tmp_path / "unified v2", 2)
    root = str(tmp_path / "unified v2")
    assert hierarchy == Hierarchy(
        2, root, os.stat(tmp_path).st_dev, DEBIAN_12_CONTROLLERS, base=root
    )
    # Beside this host's v1 mounts (hybrid), v2 now offers pids and memory: it wins.
    chosen = choose([*parse_mountinfo(THIS_HOST_V1), hierarchy])
    assert chosen["pids"] is hierarchy and chosen["memory"] is hierarchy
    assert chosen["cpuacct"].mountpoint == "/sys/fs/cgroup/cpuacct"


def test_a_v2_mount_that_is_not_the_named_mount_is_skipped(tmp_path: Path) -> None:
    """A mount point whose device is not the one mountinfo names (a directory put there
    instead of the mount) is never used."""
    (tmp_path / "cgroup.controllers").write_text("pids memory\n")
    dev = os.stat(tmp_path).st_dev
    other = os.makedev(os.major(dev), os.minor(dev) + 1)
    line = f"70 22 {os.major(other)}:{os.minor(other)} / {tmp_path} rw - cgroup2 cgroup2 rw"
    assert hierarchies(line) == []


def test_the_parent_group_gets_the_controllers_on_v2_only(fake: Fake) -> None:
    """v2 enables pids and memory in the root's and the parent's subtree_control; v1
    has no such file (and needs none: a v1 child has every controller of its mount)."""
    if fake.version == 1:
        assert not (fake.root / "cgroup.subtree_control").exists()
        assert not (fake.root / PARENT / "cgroup.subtree_control").exists()
        return
    for directory in (fake.root, fake.root / PARENT):
        assert (directory / "cgroup.subtree_control").read_text() == "+memory +pids"
    # What is enabled already is not written again.
    for directory in (fake.root, fake.root / PARENT):
        (directory / "cgroup.subtree_control").write_text("cpu memory pids\n")
    os.close(open_parent(fake.hierarchy, frozenset({"pids", "memory"}), create=True))
    for directory in (fake.root, fake.root / PARENT):
        assert (directory / "cgroup.subtree_control").read_text() == "cpu memory pids\n"


def test_v2_without_subtree_control_fails_closed_naming_the_file(tmp_path: Path) -> None:
    hierarchy = lay_out(tmp_path / "v2", 2)
    (tmp_path / "v2" / "cgroup.subtree_control").unlink()
    with pytest.raises(SandboxError, match=r"cgroup\.subtree_control: .* not enabled") as info:
        open_parent(hierarchy, frozenset({"pids"}), create=True)
    assert isinstance(info.value.__cause__, OSError)
    assert info.value.__cause__.errno == errno.ENOENT
    assert not (tmp_path / "v2" / PARENT).exists()


#: The files each cap is written to, by version, and what each must hold afterwards.
LIMIT_FILES = {
    2: {"pids.max": "7", "memory.max": str(50 * MiB), "memory.swap.max": "0"},
    1: {
        "pids.max": "7",
        "memory.limit_in_bytes": str(50 * MiB),
        "memory.memsw.limit_in_bytes": str(50 * MiB),
        "memory.kmem.tcp.limit_in_bytes": str(50 * MiB),
    },
}


def test_limits_are_written_to_the_versions_files(fake: Fake) -> None:
    set_limits(fake.node, 7, 50 * MiB)
    written = {name: fake.read(name) for name in GROUP_FILES[fake.version] if fake.read(name)}
    assert written == LIMIT_FILES[fake.version]


def test_a_process_cap_above_pid_max_limit_is_written_as_it(fake: Fake) -> None:
    set_limits(fake.node, 2**40, None)
    assert fake.read("pids.max") == str(4 * 1024 * 1024)
    assert all(fake.read(name) == "" for name in GROUP_FILES[fake.version] if name != "pids.max")


def test_swap_is_skipped_where_the_kernel_does_not_account_it(fake: Fake) -> None:
    swap = "memory.swap.max" if fake.version == 2 else "memory.memsw.limit_in_bytes"
    (fake.group / swap).unlink()
    set_limits(fake.node, None, 50 * MiB)
    assert not (fake.group / swap).exists()
    assert fake.read("memory.max" if fake.version == 2 else "memory.limit_in_bytes") == str(
        50 * MiB
    )


def test_a_missing_memory_file_fails_closed_naming_it_and_the_fix(fake: Fake) -> None:
    """No memory.max on v2, or no socket-buffer cap on v1: a SandboxError that names the
    file; v1's names the fix for a kernel that cannot cap sockets."""
    name, fix = {
        2: ("memory.max", "not enabled for this group"),
        1: ("memory.kmem.tcp.limit_in_bytes", "cannot cap socket buffers"),
    }[fake.version]
    (fake.group / name).unlink()
    with pytest.raises(SandboxError, match=f"{re.escape(name)}: .*; .*{fix}") as info:
        set_limits(fake.node, None, 50 * MiB)
    assert str(fake.group / name) in str(info.value)


#: Counters as a kernel shows them after a program hit both caps and used 2.5 s of CPU.
HIT = {
    2: {
        "memory.peak": f"{48 * MiB}\n",
        "memory.events": "low 0\nhigh 0\nmax 17\noom 1\noom_kill 1\noom_group_kill 0\n",
        "pids.events": "max 3\n",
        "cpu.stat": "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n"
        "nr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
    },
    1: {
        "memory.max_usage_in_bytes": f"{48 * MiB}\n",
        "memory.failcnt": "17\n",
        "memory.memsw.failcnt": "0\n",
        "memory.kmem.tcp.failcnt": "0\n",
        "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
        "pids.events": "max 3\n",
        "cpuacct.usage": "2500000000\n",
    },
}
#: The same after a calm program: no limit hit, 0.1 s of CPU.
CALM = {
    2: {
        "memory.peak": f"{3 * MiB}\n",
        "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
        "pids.events": "max 0\n",
        "cpu.stat": "usage_usec 100000\nuser_usec 90000\nsystem_usec 10000\n",
    },
    1: {
        "memory.max_usage_in_bytes": f"{3 * MiB}\n",
        "memory.failcnt": "0\n",
        "memory.memsw.failcnt": "0\n",
        "memory.kmem.tcp.failcnt": "0\n",
        "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
        "pids.events": "max 0\n",
        "cpuacct.usage": "100000000\n",
    },
}


@pytest.mark.parametrize(
    ("counters", "usage"),
    [
        (HIT, CgroupUsage(48 * MiB, True, True, 2.5)),
        (CALM, CgroupUsage(3 * MiB, False, False, 0.1)),
    ],
    ids=["hit", "calm"],
)
def test_usage_is_read_from_the_versions_counters(
    fake: Fake, counters: dict[int, dict[str, str]], usage: CgroupUsage
) -> None:
    for name, text in counters[fake.version].items():
        fake.write(name, text)
    assert read_usage([fake.node]) == usage


@pytest.mark.parametrize(
    ("fake", "counter"),
    [
        # v1: one failcnt alone says the memory limit was hit (sockets: their own).
        (1, {"memory.kmem.tcp.failcnt": "2\n"}),
        (1, {"memory.memsw.failcnt": "1\n"}),
        (1, {"memory.oom_control": "oom_kill_disable 0\nunder_oom 1\noom_kill 0\n"}),
        # v2: each of max, oom and oom_kill alone.
        (2, {"memory.events": "low 0\nhigh 0\nmax 1\noom 0\noom_kill 0\n"}),
        (2, {"memory.events": "low 0\nhigh 0\nmax 0\noom 1\noom_kill 0\n"}),
        (2, {"memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 1\n"}),
    ],
    indirect=["fake"],
)
def test_each_memory_counter_alone_says_the_limit_was_hit(
    fake: Fake, counter: dict[str, str]
) -> None:
    for name, text in {**CALM[fake.version], **counter}.items():
        fake.write(name, text)
    assert read_usage([fake.node]).memory_exceeded


def test_counters_a_kernel_lacks_read_as_none(fake: Fake) -> None:
    """Before Linux 5.19 v2 has no memory.peak; without cpuacct v1 has no CPU counter."""
    for name in GROUP_FILES[fake.version]:
        if name != "cgroup.procs":
            (fake.group / name).unlink()
    assert read_usage([fake.node]) == CgroupUsage(None, False, False, None)
    assert open_cpu_counter([fake.node]) == -1


@pytest.mark.parametrize(
    ("fake", "counter"),
    [
        (1, "2500000000\n"),
        # usage_usec comes first in cpu.stat; the C core looks for it on any line.
        (2, "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\nnr_periods 0\n"),
        (2, "user_usec 2000000\nsystem_usec 500000\nusage_usec 2500000\nnr_periods 0\n"),
    ],
    indirect=["fake"],
    ids=["v1", "v2", "v2-usage-later"],
)
def test_the_c_core_reads_the_cpu_counter_opened_here(fake: Fake, counter: str) -> None:
    """The descriptor ``open_cpu_counter`` hands to the C core is the version's counter,
    and the C core's CPU watcher parses it: 2.5 s counted there kill a program that has
    used none under ``cpu_limit=1``, and ``tree_cpu_time`` is the group's figure."""
    name = "cpu.stat" if fake.version == 2 else "cpuacct.usage"
    fake.write(name, counter)
    fd = open_cpu_counter([fake.node])
    try:
        assert fd >= 0
        assert os.readlink(f"/proc/self/fd/{fd}") == str(fake.group / name)
        assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
        assert fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
        raw = _sandbox.run(["/bin/sleep", "30"], [], timeout=30.0, cpu_limit=1.0, cgroup_cpu_fd=fd)
    finally:
        if fd >= 0:
            os.close(fd)
    assert raw["cpu_exceeded"]
    assert raw["tree_cpu_time"] == 2.5
    assert os.waitstatus_to_exitcode(raw["wait_status"]) == -signal.SIGKILL
    assert raw["wall_time"] < 20


def test_the_c_core_counts_a_calm_groups_cpu_without_killing(fake: Fake) -> None:
    for name, text in CALM[fake.version].items():
        fake.write(name, text)
    fd = open_cpu_counter([fake.node])
    try:
        raw = _sandbox.run(["/bin/sleep", "1"], [], timeout=30.0, cpu_limit=1.0, cgroup_cpu_fd=fd)
    finally:
        os.close(fd)
    assert not raw["cpu_exceeded"]
    assert os.waitstatus_to_exitcode(raw["wait_status"]) == 0
    assert raw["tree_cpu_time"] >= 0.1


def test_kill_writes_cgroup_kill_on_v2_only(fake: Fake) -> None:
    """v2 kills the whole group through ``cgroup.kill`` first; v1 has no such file (one
    is put here, and stays untouched).  The fake group lists no process, so nothing is
    signalled: killing for real is tested against the kernel in test_cgroup.py."""
    if fake.version == 1:
        (fake.group / "cgroup.kill").write_text("")
    assert kill_nodes([fake.node], timeout=0.1)
    assert fake.read("cgroup.kill") == ("1" if fake.version == 2 else "")


# -- where the groups go on v2: the caller's own group ---------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0::/system.slice/app.service\n", "/system.slice/app.service"),
        # A hybrid host lists v1 hierarchies first; only the 0:: line is v2.
        ("4:memory:/x\n1:name=systemd:/y\n0::/user.slice\n", "/user.slice"),
        ("0::/\n", "/"),
        ("0::/gone (deleted)\n", None),
        ("4:memory:/x\n", None),
    ],
)
def test_own_cgroup_is_the_v2_line(text: str, expected: str | None) -> None:
    assert own_cgroup(text) == expected


V2 = Hierarchy(2, "/sys/fs/cgroup", os.makedev(0, 26), frozenset())


@pytest.mark.parametrize(
    ("hierarchy", "own", "expected"),
    [
        # A systemd service, and a delegated user scope: their own group.
        (V2, "/system.slice/app.service", "/sys/fs/cgroup/system.slice/app.service"),
        (
            V2,
            "/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope",
            "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope",
        ),
        # Moved into the leaf already: the base is the leaf's parent.
        (
            V2,
            "/system.slice/app.service/pysandbox-callers",
            "/sys/fs/cgroup/system.slice/app.service",
        ),
        (V2, "/pysandbox-callers", "/sys/fs/cgroup"),
        (V2, "/", "/sys/fs/cgroup"),
        # A container's subtree mounted at /sys/fs/cgroup (root field of mountinfo).
        (replace(V2, root="/docker/abc"), "/docker/abc/app", "/sys/fs/cgroup/app"),
        (replace(V2, root="/docker/abc"), "/docker/abc", "/sys/fs/cgroup"),
        # Outside the mounted subtree, or unknown: no base.
        (replace(V2, root="/docker/abc"), "/docker/other", None),
        (V2, "/../../x", None),
        (V2, None, None),
        # v1: always the mount point.
        (Hierarchy(1, "/sys/fs/cgroup/pids", 1, frozenset({"pids"})), None, "/sys/fs/cgroup/pids"),
    ],
)
def test_the_base_is_the_callers_own_group_on_v2(
    hierarchy: Hierarchy, own: str | None, expected: str | None
) -> None:
    assert base_of(hierarchy, own) == expected


def test_a_v2_base_below_the_mount_gets_its_own_controllers(tmp_path: Path) -> None:
    """The controllers of a v2 hierarchy are those the caller's group offers, not the
    root's: a user's delegated scope may have fewer."""
    root = tmp_path / "v2"
    lay_out(root, 2)
    scope = root / "user.slice" / "run-r1.scope"
    scope.mkdir(parents=True)
    (scope / "cgroup.controllers").write_text("memory pids\n")
    dev = os.stat(root).st_dev
    line = f"70 22 {os.major(dev)}:{os.minor(dev)} / {root} rw - cgroup2 cgroup2 rw"
    (found,) = hierarchies(line, "/user.slice/run-r1.scope")
    assert (found.home, found.controllers) == (str(scope), frozenset({"memory", "pids"}))
    assert hierarchies(line, "/user.slice/absent.scope") == []
