# SPDX-License-Identifier: MIT
"""Issue 7, items 1 and 9: no process of a sandbox outlives its caller, or its call.

Item 1: a caller that dies (``kill -9``, ``os._exit`` from another thread) while its
sandbox runs takes the whole sandbox with it: bwrap, pysandbox's init, the program and
the program's child are all gone within a second, for every entry point, for a root and
for a non-root caller; and the next ``run()`` removes the dead caller's cgroups.

Item 9: whatever ends a call (the program's own exit, a signal, a limit, an output cap,
a cancel, Ctrl-C, ``eval_in_sandbox``'s errors), every process of the sandbox has exited
AND been reaped by the time the call returns: nothing is left running, no zombie is
left, nothing was handed to the host's pid 1.  The caller records the whole process tree
under it while the sandbox runs and looks each recorded process up the instant the call
returns.  Finally a caller that is pid 1 of its own pid namespace (a container whose
``CMD`` is the Python service, with no init to reap orphans) runs 1,000 sandboxes that are
killed, and finds no zombie in its namespace.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from support.processes import pid_state, pids_with_marker, start_time, unique_marker
from support.timing import cpu, eval_cpu, slow

from pysandbox import eval_in_sandbox, run, run_python
from pysandbox._cgroups.ahead import drain as cgroup_drain
from pysandbox._cgroups.mounts import discover
from pysandbox._cgroups.node import PARENT
from pysandbox._cgroups.probe import probe as cgroup_probe

IS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="the caller is not root here")
#: A uid with no other process on this host, for a non-root caller made by the test.
UNPRIVILEGED_CALLER = 54321
#: Every entry point that starts a sandbox.
APIS = ["eval_in_sandbox", "run", "run_python", "run_async", "run_python_async"]
#: The issue's bound: a second after the caller's death nothing of its sandbox is alive.
DEATH_BOUND = 1.0

# --------------------------------------------------------------------------- item 1

#: The program of a dying caller's sandbox, run as ``python -c PROGRAM MARKER``.  It
#: first tries to keep the lifeline from ever breaking: it reopens for writing every fd
#: it can reach of its own and of the init (pid 1), which would give it a write end of
#: the lifeline pipe if it had inherited the read end or could open the init's fds.
#: Then it starts a child whose command line ends in ``MARKER child`` (what the test
#: waits for), and both sleep for good.
CHILD_LOOP = "import time\nwhile True:\n    time.sleep(1)\n"
PROGRAM = f"""
import os, sys, time
marker = sys.argv[-1]
held = []
for owner in ("self", "1"):
    try:
        names = os.listdir(f"/proc/{{owner}}/fd")
    except OSError:
        continue
    for name in names:
        try:
            held.append(os.open(f"/proc/{{owner}}/fd/{{name}}", os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
if os.fork() == 0:
    os.execv(sys.executable, [sys.executable, "-c", {CHILD_LOOP!r}, marker, "child"])
print("ready", flush=True)
while True:
    time.sleep(1)
"""

#: The caller: starts one sandbox through API and waits in it.  The marker comes in the
#: environment (in this process's own argv it would be counted).  With EXIT_ON_INPUT, a
#: thread other than the main one calls os._exit once a line arrives on stdin.
CALLER = """
import asyncio, os, sys, threading
if os.environ.get("SHARED"):
    sys.path.insert(0, os.environ["SHARED"])
import pysandbox
from pysandbox import Limits

marker, api, program = os.environ["MARKER"], os.environ["API"], os.environ["PROGRAM"]
if os.environ.get("EXIT_ON_INPUT"):
    def leave():
        sys.stdin.readline()
        os._exit(3)
    threading.Thread(target=leave, daemon=True).start()
limits = Limits(wall_time=60, cpu_time=60)
argv = [sys.executable, "-c", program, marker]
if api == "eval_in_sandbox":
    code = f"import os, sys\\nos.execv(sys.executable, {argv!r})"
    pysandbox.eval_in_sandbox(code, cpu_max_time_sec=60, timeout_max_time_sec=60)
elif api == "run":
    pysandbox.run(argv, limits=limits)
elif api == "run_python":
    pysandbox.run_python(program, args=[marker], limits=limits)
elif api == "run_async":
    asyncio.run(pysandbox.run_async(argv, limits=limits))
elif api == "run_python_async":
    asyncio.run(pysandbox.run_python_async(program, args=[marker], limits=limits))
print("the call returned", flush=True)
"""


def descendants(root: int) -> list[int]:
    """Every process under ``root`` (zombies included), from the children files of all
    its threads and theirs."""
    found: list[int] = []
    pending = [root]
    while pending:
        pid = pending.pop()
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{pid}/task"):
                with (
                    contextlib.suppress(OSError),
                    open(f"/proc/{pid}/task/{task}/children", "rb") as children,
                ):
                    for child in children.read().split():
                        found.append(int(child))
                        pending.append(int(child))
    return found


def living(processes: Mapping[int, int | None]) -> dict[int, str]:
    """Those of ``processes`` (pid: start time) that still exist and are not zombies,
    with their state."""
    alive = {}
    for pid, started in processes.items():
        now = pid_state(pid)
        if started is not None and start_time(pid) == started and now not in ("", "Z", "X"):
            alive[pid] = now
    return alive


def cgroups_of(pid: int) -> list[Path]:
    """pysandbox's cgroups made by the process ``pid`` (by their name), in every
    hierarchy."""
    found = []
    for mount in sorted({hierarchy.home for hierarchy in discover().values()}):
        with contextlib.suppress(FileNotFoundError):
            found += [
                entry
                for entry in Path(mount, PARENT).iterdir()
                if entry.is_dir() and entry.name.startswith(f"pysandbox-{pid}-")
            ]
    return found


def wait_for(predicate: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def start_caller(
    api: str, marker: str, *, exit_on_input: bool, python: str, shared: Path | None
) -> subprocess.Popen[bytes]:
    """The calling process, root (this test's interpreter) or non-root (``python`` and
    the world-readable copy of pysandbox in ``shared``, as ``UNPRIVILEGED_CALLER``)."""
    env = {"PATH": "/usr/bin:/bin", "MARKER": marker, "API": api, "PROGRAM": PROGRAM}
    if exit_on_input:
        env["EXIT_ON_INPUT"] = "1"
    options: dict[str, object] = {}
    if shared is not None:
        env["SHARED"] = str(shared)
        options = {"user": UNPRIVILEGED_CALLER, "group": UNPRIVILEGED_CALLER, "extra_groups": []}
    return subprocess.Popen(
        [python, "-c", CALLER],
        env=env,
        cwd="/",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **options,  # type: ignore[call-overload]
    )


def check_caller_death(api: str, death: str, python: str, shared: Path | None) -> float:
    """Start a caller, wait until its sandbox's program and child run, kill the caller
    (``death``: "kill" is SIGKILL from here, "exit" is os._exit in a thread of the
    caller), and check that nothing of the sandbox is alive DEATH_BOUND seconds later.
    Returns how long the sandbox took to vanish."""
    marker = unique_marker()
    caller = start_caller(api, marker, exit_on_input=death == "exit", python=python, shared=shared)
    try:
        child_tag = f"{marker}\0child"

        def running() -> bool:
            if caller.poll() is not None:
                assert caller.stderr is not None
                err = caller.stderr.read()[-3000:]
                pytest.fail(f"the caller ended early ({caller.returncode}): {err!r}")
            return bool(pids_with_marker(child_tag))

        wait_for(running, 60, "the sandboxed program and its child")
        tree = {
            pid: start_time(pid) for pid in {*descendants(caller.pid), *pids_with_marker(marker)}
        }
        # bwrap, the init, the program and its child at least.
        assert len(living(tree)) >= 4, tree
        groups = cgroups_of(caller.pid)
        if death == "kill":
            killed_at = time.monotonic()
            caller.kill()
        else:
            assert caller.stdin is not None
            killed_at = time.monotonic()
            caller.stdin.write(b"\n")
            caller.stdin.flush()
        caller.wait(30)
        assert caller.returncode == (-signal.SIGKILL if death == "kill" else 3)
        deadline = killed_at + DEATH_BOUND
        while (living(tree) or pids_with_marker(marker)) and time.monotonic() < deadline:
            time.sleep(0.005)
        gone_after = time.monotonic() - killed_at
        left = {**living(tree), **{pid: "marker" for pid in pids_with_marker(marker)}}
        assert left == {}, f"alive {DEATH_BOUND} s after the caller's death: {left}"
        if groups:
            run(["true"])  # the next call removes the dead caller's groups
            assert cgroup_drain(30)  # in the background, after it returned
            assert cgroups_of(caller.pid) == []
        return gone_after
    finally:
        if caller.poll() is None:
            caller.kill()
        caller.communicate()
        for pid in pids_with_marker(marker):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


@needs_root
@pytest.mark.parametrize("death", ["kill", "exit"])
@pytest.mark.parametrize("api", APIS)
def test_sandbox_dies_with_a_root_caller(api: str, death: str) -> None:
    """A root caller's sandbox runs as a uid of its own, which bwrap (uid 0 without
    capabilities) may not signal: the parent-death signal alone left it running."""
    check_caller_death(api, death, sys.executable, None)


@pytest.mark.parametrize("death", ["kill", "exit"])
@pytest.mark.parametrize("api", APIS)
def test_sandbox_dies_with_a_non_root_caller(
    api: str, death: str, unprivileged_pysandbox: tuple[str, Path]
) -> None:
    python, shared = unprivileged_pysandbox
    check_caller_death(api, death, python, shared)


#: The program's open fds and what they are, except the listing's own.
LIST_FDS = """
import json, os
links = {}
for entry in os.listdir("/proc/self/fd"):
    try:
        links[entry] = os.readlink("/proc/self/fd/" + entry)
    except OSError:
        pass  # the listing's own fd, closed by now
print(json.dumps(links))
"""


@pytest.mark.parametrize("api", ["eval_in_sandbox", "run", "run_python"])
def test_the_program_holds_no_lifeline(api: str) -> None:
    """The init makes the lifeline close-on-exec: a program that held its read end could
    reopen it for writing through /proc/self/fd (a non-root caller's sandbox has the
    pipe's uid) and keep it from ever reaching EOF.  The program has stdio only."""
    if api == "eval_in_sandbox":
        output = eval_in_sandbox(LIST_FDS, cpu_max_time_sec=eval_cpu()).stdout
    elif api == "run":
        output = run([sys.executable, "-c", LIST_FDS]).stdout.decode()
    else:
        output = run_python(LIST_FDS).stdout.decode()
    links = json.loads(output)
    assert sorted(links) == ["0", "1", "2"], links


#: A caller that makes a group, puts a sleeping child in it, and waits.
GROUP_HOLDER = """
import os, time
from pysandbox._cgroups.group import SandboxCgroup
with SandboxCgroup(processes=8, memory=None) as group:
    child = os.fork()
    if child == 0:
        os.dup2(os.open("/dev/null", os.O_WRONLY), 1)  # the test reads stdout to EOF
        os.execv("/bin/sleep", ["sleep", "600"])
    for fd in group.procs_fds:
        os.write(fd, str(child).encode())
    print("ready", flush=True)
    time.sleep(600)
"""


@contextlib.contextmanager
def group_holder() -> Iterator[subprocess.Popen[bytes]]:
    """A running GROUP_HOLDER, killed at the end (its group is then a leftover)."""
    holder = subprocess.Popen([sys.executable, "-c", GROUP_HOLDER], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == b"ready\n"
        yield holder
    finally:
        holder.kill()
        holder.communicate()


@needs_root
def test_dead_callers_cgroups_are_removed_by_the_next_run() -> None:
    """A caller is killed with a process still in its group: the next run kills that
    process and removes the group (the lifeline would have ended a sandbox; here the test
    puts a process there itself).  The group of a live caller, and a group of another
    pid namespace whose pid is not alive here, are left alone."""
    support = cgroup_probe()
    if not (support.pids or support.memory):
        pytest.skip(f"no per-sandbox cgroup here: {support.reason}")
    foreign: list[Path] = []
    try:
        with group_holder() as live, group_holder() as dead:
            groups = cgroups_of(dead.pid)
            assert groups and cgroups_of(live.pid)
            member = int((groups[0] / "cgroup.procs").read_text().split()[0])
            member_started = start_time(member)
            # A group named for a pid that is dead here, made in another pid namespace.
            for parent in {group.parent for group in groups}:
                foreign.append(parent / f"pysandbox-{dead.pid}-1-0-00000000")
                foreign[-1].mkdir()
            dead.kill()
            dead.wait(30)
            run(["true"])
            assert cgroup_drain(30)  # the sweep runs after the call returned
            assert [group for group in cgroups_of(dead.pid) if group not in foreign] == []
            assert living({member: member_started}) == {}, "the group's process lives on"
            assert all(path.exists() for path in foreign), "another namespace's group is gone"
            assert cgroups_of(live.pid), "a live caller's group was removed"
            live_pid = live.pid
        run(["true"])
        assert cgroup_drain(30)
        assert cgroups_of(live_pid) == []
    finally:
        for path in foreign:
            with contextlib.suppress(OSError):
                path.rmdir()


# --------------------------------------------------------------------------- item 9

#: The start of every program below: a child that would sleep for a minute, so that
#: "everything has exited" covers what the program left behind as well.
FORK_SLEEPER = "import os, time\nif os.fork() == 0:\n    time.sleep(3600)\n    os._exit(0)\n"
#: Then 5,000 bytes on stdout, and a wait for the kill.
LOUD = FORK_SLEEPER + "time.sleep(0.3); print(chr(120) * 5000); time.sleep(60)"

#: The limits of an ending that is not a CPU limit's: the CPU budget for the interpreter's
#: start and its fork, however slow the CPUs.
BUDGET = f"Limits(cpu_time={cpu(1)}, wall_time={slow(20)})"

#: ending: (call, what the call must end with).  A call is code for the driver: it runs
#: in a ``try`` whose exception is the outcome when it raises.
ENDINGS: dict[str, tuple[str, str]] = {
    "ok": (
        f"run_python({FORK_SLEEPER + 'time.sleep(0.3)'!r}, limits={BUDGET}).status.name",
        "OK",
    ),
    "signal": (
        f"run_python({FORK_SLEEPER + 'time.sleep(0.3); os.kill(os.getpid(), 15)'!r}, "
        f"limits={BUDGET}).status.name",
        "SIGNALED",
    ),
    "cpu": (
        f"run_python({FORK_SLEEPER + 'while True: pass'!r}, "
        f"limits=Limits(cpu_time={cpu(0.3)}, wall_time={slow(10)})).status.name",
        "CPU_TIME_EXCEEDED",
    ),
    "wall": (
        # Room for the interpreter to start and fork on a slow machine (under the VM lab's
        # emulation 0.5 s ended it before the fork), and still far below the hour's sleep;
        # the same for the other endings by a limit.
        f"run_python({FORK_SLEEPER + 'time.sleep(3600)'!r}, "
        f"limits=Limits(wall_time={slow(1.5)}, cpu_time={cpu(1)})).status.name",
        "WALL_TIME_EXCEEDED",
    ),
    "output": (
        f"run_python({LOUD!r}, limits=Limits(stdout=1000, wall_time=30, cpu_time={cpu(1)}))"
        ".status.name",
        "OUTPUT_EXCEEDED",
    ),
    "cancel": (
        f"run_python({FORK_SLEEPER + 'time.sleep(3600)'!r}, limits={BUDGET}, "
        "cancel=when_running(event.set))",
        "Cancelled: the run was cancelled; the sandbox was killed",
    ),
    "ctrl_c": (
        f"run_python({FORK_SLEEPER + 'time.sleep(3600)'!r}, limits={BUDGET}, "
        "cancel=when_running(lambda: os.kill(os.getpid(), signal.SIGINT)))",
        "KeyboardInterrupt",
    ),
    "eval_ok": (
        f"eval_in_sandbox({FORK_SLEEPER + 'time.sleep(0.3); print(1)'!r}, "
        f"cpu_max_time_sec={eval_cpu()}).returncode",
        "0",
    ),
    "eval_timeout": (
        f"eval_in_sandbox({FORK_SLEEPER + 'time.sleep(3600)'!r}, timeout_max_time_sec={slow(1.5)}, "
        f"cpu_max_time_sec={eval_cpu()})",
        "SandboxError: Process timed out",
    ),
    "eval_output": (
        f"eval_in_sandbox({LOUD!r}, io_max_kb=1, cpu_max_time_sec={eval_cpu()})",
        "SandboxError: I/O buffer size exceeded",
    ),
}

#: Runs CALL while a thread records every process under this one (pid: start time),
#: then, the instant the call has returned or raised, looks each of them up.
ENDING_DRIVER = """
import json, os, signal, sys, threading, time
if os.environ.get("SHARED"):
    sys.path.insert(0, os.environ["SHARED"])
from pysandbox import Limits, eval_in_sandbox, run_python

signal.signal(signal.SIGINT, signal.default_int_handler)
me = os.getpid()

def stat_fields(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None

def descendants(root):
    found, pending = [], [root]
    while pending:
        pid = pending.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children", "rb") as children:
                    pids = [int(p) for p in children.read().split()]
            except OSError:
                continue
            found += pids
            pending += pids
    return found

seen, stop = {}, threading.Event()

def watch():
    while not stop.is_set():
        for pid in descendants(me):
            fields = stat_fields(pid)
            if fields is not None:
                seen.setdefault(pid, fields[19])
        time.sleep(0.002)

class when_running:
    # A cancel object whose is_set() runs ACTION once the program's child is up.
    def __init__(self, action):
        self.action, self.done = action, False
    def is_set(self):
        if not self.done and len(seen) >= 4:
            self.done = True
            self.action()
        return event.is_set()

event = threading.Event()
watcher = threading.Thread(target=watch, daemon=True)
watcher.start()
try:
    outcome = str(CALL)
except BaseException as exc:
    outcome = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
left = {}
for pid, started in list(seen.items()):
    fields = stat_fields(pid)
    if fields is not None and fields[19] == started:
        left[pid] = fields[0].decode()
children = descendants(me)
stop.set()
watcher.join()
print(json.dumps({"outcome": outcome, "left": left, "children": children, "seen": len(seen)}))
"""


def run_ending(ending: str, python: str, shared: Path | None) -> dict[str, object]:
    call, _ = ENDINGS[ending]
    driver = ENDING_DRIVER.replace("CALL", call)
    env = {"PATH": "/usr/bin:/bin"}
    options: dict[str, object] = {}
    if shared is not None:
        env["SHARED"] = str(shared)
        options = {"user": UNPRIVILEGED_CALLER, "group": UNPRIVILEGED_CALLER, "extra_groups": []}
    out = subprocess.run(
        [python, "-c", driver],
        env=env,
        cwd="/",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        **options,  # type: ignore[call-overload]
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return report


def check_ending(ending: str, python: str, shared: Path | None) -> None:
    report = run_ending(ending, python, shared)
    _, expected = ENDINGS[ending]
    assert report["outcome"] == expected, report
    # The caller saw bwrap, the init, the program and its child while they ran...
    assert isinstance(report["seen"], int) and report["seen"] >= 4, report
    # ...and none of them exists any more, not even as a zombie, the instant it returned.
    assert report["left"] == {}, report
    assert report["children"] == [], report


@needs_root
@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_root_call_returns_when_the_sandbox_is_gone(ending: str) -> None:
    check_ending(ending, sys.executable, None)


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_non_root_call_returns_when_the_sandbox_is_gone(
    ending: str, unprivileged_pysandbox: tuple[str, Path]
) -> None:
    python, shared = unprivileged_pysandbox
    check_ending(ending, python, shared)


#: pid 1 of its own pid namespace runs sandboxes that are killed, and then counts the
#: processes left in the namespace (/proc is the namespace's own).
PID1_DRIVER = """
import json, os, sys, time
from pysandbox import Limits, SandboxError, eval_in_sandbox, run, run_python
assert os.getpid() == 1
started = time.monotonic()
statuses = set()
for i in range(COUNT):
    kind = i % 3
    if kind == 0:
        try:
            eval_in_sandbox("while True: pass", timeout_max_time_sec=0.02)
        except SandboxError as exc:
            statuses.add(str(exc))
    elif kind == 1:
        statuses.add(run(["sleep", "60"], limits=Limits(wall_time=0.02)).status.name)
    else:
        statuses.add(run_python("while True: pass", limits=Limits(wall_time=0.05)).status.name)
others = {}
for entry in os.listdir("/proc"):
    if entry.isdigit() and entry != "1":
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                others[entry] = stat.read().rsplit(b")", 1)[1].split()[0].decode()
        except OSError:
            pass
print(json.dumps({"others": others, "statuses": sorted(statuses),
                  "seconds": time.monotonic() - started}))
"""


@needs_root
@pytest.mark.slow
def test_no_zombie_under_a_caller_that_is_pid_1() -> None:
    """As in a container whose pid 1 is the Python service: nothing reaps an orphan but
    the caller itself, which never does; 1,000 killed sandboxes leave no zombie."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare (util-linux) is not installed")
    out = subprocess.run(
        [
            unshare,
            "--pid",
            "--fork",
            "--mount-proc",
            sys.executable,
            "-c",
            PID1_DRIVER.replace("COUNT", "1000"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["statuses"] == ["Process timed out", "WALL_TIME_EXCEEDED"], report
    assert report["others"] == {}, report


@pytest.fixture(autouse=True)
def _no_leftover_children() -> Iterator[None]:
    """Whatever a test starts, it reaps."""
    yield
    assert [pid for pid in descendants(os.getpid()) if pid_state(pid) != ""] == []
