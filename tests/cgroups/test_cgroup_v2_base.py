# SPDX-License-Identifier: MIT
"""cgroup v2's rule on processes, against the real kernel: the base of the sandboxes'
groups (the caller's own group) gives controllers to its children only once no process
lives in it, so its processes move into ``pysandbox-callers`` first; a non-root caller
does this in a group delegated to it, and is told the fix in one that is not.

The group stands in for a systemd service's group: made under this host's cgroup v2
mount (here a hybrid's, whose ``hugetlb`` controller obeys the same rule as ``pids``
and ``memory``), holding a real process, and for the non-root cases handed over the way
systemd delegates one (``Delegate=yes``: the directory and its ``cgroup.procs``,
``cgroup.subtree_control`` and ``cgroup.threads`` chowned to the user).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.callers import UNPRIVILEGED_UID, run_installed

from pysandbox._cgroups.base import open_ready_base
from pysandbox._cgroups.mounts import LEAF, Hierarchy, base_of, own_cgroup, parse_mountinfo

pytestmark = pytest.mark.no_bwrap

#: Domain controllers a test group may use, the first one its parent offers: for a
#: domain controller the kernel refuses processes beside children (threaded ones, such
#: as pids, have a rule of their own, tested below).
CANDIDATES = ("memory", "hugetlb", "io")


def _v2_mount() -> Hierarchy | None:
    with open("/proc/self/mountinfo") as mountinfo:
        found = [h for h in parse_mountinfo(mountinfo.read()) if h.version == 2]
    return found[0] if found else None


def _controller_for(parent: Path, candidates: tuple[str, ...] = CANDIDATES) -> str | None:
    """A controller the children of ``parent`` get (enabled in it here if need be)."""
    offered = (parent / "cgroup.controllers").read_text().split()
    enabled = (parent / "cgroup.subtree_control").read_text().split()
    for name in candidates:
        if name in enabled:
            return name
    for name in candidates:
        if name in offered:
            with contextlib.suppress(OSError):
                (parent / "cgroup.subtree_control").write_text(f"+{name}")
                return name
    return None


@contextlib.contextmanager
def service_group(
    candidates: tuple[str, ...] = CANDIDATES,
) -> Iterator[tuple[Hierarchy, Path, str]]:
    """A fresh group at the top of the v2 hierarchy, as a service's own group; removed
    afterwards with everything below it.  Yields the hierarchy (base = the group), the
    group's path and a controller its children can get."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to make a group standing for a service's")
    mount = _v2_mount()
    if mount is None:
        pytest.skip("no cgroup v2 hierarchy is mounted")
    top = Path(mount.mountpoint)
    controller = _controller_for(top, candidates)
    if controller is None:
        pytest.skip(f"the cgroup v2 root offers none of {candidates}")
    group = top / f"pysandbox-test-{secrets.token_hex(4)}"
    group.mkdir()
    offered = (group / "cgroup.controllers").read_text().split()
    assert controller in offered
    hierarchy = Hierarchy(2, mount.mountpoint, mount.dev, frozenset(offered), base=str(group))
    try:
        yield hierarchy, group, controller
    finally:
        _remove_tree(group)


def _remove_tree(group: Path) -> None:
    """Kill what is left in ``group`` and below, and remove the directories."""
    for directory in [*sorted(group.rglob("*"), key=lambda p: -len(p.parts)), group]:
        if not directory.is_dir():
            continue
        for word in (directory / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(word), 9)
        deadline = time.monotonic() + 10
        while True:
            try:
                directory.rmdir()
                break
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)


def cgroup_of(pid: int) -> str | None:
    with open(f"/proc/{pid}/cgroup") as text:
        return own_cgroup(text.read())


def test_the_processes_of_the_base_move_into_a_leaf_before_the_controllers() -> None:
    """A service's group with two processes: enabling a controller for its children is
    refused by the kernel (EBUSY) until both are moved into the leaf."""
    with service_group() as (hierarchy, group, controller):
        workers = [subprocess.Popen(["sleep", "60"]) for _ in range(2)]
        try:
            for worker in workers:
                (group / "cgroup.procs").write_text(str(worker.pid))
            with pytest.raises(OSError) as refused:
                (group / "cgroup.subtree_control").write_text(f"+{controller}")
            assert refused.value.errno == errno.EBUSY  # the rule this code is for
            os.close(open_ready_base(hierarchy, frozenset({controller})))
            assert (group / "cgroup.subtree_control").read_text().split() == [controller]
            assert (group / "cgroup.procs").read_text() == ""
            mount = Path(hierarchy.mountpoint)
            leaf = "/" + str((group / LEAF).relative_to(mount))
            assert [cgroup_of(worker.pid) for worker in workers] == [leaf, leaf]
            # Found again from inside the leaf: the base is the leaf's parent.
            assert base_of(hierarchy, leaf) == str(group)
            # Once ready, a second caller changes nothing.
            os.close(open_ready_base(hierarchy, frozenset({controller})))
            assert sorted(p.name for p in group.iterdir() if p.is_dir()) == [LEAF]
        finally:
            for worker in workers:
                worker.kill()
                worker.wait()


def test_pids_first_does_not_leave_the_base_a_thread_root() -> None:
    """The probe tries pids alone first.  The kernel lets a group with processes enable
    pids (a threaded controller), and such a group is a thread root: a domain controller
    (memory) is then refused below it with EOPNOTSUPP.  The processes move first, so the
    sandboxes' parent gets both."""
    with service_group(("pids",)) as (hierarchy, group, _pids):
        offered = (group / "cgroup.controllers").read_text().split()
        domain = next((name for name in CANDIDATES if name in offered), None)
        if domain is None:
            pytest.skip(f"the cgroup v2 root gives pids but none of {CANDIDATES}")
        worker = subprocess.Popen(["sleep", "60"])
        try:
            (group / "cgroup.procs").write_text(str(worker.pid))
            os.close(open_ready_base(hierarchy, frozenset({"pids"})))
            os.close(open_ready_base(hierarchy, frozenset({"pids", domain})))
            parent = group / "pysandbox"
            parent.mkdir()
            (parent / "cgroup.subtree_control").write_text(f"+pids +{domain}")
            assert sorted((parent / "cgroup.subtree_control").read_text().split()) == sorted(
                ["pids", domain]
            )
        finally:
            worker.kill()
            worker.wait()


#: Runs as root until it has joined the group (argv[1]), then as UNPRIVILEGED_UID:
#: readies the group as its base, and says where it is and what was enabled or why not.
NON_ROOT_CALLER = """
import json, os, sys
from pysandbox._cgroups.base import open_ready_base
from pysandbox._cgroups.mounts import Hierarchy, own_cgroup
from pysandbox._model.errors import SandboxError
mountpoint, dev, group, controller, uid = sys.argv[1:]
with open(os.path.join(group, "cgroup.procs"), "w") as procs:
    procs.write(str(os.getpid()))
os.setgroups([])
os.setgid(int(uid))
os.setuid(int(uid))
hierarchy = Hierarchy(2, mountpoint, int(dev), frozenset([controller]), base=group)
try:
    os.close(open_ready_base(hierarchy, frozenset([controller])))
    error = None
except SandboxError as exc:
    error = str(exc)
with open("/proc/self/cgroup") as text:
    print(json.dumps([own_cgroup(text.read()), error]))
"""


def _call_as_non_root(hierarchy: Hierarchy, group: Path, controller: str) -> list[str | None]:
    args = (hierarchy.mountpoint, str(hierarchy.dev), str(group), controller)
    answer: list[str | None] = run_installed(NON_ROOT_CALLER, *args, str(UNPRIVILEGED_UID))
    return answer


def test_a_non_root_caller_readies_a_group_delegated_to_it() -> None:
    with service_group() as (hierarchy, group, controller):
        for path in (group, *(group / name for name in ("cgroup.procs", "cgroup.threads"))):
            os.chown(path, UNPRIVILEGED_UID, UNPRIVILEGED_UID)
        os.chown(group / "cgroup.subtree_control", UNPRIVILEGED_UID, UNPRIVILEGED_UID)
        where, error = _call_as_non_root(hierarchy, group, controller)
        assert error is None
        assert where == "/" + str((group / LEAF).relative_to(hierarchy.mountpoint))
        assert (group / "cgroup.subtree_control").read_text().split() == [controller]
        assert (group / LEAF).stat().st_uid == UNPRIVILEGED_UID


def test_a_non_root_caller_in_a_group_not_delegated_is_told_the_fix() -> None:
    with service_group() as (hierarchy, group, controller):
        where, error = _call_as_non_root(hierarchy, group, controller)
        assert where == "/" + str(group.relative_to(hierarchy.mountpoint))  # not moved
        assert error is not None
        assert f"{group} is not delegated to uid {UNPRIVILEGED_UID}" in error
        assert "Delegate=yes" in error and "systemd-run --user --scope -p Delegate=yes" in error
        assert (group / "cgroup.subtree_control").read_text() == ""
        assert not (group / LEAF).exists()
