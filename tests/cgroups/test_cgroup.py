# SPDX-License-Identifier: MIT
"""Per-sandbox control groups (``pysandbox._cgroups.group``), against the real kernel.

No bwrap: the processes are moved into the group the way the C core's spawn child will
do it, by writing ``b"0"`` into a ``procs_fds`` descriptor before (or right after) exec.
Every test is checked afterwards to have left no group of this process behind.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.callers import run_installed
from support.timing import KILL_LATENCY

import pysandbox
from pysandbox._cgroups import group as group_module
from pysandbox._cgroups.ahead import drain
from pysandbox._cgroups.group import SandboxCgroup
from pysandbox._cgroups.mounts import discover
from pysandbox._cgroups.node import PARENT
from pysandbox._cgroups.probe import probe
from pysandbox._cgroups.usage import CgroupUsage, shmem
from pysandbox._model.errors import SandboxError

pytestmark = pytest.mark.no_bwrap

SUPPORT = probe()
MiB = 2**20


def requires(*controllers: str) -> None:
    """Skip, with the probe's own reason, unless this host can make these groups."""
    if not all(getattr(SUPPORT, controller) for controller in controllers):
        pytest.skip(f"no per-sandbox cgroup here: {SUPPORT.reason}")


def parents() -> list[Path]:
    """The parent ``pysandbox`` group in every hierarchy a sandbox may use."""
    mounts = {hierarchy.home for hierarchy in discover().values()}
    return [Path(mount, PARENT) for mount in sorted(mounts)]


def groups_of(pid: int | None) -> list[Path]:
    """The groups of process ``pid`` (by their name; of any process for None) that exist
    now, in any hierarchy.  A name is only as unique as a pid: a process that died
    without removing its groups (``kill -9``) leaves them to whoever gets its pid next,
    so compare with the groups that existed before."""
    prefix = "pysandbox-" if pid is None else f"pysandbox-{pid}-"
    found = []
    for parent in parents():
        with contextlib.suppress(FileNotFoundError):
            found += [
                entry
                for entry in parent.iterdir()
                if entry.is_dir() and entry.name.startswith(prefix)
            ]
    return found


@pytest.fixture(autouse=True)
def _nothing_left_behind() -> Iterator[None]:
    """Every test: no group of this process is left in the parent's listing afterwards."""
    before = set(groups_of(os.getpid()))
    yield
    assert drain(30), "the reaper did not finish"
    assert set(groups_of(os.getpid())) - before == set()


def members(group: SandboxCgroup) -> list[set[int]]:
    """The pids listed in the group's ``cgroup.procs``, one set per hierarchy."""
    return [
        {int(pid) for pid in Path(path, "cgroup.procs").read_text().split()} for path in group.paths
    ]


def start_inside(
    group: SandboxCgroup, code: str, *args: str, **options: object
) -> subprocess.Popen:
    """Start ``python -c code`` moved into the group before exec, as the C core will do."""
    fds = group.procs_fds

    def join() -> None:
        for fd in fds:
            os.write(fd, b"0")

    return subprocess.Popen(  # type: ignore[call-overload]
        [sys.executable, "-c", code, *args], preexec_fn=join, **options
    )


def gone(pid: int) -> bool:
    """The process no longer runs: reaped, or a zombie waiting for its parent."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


#: Forks until the kernel refuses, prints how many forks succeeded and the errno, and
#: keeps its children until stdin closes.
FORKER = """
import os, sys, time
count = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        count += 1
except OSError as exc:
    print(count, exc.errno, flush=True)
sys.stdin.read()
"""

#: Starts a thread that waits for ever (for FORKER: a process of two tasks).
THREAD_THEN = (
    "import threading\nthreading.Thread(target=threading.Event().wait, daemon=True).start()\n"
)

#: Starts threads until the kernel refuses, and prints how many started.
THREADER = """
import threading
stop = threading.Event()
count = 0
try:
    while True:
        threading.Thread(target=stop.wait, daemon=True).start()
        count += 1
except RuntimeError:
    print(count, flush=True)
stop.set()
"""


# -- the probe and the arguments ---------------------------------------------------------


def test_probe_says_what_is_supported_and_why_not() -> None:
    assert probe() is SUPPORT  # cached
    assert SUPPORT.version in (1, 2, None)
    if SUPPORT.pids and SUPPORT.memory:
        assert SUPPORT.reason == ""
    else:
        assert SUPPORT.reason
    with pytest.raises(dataclasses.FrozenInstanceError):
        SUPPORT.pids = False  # type: ignore[misc]


def test_probe_leaves_no_trial_group(tmp_path: Path) -> None:
    """A fresh process probes (nothing cached); none of its trial groups remain."""
    requires("pids")
    code = "import os; from pysandbox._cgroups.probe import probe; print(os.getpid(), probe().pids)"
    before = set(groups_of(None))
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(Path(pysandbox.__file__).parents[1])},
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.split()
    assert out[1] == "True"
    assert set(groups_of(int(out[0]))) - before == set()


#: A fresh process's first confinement, with the probe made to fail if it were called.
FIRST_CONFINEMENT = """
import json
from pysandbox._cgroups import probe
from pysandbox._launch.confine import confine
probe._probe = None
with confine(processes=8, memory_total=2**26, rlimits=[]) as confinement:
    made = probe.probe()
print(json.dumps([confinement.processes_by, confinement.memory_by, made.version, made.reason]))
"""


def test_a_first_run_makes_its_group_instead_of_trial_groups() -> None:
    """A process's first run makes its group with both limits before any probe: made, it
    answers the probe as the two trial groups would have, and none is made."""
    requires("pids", "memory")
    processes_by, memory_by, version, reason = run_installed(FIRST_CONFINEMENT)
    assert processes_by.startswith(f"cgroup v{SUPPORT.version} pids controller, this sandbox")
    assert memory_by.startswith(f"cgroup v{SUPPORT.version} memory controller, this sandbox")
    assert [version, reason] == [SUPPORT.version, SUPPORT.reason]


@pytest.mark.parametrize("value", [True, 1.5, "8", b"8"])
def test_limits_of_the_wrong_type_are_refused(value: object) -> None:
    with pytest.raises(TypeError, match="processes"):
        SandboxCgroup(processes=value, memory=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="memory"):
        SandboxCgroup(processes=None, memory=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [0, -1, 2**62 + 1])
def test_limits_out_of_range_are_refused(value: int) -> None:
    with pytest.raises(ValueError, match="processes"):
        SandboxCgroup(processes=value, memory=None)
    with pytest.raises(ValueError, match="memory"):
        SandboxCgroup(processes=None, memory=value)


def test_no_limit_makes_no_group() -> None:
    with SandboxCgroup(processes=None, memory=None) as group:
        assert group.procs_fds == [] and group.paths == []
        assert group.usage() == CgroupUsage(None, False, False, None)


def test_non_root_caller_is_told_why_and_the_fix() -> None:
    """A non-root caller cannot make cgroups: the probe says so, and a group asked for
    anyway raises SandboxError naming the file and the fix (the caller fails closed)."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to drop to nobody")
    code = """
import json, os
from pysandbox._cgroups.group import SandboxCgroup
from pysandbox._cgroups.probe import probe
from pysandbox._model.errors import SandboxError
os.setgroups([])
os.setgid(65534)
os.setuid(65534)
support = probe()
try:
    with SandboxCgroup(processes=8, memory=64 * 2**20):
        error = None
except SandboxError as exc:
    error = str(exc)
print(json.dumps([support.pids, support.memory, support.version, support.reason, error]))
"""
    # The interpreter may live where nobody cannot reach it (/root/.pyenv): start as
    # root, import, then drop to nobody before anything touches a cgroup.
    pids, memory, version, reason, error = run_installed(code, timeout=30)
    assert (pids, memory, version) == (False, False, SUPPORT.version)
    # The fix names both ways to get cgroups: root, or a delegated cgroup v2 group.
    expected = "only root" if SUPPORT.version == 1 else "not delegated to uid 65534"
    assert expected in reason and "Delegate=yes" in reason
    assert error is not None and "/sys/fs/cgroup" in error
    assert "systemd-run --user --scope -p Delegate=yes -- COMMAND" in error


# -- making and removing -------------------------------------------------------------------


def test_create_and_remove_leaves_nothing_behind() -> None:
    requires("pids", "memory")
    with SandboxCgroup(processes=16, memory=64 * MiB) as group:
        paths = group.paths
        limited = {discover()[controller] for controller in ("pids", "memory")}
        if {hierarchy.version for hierarchy in limited} == {2}:
            assert len(paths) == 1  # one v2 group, which counts CPU itself: no cpuacct
        else:
            # One group per hierarchy (v1: pids and memory), and cpuacct when mounted.
            assert len(limited) <= len(paths) <= len(limited) + 1
        assert {Path(path).parent for path in paths} == set(parents())
        for path in paths:
            assert Path(path).is_dir() and not Path(path).is_symlink()
        assert Path(paths[0]).name.startswith(f"pysandbox-{os.getpid()}-")
        assert len({Path(path).name for path in paths}) == 1
        assert sorted(groups_of(os.getpid())) == sorted(Path(path) for path in paths)
    assert not any(Path(path).exists() for path in paths)
    assert group.procs_fds == []


def test_limits_are_set() -> None:
    requires("pids", "memory")
    with SandboxCgroup(processes=7, memory=50 * MiB) as group:
        files = {name: Path(path, name) for path in group.paths for name in os.listdir(path)}
        assert files["pids.max"].read_text().strip() == "7"
        if SUPPORT.version == 1:
            assert int(files["memory.limit_in_bytes"].read_text()) == 50 * MiB
            if "memory.memsw.limit_in_bytes" in files:
                assert int(files["memory.memsw.limit_in_bytes"].read_text()) == 50 * MiB
            # Socket buffers: v1 charges them only under a limit of their own.
            assert int(files["memory.kmem.tcp.limit_in_bytes"].read_text()) == 50 * MiB
        else:
            assert int(files["memory.max"].read_text()) == 50 * MiB
            if "memory.swap.max" in files:
                assert files["memory.swap.max"].read_text().strip() == "0"


def test_a_process_cap_above_the_kernels_maximum_is_the_maximum() -> None:
    """pids.max takes at most PID_MAX_LIMIT; no group can hold more tasks anyway."""
    requires("pids")
    with SandboxCgroup(processes=2**40, memory=None) as group:
        (pids_max,) = (Path(p, "pids.max") for p in group.paths if Path(p, "pids.max").exists())
        assert pids_max.read_text().strip() == str(4 * 1024 * 1024)


def test_an_exception_inside_removes_the_group() -> None:
    requires("pids")
    with pytest.raises(KeyError), SandboxCgroup(processes=4, memory=None) as group:
        paths = group.paths
        assert paths
        raise KeyError("boom")
    assert not any(Path(path).exists() for path in paths)


@pytest.mark.parametrize("exception", [SandboxError("cannot set"), KeyboardInterrupt()])
def test_a_failure_while_entering_removes_what_was_made(
    exception: BaseException, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fail after every directory is made (the kernel is real; only our own step is
    replaced): the exception propagates and nothing is left behind."""
    requires("pids", "memory")
    made: list[str] = []
    group = SandboxCgroup(processes=4, memory=64 * MiB)

    def fail(node: object, processes: object, memory: object) -> None:
        made.extend(group.paths)
        raise exception

    monkeypatch.setattr(group_module, "set_limits", fail)
    with pytest.raises(type(exception)):
        group.__enter__()
    assert made and not any(Path(path).exists() for path in made)
    assert group.procs_fds == []


def test_a_group_is_entered_once() -> None:
    requires("pids")
    group = SandboxCgroup(processes=4, memory=None)
    with pytest.raises(RuntimeError):
        group.usage()
    with group, pytest.raises(RuntimeError):
        group.__enter__()


def test_procs_fds_are_write_only_close_on_exec_and_closed_at_exit() -> None:
    requires("pids", "memory")
    with SandboxCgroup(processes=4, memory=64 * MiB) as group:
        fds = group.procs_fds
        assert len(fds) == len(group.paths)
        for fd, path in zip(fds, group.paths):
            assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY
            assert fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
            assert os.readlink(f"/proc/self/fd/{fd}") == os.path.join(path, "cgroup.procs")
    for fd, path in zip(fds, group.paths):
        with contextlib.suppress(FileNotFoundError):
            assert os.readlink(f"/proc/self/fd/{fd}") != os.path.join(path, "cgroup.procs")


# -- joining, and the limits holding --------------------------------------------------------


def test_a_child_writing_to_an_inherited_fd_is_listed_in_the_group() -> None:
    """The child moves itself by writing b"0" to the descriptors it inherited."""
    requires("pids", "memory")
    code = """
import os, sys
for fd in sys.argv[1:]:
    os.write(int(fd), b"0")
print("in", flush=True)
sys.stdin.read()
"""
    with SandboxCgroup(processes=8, memory=64 * MiB) as group:
        fds = group.procs_fds
        child = subprocess.Popen(
            [sys.executable, "-c", code, *map(str, fds)],
            pass_fds=fds,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None and child.stdout.readline() == "in\n"
            assert all(child.pid in pids for pids in members(group))
            name = Path(group.paths[0]).name
            own = Path(f"/proc/{child.pid}/cgroup").read_text()
            assert own.count(f"/{PARENT}/{name}\n") == len(group.paths)
        finally:
            child.communicate("", timeout=10)
    assert child.returncode == 0


def test_pids_max_holds_for_forks() -> None:
    requires("pids")
    with SandboxCgroup(processes=6, memory=None) as group:
        assert not group.usage().pids_exceeded
        forker = start_inside(
            group, FORKER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            assert forker.stdout is not None
            count, error = map(int, forker.stdout.readline().split())
            assert (count, error) == (5, errno.EAGAIN)  # 6 = the forker + 5 children
            assert group.usage().pids_exceeded
            assert len(members(group)[0]) == 6
            # The host can still fork while the group is full.
            subprocess.run([sys.executable, "-c", "pass"], check=True, timeout=30)
        finally:
            assert group.kill()
            forker.communicate(timeout=10)
    assert group.usage().pids_exceeded


def test_pids_max_counts_threads() -> None:
    requires("pids")
    with SandboxCgroup(processes=6, memory=None) as group:
        result = start_inside(group, THREADER, stdout=subprocess.PIPE, text=True)
        out, _ = result.communicate(timeout=30)
        assert out.split() == ["5"]
        assert group.usage().pids_exceeded


def test_memory_limit_holds() -> None:
    requires("memory")
    limit = 48 * MiB
    code = """
chunks = []
for i in range(256):
    chunks.append(bytes([i % 256]) * 2**20)
print("survived", flush=True)
"""
    with SandboxCgroup(processes=None, memory=limit) as group:
        result = start_inside(group, code, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = result.communicate(timeout=30)
        assert b"survived" not in out
        assert result.returncode == -signal.SIGKILL or (
            result.returncode == 1 and b"MemoryError" in err
        ), (result.returncode, err)
        usage = group.usage()
    assert usage.memory_exceeded
    assert usage.peak_memory is not None and limit * 3 // 4 <= usage.peak_memory <= limit


def test_peak_memory_and_cpu_time_are_reported() -> None:
    requires("memory")
    size = 64 * MiB
    code = f"data = bytes([1]) * {size}\nprint(len(data))"
    with SandboxCgroup(processes=None, memory=256 * MiB) as group:
        result = start_inside(group, code, stdout=subprocess.PIPE, text=True)
        assert result.communicate(timeout=30)[0].strip() == str(size)
        assert result.returncode == 0
    usage = group.usage()  # after exit: the snapshot taken before removal
    assert usage.peak_memory is not None and usage.peak_memory >= size
    assert not usage.memory_exceeded and not usage.pids_exceeded
    if usage.cpu_time is not None:
        assert 0 < usage.cpu_time < 30


def test_tmpfs_pages_count_against_the_memory_limit() -> None:
    """Writing a file on a tmpfs (/dev/shm) is memory: past the limit the writer dies
    or its write fails, and the group says the limit was hit."""
    requires("memory")
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm here")
    path = f"/dev/shm/pysandbox-test-{os.getpid()}-{secrets.token_hex(4)}"
    code = """
import sys
with open(sys.argv[1], "wb") as file:
    for _ in range(128):
        file.write(b"x" * 2**20)
        file.flush()
print("survived", flush=True)
"""
    try:
        with SandboxCgroup(processes=None, memory=32 * MiB) as group:
            result = start_inside(group, code, path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            out, err = result.communicate(timeout=30)
            assert b"survived" not in out, err
            assert result.returncode != 0
            assert group.usage().memory_exceeded
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def test_kill_leaves_no_process() -> None:
    """Children, and a daemon that left its session, are all killed."""
    requires("pids")
    code = """
import os, time
pids = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    pids.append(pid)
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(w, str(os.getpid()).encode())
        time.sleep(60)
    os._exit(0)
os.close(w)
pids.append(int(os.read(r, 32)))
print(*pids, flush=True)
time.sleep(60)
"""
    with SandboxCgroup(processes=32, memory=None) as group:
        parent = start_inside(group, code, stdout=subprocess.PIPE, text=True)
        try:
            assert parent.stdout is not None
            pids = {parent.pid, *map(int, parent.stdout.readline().split())}
            assert len(pids) == 5
            assert pids <= members(group)[0]
            started = time.monotonic()
            assert group.kill()
            assert time.monotonic() - started < KILL_LATENCY
            assert all(not found for found in members(group))
            assert all(gone(pid) for pid in pids)
        finally:
            parent.kill()
            parent.communicate(timeout=10)
    assert parent.returncode == -signal.SIGKILL


def test_exit_kills_what_is_left() -> None:
    requires("pids")
    with SandboxCgroup(processes=8, memory=None) as group:
        child = start_inside(group, "import time; time.sleep(60)")
        paths = group.paths
    try:
        assert child.wait(timeout=5) == -signal.SIGKILL
    finally:
        child.kill()
    assert not any(Path(path).exists() for path in paths)


def test_two_groups_at_once_are_independent() -> None:
    """Each of two groups reaches its own pids.max while the other is full."""
    requires("pids")
    first, second = SandboxCgroup(processes=5, memory=None), SandboxCgroup(processes=5, memory=None)
    with first, second:
        assert set(first.paths).isdisjoint(second.paths)
        forkers = [
            start_inside(g, FORKER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            for g in (first, second)
        ]
        try:
            counts = []
            for forker in forkers:
                assert forker.stdout is not None
                counts.append(forker.stdout.readline().split())
            assert counts == [["4", str(errno.EAGAIN)]] * 2
            assert [len(members(g)[0]) for g in (first, second)] == [5, 5]
            assert first.usage().pids_exceeded and second.usage().pids_exceeded
        finally:
            for group, forker in zip((first, second), forkers):
                group.kill()
                forker.communicate(timeout=10)


def test_v2_is_joined_at_birth_and_v1_by_writing() -> None:
    """The C core gets the v2 group's directory (bwrap is created in it by clone3) and
    the v1 groups' cgroup.procs (written by the child); never both for one group."""
    requires("pids", "memory")
    with SandboxCgroup(processes=8, memory=64 * MiB) as group:
        versions = [discover()[c].version for c in ("pids", "memory")]
        if 2 in versions:
            assert group.dir_fd >= 0
            assert os.path.realpath(f"/proc/self/fd/{group.dir_fd}") in group.paths
        else:
            assert group.dir_fd == -1
        assert len(group.v1_procs_fds) == len(group.paths) - (1 if 2 in versions else 0)
        assert set(group.v1_procs_fds) <= set(group.procs_fds)
        assert len(group.v1_join_fds) == len(group.v1_procs_fds)
    assert group.dir_fd == -1 and group.v1_procs_fds == [] and group.v1_join_fds == []


def test_v1_is_joined_through_tasks_with_every_process_after() -> None:
    """The C core's child joins the v1 groups by writing 0 to their ``tasks`` files (one
    thread, the whole of a process that has one; no global lock): the process and all
    it starts are in every v1 group, its other threads and children too, and the cap
    holds for them."""
    requires("pids")
    with SandboxCgroup(processes=5, memory=None) as group:
        v1 = [path for path in group.paths if not Path(path, "cgroup.type").exists()]
        if not v1:
            pytest.skip("no cgroup v1 hierarchy here")
        targets = [os.path.realpath(f"/proc/self/fd/{fd}") for fd in group.v1_join_fds]
        assert sorted(targets) == sorted(os.path.join(path, "tasks") for path in v1)
        fds = group.v1_join_fds

        def join() -> None:
            for fd in fds:
                os.write(fd, b"0")

        forker = subprocess.Popen(
            [sys.executable, "-c", THREAD_THEN + FORKER],
            preexec_fn=join,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert forker.stdout is not None
            # The forker, its thread and its children: the cap of 5 tasks counts them all.
            assert forker.stdout.readline().split() == ["3", str(errno.EAGAIN)]
            for path in v1:
                listed = {int(pid) for pid in Path(path, "cgroup.procs").read_text().split()}
                assert forker.pid in listed and len(listed) == 4
            assert group.usage().pids_exceeded
        finally:
            group.kill()
            forker.communicate(timeout=10)


def test_a_run_on_cgroup_v2_is_born_in_its_group() -> None:
    """Through the API: on a v2 host the sandbox's first process was created in its group
    (no migration); on v1 it moved itself."""
    requires("pids", "memory")
    from pysandbox._api.run import Call, build_plan
    from pysandbox._launch.launcher import launch

    plan, _limits = build_plan(Call(["/bin/true"]))
    facts = launch(plan)
    on_v2 = discover()["pids"].version == 2 or discover()["memory"].version == 2
    assert facts.joined_at_clone is on_v2


def test_remove_later_leaves_no_group_once_drained() -> None:
    """A group with ``remove_later`` has its processes killed and its counters read when
    ``__exit__`` returns; its directories are gone once the reaper has drained, for many
    groups in a row."""
    requires("pids")
    before = set(groups_of(os.getpid()))
    made = []
    for _ in range(20):
        with SandboxCgroup(processes=8, memory=None, remove_later=True) as group:
            made += group.paths
            child = start_inside(group, "import time; time.sleep(60)")
        assert gone(child.pid), "a process in the group outlived __exit__"
        child.wait(10)
        assert group.usage() == group.usage() and group.dir_fd == -1
    assert drain(30)
    assert [path for path in made if os.path.exists(path)] == []
    assert set(groups_of(os.getpid())) - before == set()


def test_drain_after_fork_forgets_the_parents_groups() -> None:
    """A child forked while the reaper holds groups neither removes them nor waits for
    them: they are the parent's, and the parent's reaper removes them."""
    requires("pids")
    read_end, write_end = os.pipe()
    with SandboxCgroup(processes=8, memory=None, remove_later=True) as group:
        paths = group.paths
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            ok = drain(5)
            os.write(write_end, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        assert reader.read() == b"1"
    os.waitpid(pid, 0)
    assert drain(30)
    assert [path for path in paths if os.path.exists(path)] == []


#: Writes argv[1] MiB to the file argv[2] (on a host tmpfs: charged to the group, and
#: kept after the writer is gone).
TMPFS_WRITER = """
import sys
with open(sys.argv[2], "wb") as file:
    file.write(b"x" * (int(sys.argv[1]) * 2**20))
"""


def test_a_group_holding_shared_memory_on_purpose_waits_three_passes_only(
    tmp_path: Path,
) -> None:
    """A file the group's process wrote on a tmpfs outlives it: the wait for the kernel's
    deferred frees (``settle``) sees no pass free anything and gives up after three,
    instead of waiting for memory nobody will free."""
    requires("memory")
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.statvfs(shm).f_bavail * os.statvfs(shm).f_frsize < 64 * MiB:
        pytest.skip("no tmpfs at /dev/shm with 64 MiB free")
    target = shm / f"pysandbox-settle-{os.getpid()}-{tmp_path.name}"
    passes: list[int | None] = []

    def gc_pass() -> bool:
        passes.append(shmem(group._nodes))
        return True

    try:
        with SandboxCgroup(processes=None, memory=256 * MiB, settle=gc_pass) as group:
            writer = start_inside(group, TMPFS_WRITER, "32", str(target))
            assert writer.wait(timeout=30) == 0
        assert target.stat().st_size == 32 * MiB
        assert len(passes) == 3
        assert all(held is not None and held >= 32 * MiB for held in passes), passes
    finally:
        target.unlink(missing_ok=True)


def test_a_group_holding_no_shared_memory_waits_no_pass() -> None:
    """The common end: nothing shared left, no pass of the kernel's frees waited for."""
    requires("memory")
    passes: list[int] = []

    def gc_pass() -> bool:
        passes.append(1)
        return True

    with SandboxCgroup(processes=None, memory=256 * MiB, settle=gc_pass) as group:
        writer = start_inside(group, "import os; os.write(os.memfd_create('m'), b'x' * 2**24)")
        assert writer.wait(timeout=30) == 0
    assert passes == []
