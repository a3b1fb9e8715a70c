# SPDX-License-Identifier: MIT
"""The C core's ``cgroup_dir_fd``: the child is created in a cgroup v2 group by
``clone3(CLONE_INTO_CGROUP)``, or joins it through ``cgroup.procs`` where clone3 is
refused, and never runs outside it.

Against the kernel: each test makes a real group in the cgroup2 hierarchy (on this
project's hybrid hosts the controller-less one at ``/sys/fs/cgroup/unified``), below the
test process's own group, and removes it afterwards.  Where no cgroup2 hierarchy is
mounted, or this user cannot make a group in it, the tests skip, saying which.  The
child's group is read on the host's side: the child's ``/proc/self/cgroup`` (it runs in
no cgroup namespace of its own), or the group's ``cgroup.procs`` while the sandbox runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.processes import children_of
from support.timing import slow

from pysandbox import _sandbox
from pysandbox._api import run as _run
from pysandbox._host.mountinfo import unescape
from pysandbox._launch import command as _command
from pysandbox._launch.failures import parse_init_report, spawn_failure
from pysandbox._launch.lifeline import lifeline
from pysandbox._launch.plan import INIT_REPORT_CAP, REPORT_CAP
from pysandbox._launch.rlimits import within_own_limits

#: The C core's names of the two steps that may refuse a group.
AT_CLONE = "joining the sandbox's cgroup at clone"
OPENING_PROCS = "opening the sandbox's cgroup.procs"
CAT_CGROUP = ["/bin/cat", "/proc/self/cgroup"]


@dataclasses.dataclass(frozen=True)
class Group:
    """A cgroup: its directory, and its path as ``/proc/<pid>/cgroup`` shows it."""

    dir: Path
    path: str

    def below(self, name: str) -> Group:
        return Group(self.dir / name, self.path.rstrip("/") + "/" + name)

    def procs(self) -> set[int]:
        return {int(pid) for pid in (self.dir / "cgroup.procs").read_text().split()}


def mounts(fstype: str) -> Iterator[tuple[str, str, list[str]]]:
    """(root, mount point, super options) of each mount of ``fstype``."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        before, _, after = line.partition(" - ")
        fields, kind = before.split(), after.split()
        if len(fields) >= 5 and len(kind) == 3 and kind[0] == fstype:
            yield unescape(fields[3]), unescape(fields[4]), kind[2].split(",")


def own_group(controller: str) -> Group | str:
    """This process's own group in the hierarchy of ``controller`` ("" for cgroup v2),
    or why there is none to be seen."""
    paths = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(","):
            paths[name] = path
    if controller not in paths:
        return f"this process is in no {controller or 'cgroup v2'} group"
    fstype = "cgroup2" if controller == "" else "cgroup"
    for root, mountpoint, options in mounts(fstype):
        if controller and controller not in options:
            continue
        own = paths[controller]
        if own == root or own.startswith(root.rstrip("/") + "/"):
            return Group(Path(mountpoint, own[len(root) :].lstrip("/")), own)
    return f"no {fstype} hierarchy is mounted that shows this process's own group"


@contextlib.contextmanager
def made_group(parent: Group) -> Iterator[Group]:
    """A new empty group below ``parent``; any process left in it is killed, and it is
    removed, on exit.  Skips when this user cannot make it."""
    group = parent.below(f"pysandbox-test-clone3-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        group.dir.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot make a cgroup in {parent.dir}: {exc}")
    try:
        yield group
    finally:
        deadline = time.monotonic() + slow(5.0)
        while True:
            for pid in group.procs():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            try:
                group.dir.rmdir()
                break
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)


def found(group: Group | str) -> Group:
    if isinstance(group, str):
        pytest.skip(group)
    return group


@pytest.fixture
def group() -> Iterator[Group]:
    """A fresh group below this process's own cgroup v2 group."""
    with made_group(found(own_group(""))) as made:
        yield made


def open_dir(path: Path) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


@pytest.fixture
def group_fd(group: Group) -> Iterator[int]:
    fd = open_dir(group.dir)
    try:
        yield fd
    finally:
        os.close(fd)


def v2_path(cgroup_text: bytes | str | None) -> str:
    """The group of a ``/proc/<pid>/cgroup`` text's ``0::`` line."""
    text = cgroup_text.decode() if isinstance(cgroup_text, bytes) else str(cgroup_text)
    (line,) = [line for line in text.splitlines() if line.startswith("0::")]
    return line[3:]


def assert_no_child_left() -> None:
    assert children_of(os.getpid()) == []


# -- born in the group -------------------------------------------------------------------


@pytest.mark.no_bwrap
def test_the_child_is_born_in_the_group(group: Group, group_fd: int) -> None:
    """clone3 puts the child in the group, the result says so, and the group is empty
    again once the call has returned."""
    raw = _sandbox.run(CAT_CGROUP, [], timeout=30.0, cgroup_dir_fd=group_fd)
    assert os.waitstatus_to_exitcode(raw["wait_status"]) == 0, raw["stderr"]
    assert v2_path(raw["stdout"]) == group.path
    assert raw["cgroup_joined_at_clone"] is True
    assert group.procs() == set()
    assert_no_child_left()


@pytest.mark.no_bwrap
def test_without_a_group_the_child_is_where_the_caller_is() -> None:
    raw = _sandbox.run(CAT_CGROUP, [], timeout=30.0)
    assert raw["cgroup_joined_at_clone"] is False
    assert raw["stdout"] == Path("/proc/self/cgroup").read_bytes()


@pytest.mark.no_bwrap
def test_a_v1_group_and_a_v2_group_are_joined_in_one_call(group: Group, group_fd: int) -> None:
    """A hybrid host's sandbox is born in its v2 group and joins its v1 groups by
    writing to their cgroup.procs, in the same spawn."""
    with made_group(found(own_group("pids"))) as v1:
        procs = os.open(v1.dir / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        try:
            raw = _sandbox.run(
                CAT_CGROUP, [], timeout=30.0, cgroup_procs=[procs], cgroup_dir_fd=group_fd
            )
        finally:
            os.close(procs)
    lines = raw["stdout"].decode().splitlines()
    assert [line.split(":", 2)[2] for line in lines if line.split(":")[1] == "pids"] == [v1.path]
    assert v2_path(raw["stdout"]) == group.path
    assert raw["cgroup_joined_at_clone"] is True


def sandbox_tree() -> set[int]:
    """This process's children and everything below them."""
    seen, todo = set(), children_of(os.getpid())
    while todo:
        pid = todo.pop()
        seen.add(pid)
        todo += children_of(pid)
    return seen


def test_every_process_of_a_real_sandbox_is_in_the_group(group: Group, group_fd: int) -> None:
    """pysandbox's own bwrap command line, born in the group: while the program runs,
    the group holds exactly bwrap and every process below it, as the host sees them."""
    plan, _ = _run.build_plan(_run.Call(["/bin/sh", "-c", "echo ready; read line; exit 0"]))
    seen: list[tuple[set[int], set[int]]] = []

    def on_stdout(chunk: bytes) -> bytes | None:
        if b"ready" in chunk and not seen:
            seen.append((group.procs(), sandbox_tree()))
        return None

    rlimits = [limit for limit in plan.rlimits if limit[0] != resource.RLIMIT_NPROC]
    with lifeline() as (lifeline_read, _):
        pass_fds = _command.open_pass_fds(plan, lifeline_read, None)
        try:
            raw = _sandbox.run(
                _command.command_line(plan),
                [],
                rlimits=within_own_limits(rlimits),
                pass_fds=pass_fds,
                captures=[REPORT_CAP, INIT_REPORT_CAP, *plan.capture_caps],
                stdin_callback=on_stdout,
                timeout=60.0,
                cgroup_dir_fd=group_fd,
            )
        finally:
            for fd in pass_fds:
                if fd != lifeline_read:
                    os.close(fd)
    report = parse_init_report(raw["captures"][1])
    assert report is not None and report.wait_status == 0, raw["stderr"]
    assert raw["cgroup_joined_at_clone"] is True
    ((in_group, tree),) = seen
    assert len(tree) >= 3, tree  # bwrap, the init and sh at least
    assert in_group == tree
    assert group.procs() == set()
    assert_no_child_left()


# -- failing closed ------------------------------------------------------------------------

#: What refuses each kind of fd that is not a live cgroup v2 group: clone3's errno, and
#: the fallback's (it checks what clone3 would), at the stage each names.
REFUSALS = {
    "regular file": ((errno.EBADF, AT_CLONE), (errno.EBADF, OPENING_PROCS)),
    "plain directory": ((errno.EBADF, AT_CLONE), (errno.EBADF, OPENING_PROCS)),
    "v1 group": ((errno.EBADF, AT_CLONE), (errno.EBADF, OPENING_PROCS)),
    "removed group": ((errno.ENOENT, AT_CLONE), (errno.ENOENT, OPENING_PROCS)),
}


def refused_paths(tmp_path: Path, group: Group) -> dict[str, str]:
    """A path of each kind in ``REFUSALS`` ("" where this host has none): the removed
    group is made and removed by whoever opens it (``open_refused``)."""
    (tmp_path / "file").write_text("")
    v1 = own_group("pids")
    return {
        "regular file": str(tmp_path / "file"),
        "plain directory": str(tmp_path),
        "v1 group": "" if isinstance(v1, str) else str(v1.dir),
        "removed group": str(group.dir / "removed"),
    }


def open_refused(kind: str, path: str) -> int:
    if kind == "removed group":
        os.mkdir(path)
        try:
            return open_dir(Path(path))
        finally:
            os.rmdir(path)
    return os.open(path, os.O_RDONLY | os.O_CLOEXEC)


@pytest.mark.no_bwrap
@pytest.mark.parametrize("kind", list(REFUSALS))
def test_anything_but_a_live_v2_group_fails_closed_and_nothing_runs(
    kind: str, tmp_path: Path, group: Group
) -> None:
    path = refused_paths(tmp_path, group)[kind]
    if not path:
        pytest.skip(f"no {kind} on this host")
    fd = open_refused(kind, path)
    marker = tmp_path / "ran"
    try:
        with pytest.raises(OSError) as info:
            _sandbox.run(["/bin/sh", "-c", f": > {marker}"], [], timeout=30.0, cgroup_dir_fd=fd)
    finally:
        os.close(fd)
    code, stage = REFUSALS[kind][0]
    assert info.value.errno == code and stage in str(info.value)
    assert not marker.exists()
    assert_no_child_left()


@pytest.mark.no_bwrap
def test_a_refused_group_is_blamed_not_bwrap(tmp_path: Path, group: Group) -> None:
    """The launch path's error for a group removed under it names the group, not a
    missing bwrap (which ENOENT from the exec would mean)."""
    fd = open_refused("removed group", refused_paths(tmp_path, group)["removed group"])
    try:
        with pytest.raises(OSError) as info:
            _sandbox.run(["/bin/true"], [], timeout=30.0, cgroup_dir_fd=fd)
    finally:
        os.close(fd)
    assert info.value.errno == errno.ENOENT
    error = str(spawn_failure(info.value))
    assert AT_CLONE in error and "the group was removed" in error and "bwrap" not in error


@pytest.mark.no_bwrap
def test_a_hundred_calls_leak_no_fd_and_leave_nothing_in_the_group(
    tmp_path: Path, group: Group, group_fd: int
) -> None:
    """Spawns born in the group and spawns refused alike close every fd they made (the
    pidfd, the pipes), reap every child, and leave the group empty."""
    (tmp_path / "file").write_text("")
    bad = os.open(tmp_path / "file", os.O_RDONLY | os.O_CLOEXEC)
    try:
        _sandbox.run(["/bin/true"], [], timeout=30.0, cgroup_dir_fd=group_fd)
        before = set(os.listdir("/proc/self/fd"))
        for i in range(100):
            if i % 2:
                with pytest.raises(OSError):
                    _sandbox.run(["/bin/true"], [], timeout=30.0, cgroup_dir_fd=bad)
            else:
                raw = _sandbox.run(["/bin/true"], [], timeout=30.0, cgroup_dir_fd=group_fd)
                assert raw["cgroup_joined_at_clone"] and raw["wait_status"] == 0
        after = set(os.listdir("/proc/self/fd"))
    finally:
        os.close(bad)
    assert after == before
    assert group.procs() == set()
    assert_no_child_left()


@pytest.mark.no_bwrap
def test_a_group_out_of_pids_refuses_the_birth(tmp_path: Path) -> None:
    """A group whose pids.max is 0 refuses the clone itself: the child is created in
    the group (a move through cgroup.procs ignores pids.max, so a child that joined by
    writing would have run).  Needs v2's pids controller, so the group is made at the
    cgroup2 root, where a pure v2 host enables it for the groups below."""
    root = next((Group(Path(at), "/") for top, at, _ in mounts("cgroup2") if top == "/"), None)
    if root is None:
        pytest.skip("no cgroup2 hierarchy is mounted from its root")
    if "pids" not in (root.dir / "cgroup.subtree_control").read_text().split():
        pytest.skip(f"the cgroup2 root {root.dir} offers no pids controller to its groups")
    marker = tmp_path / "ran"
    with made_group(root) as group:
        (group.dir / "pids.max").write_text("0")
        fd = open_dir(group.dir)
        try:
            with pytest.raises(OSError) as info:
                _sandbox.run(["/bin/sh", "-c", f": > {marker}"], [], timeout=30.0, cgroup_dir_fd=fd)
        finally:
            os.close(fd)
        events = (group.dir / "pids.events").read_text().split()
    assert info.value.errno == errno.EAGAIN and AT_CLONE in str(info.value)
    assert events[events.index("max") + 1] == "1"
    assert not marker.exists()
    assert_no_child_left()


# -- where clone3 is refused -----------------------------------------------------------------

#: Installs pysandbox's own syscall filter, which answers ENOSYS to clone3 as Docker's
#: default profile does, then spawns into the group and tries each refused fd; prints
#: what it saw as JSON.
FILTERED_CALLER = textwrap.dedent(
    """
    import ctypes, errno, json, os, sys
    from pysandbox import _sandbox

    group, calls, refused = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
    program = _sandbox.seccomp_program()

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    filter_ = Program(len(program) // 8, program)
    if libc.prctl(38, 1, 0, 0, 0) or libc.prctl(22, 2, ctypes.byref(filter_), 0, 0):
        raise OSError(ctypes.get_errno(), "cannot install the filter")
    libc.syscall(435, None, 0)  # clone3 without arguments: EINVAL unless filtered
    seen = {"clone3": errno.errorcode.get(ctypes.get_errno()), "runs": [], "refused": {}}
    fd = os.open(group, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    for _ in range(calls):
        raw = _sandbox.run(["/bin/cat", "/proc/self/cgroup"], [], timeout=30.0, cgroup_dir_fd=fd)
        seen["runs"].append(
            [raw["stdout"].decode(), raw["cgroup_joined_at_clone"], raw["wait_status"]]
        )
    for kind, path in refused.items():
        if kind == "removed group":
            os.mkdir(path)
            bad = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            os.rmdir(path)
        else:
            bad = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            _sandbox.run(["/bin/true"], [], timeout=30.0, cgroup_dir_fd=bad)
            seen["refused"][kind] = "ran"
        except OSError as exc:
            seen["refused"][kind] = [exc.errno, str(exc)]
    print(json.dumps(seen))
    """
)


def filtered_caller(
    group: Group, calls: int, refused: dict[str, str], *wrapper: str
) -> dict[str, Any]:
    """What ``FILTERED_CALLER`` saw, run in a child process (a filter is for good)."""
    argv = [sys.executable, "-c", FILTERED_CALLER, str(group.dir), str(calls), json.dumps(refused)]
    proc = subprocess.run(
        [*wrapper, *argv], capture_output=True, text=True, timeout=slow(60.0), check=False
    )
    assert proc.returncode == 0, proc.stderr
    seen: dict[str, Any] = json.loads(proc.stdout)
    return seen


@pytest.mark.no_bwrap
def test_where_seccomp_refuses_clone3_the_child_joins_by_writing(
    tmp_path: Path, group: Group
) -> None:
    refused = {kind: path for kind, path in refused_paths(tmp_path, group).items() if path}
    seen = filtered_caller(group, 3, refused)
    assert seen["clone3"] == "ENOSYS", "the filter did not refuse clone3"
    assert len(seen["runs"]) == 3
    for stdout, joined_at_clone, status in seen["runs"]:
        assert v2_path(stdout) == group.path
        assert joined_at_clone is False
        assert status == 0
    # The fallback refuses what clone3 would have refused, before anything runs.
    assert set(seen["refused"]) == set(refused)
    for kind, outcome in seen["refused"].items():
        code, stage = REFUSALS[kind][1]
        assert outcome != "ran" and outcome[0] == code and stage in outcome[1], (kind, outcome)
    assert group.procs() == set()


@pytest.mark.no_bwrap
def test_a_refused_clone3_is_asked_once_per_process(tmp_path: Path, group: Group) -> None:
    """Once clone3 answered ENOSYS, the process's later spawns go straight to the write:
    strace counts the C core's clone3 calls in one spawn and in four (the C library's
    own, which start the watchdog thread of each run with CLONE_THREAD, left out)."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed")
    counts = []
    for calls in (1, 4):
        log = tmp_path / f"strace-{calls}"
        filtered_caller(group, calls, {}, strace, "-f", "-qq", "-e", "trace=clone3", "-o", str(log))
        lines = log.read_text().splitlines()
        counts.append(
            sum(
                "clone3(" in line and "clone3(NULL" not in line and "CLONE_THREAD" not in line
                for line in lines
            )
        )
    assert counts == [1, 1]
