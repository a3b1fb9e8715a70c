# SPDX-License-Identifier: MIT
"""Warm sandboxes (``Runner(warm=K)``): started ahead of need, single-use, and exactly
what a fresh sandbox shows to the code; their limits and clocks count from the moment
the code is handed over; they die with ``close()`` and with their caller.

The contract tests of ``eval_in_sandbox`` and ``run_python`` also run through a warm
Runner (``WARM_THROUGH`` in ``test_contract.py`` and ``test_run.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.processes import children_of
from support.timing import KILL_LATENCY, PROMPTLY, cpu_overshoot, slow
from support.warm import wait_ready

from pysandbox import Limits, Result, Runner, SandboxError, Status
from pysandbox._launch import codefile as _codefile
from pysandbox._model.record import replace

#: Everything of the interpreter, the process and the sandbox the code can look at,
#: printed as JSON; the parts that differ between any two sandboxes (pipe and mount
#: numbers, the code file's random name) are normalised.
PROBE = r"""
import json, os, re, resource, signal, sys, traceback, __main__

def normal(text):
    text = re.sub(r"(pipe|socket|anon_inode):\[?\d+\]?", r"\1:N", text)
    return re.sub(r"/pysandbox-[^/ ]+/[0-9a-f]{16}", "/CODEFILE", text)

def mounts():
    lines = []
    for line in open("/proc/self/mountinfo").read().splitlines():
        fields = line.split()
        lines.append(normal(" ".join(fields[3:])))
    return lines

def fds():
    found = {}
    for fd in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            found[fd] = normal(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError as error:
            found[fd] = type(error).__name__
    return found

def status():
    keep = ("Uid", "Gid", "Groups", "Cap", "NoNewPrivs", "Seccomp", "Threads", "SigIgn",
            "SigBlk", "SigCgt", "Cpus_allowed_list")
    return [line for line in open("/proc/self/status").read().splitlines()
            if line.startswith(keep)]

def stat_of(path):
    info = os.stat(path)
    return [info.st_mode, info.st_uid, info.st_gid, info.st_size, info.st_nlink]

mask = os.umask(0)
os.umask(mask)
probe = {
    "argv": sys.argv,
    "orig_argv": getattr(sys, "orig_argv", None),
    "flags": repr(sys.flags),
    "executable": sys.executable,
    "path": sys.path,
    "modules": sorted(sys.modules),
    "importer_cache": sorted(sys.path_importer_cache),
    "main": {name: repr(getattr(__main__, name)) for name in
             ("__name__", "__file__", "__cached__", "__package__", "__spec__", "__doc__")},
    "main_names": sorted(name for name in vars(__main__) if name.startswith("__")),
    "loader": [type(__main__.__loader__).__name__, __main__.__loader__.name,
               __main__.__loader__.path],
    "stack": traceback.format_stack(),
    "outer_frame": repr(sys._getframe().f_back),
    "source": open(__file__).read(),
    "cwd": os.getcwd(),
    "environ": dict(os.environ),
    "umask": mask,
    "rlimits": {name: resource.getrlimit(getattr(resource, name))
                for name in dir(resource) if name.startswith("RLIMIT_")},
    "ids": [os.getuid(), os.geteuid(), os.getgid(), os.getegid(), os.getgroups()],
    "process": [os.getpid(), os.getppid(), os.getpgrp(), os.getsid(0), os.nice(0)],
    "pids": sorted(int(entry) for entry in os.listdir("/proc") if entry.isdigit()),
    "status": status(),
    "signals": {int(sig): repr(signal.getsignal(sig)) for sig in signal.valid_signals()
                if sig < signal.SIGRTMIN},
    "fds": fds(),
    "mounts": mounts(),
    "code_file": stat_of(__file__) + [os.stat(__file__).st_dev],
    "code_dir": stat_of(os.path.dirname(__file__)),
    "stdio": [repr(stream) for stream in (sys.stdin, sys.stdout, sys.stderr)],
}
print(json.dumps(probe))
"""

#: Fields that differ between two fresh sandboxes of a root caller: each sandbox runs as
#: its own uid (docs/security.rst, What is isolated).
_PER_SANDBOX = {"ids", "status"}


def _fresh_and_warm(call: Callable[[Runner], str], prime: Callable[[Runner], object]) -> None:
    """``call`` twice fresh and twice warm: every field that two fresh sandboxes agree on
    is the same in both warm ones."""
    with Runner(limits=PROBE_LIMITS) as fresh_runner:
        fresh = [json.loads(call(fresh_runner)) for _ in range(2)]
    warm = []
    with Runner(warm=1, limits=PROBE_LIMITS) as runner:
        prime(runner)
        for _ in range(2):
            wait_ready(runner)
            taken = runner._pool.taken  # type: ignore[union-attr]
            warm.append(json.loads(call(runner)))
            assert runner._pool.taken == taken + 1  # type: ignore[union-attr]
    varying = {key for key in fresh[0] if fresh[0][key] != fresh[1][key]}
    assert varying <= _PER_SANDBOX, {key: fresh[0][key] for key in varying}
    for key in fresh[0]:
        if key not in varying:
            assert warm[0][key] == fresh[0][key], key
            assert warm[1][key] == fresh[0][key], key
    for other in warm:
        assert other.keys() == fresh[0].keys()


#: The probe reads all of /proc/self and imports a few modules: room for a slow machine
#: (an emulated guest), the same for the fresh and the warm sandboxes.
PROBE_LIMITS = Limits(cpu_time=20.0, wall_time=120.0)


def _probe_output(result: Result) -> str:
    assert result.status is Status.OK, result
    return result.stdout.decode()


def test_run_python_code_cannot_tell_a_warm_sandbox() -> None:
    _fresh_and_warm(
        lambda runner: _probe_output(runner.run_python(PROBE, args=["an", "arg"])),
        lambda runner: runner.run_python("pass", args=["an", "arg"]),
    )


def test_eval_code_cannot_tell_a_warm_sandbox() -> None:
    _fresh_and_warm(
        lambda runner: runner.eval_in_sandbox(PROBE, mem_max_mb=300).stdout,
        lambda runner: runner.eval_in_sandbox("pass", mem_max_mb=300),
    )


TRACEBACK = textwrap.dedent(
    """\
    # -*- coding: latin-1 -*-
    import sys
    print("ran", sys.argv[1:])
    def inner():
        raise KeyError("from line 5")
    inner()
    """
)


def test_an_uncaught_exception_reads_the_same() -> None:
    """The traceback's file name, line numbers and source lines (read back from the code
    file), and a coding declaration the tokenizer honours, as fresh."""
    fresh = Runner().run_python(TRACEBACK, args=["x"])
    with Runner(warm=1) as runner:
        runner.run_python("pass", args=["x"])
        wait_ready(runner)
        warm = runner.run_python(TRACEBACK, args=["x"])
        assert runner._pool.taken == 1  # type: ignore[union-attr]
    assert fresh.returncode == warm.returncode == 1
    assert warm.stdout == fresh.stdout == b"ran ['x']\n"
    assert warm.stderr == fresh.stderr
    assert b'File "/sandbox/main.py", line 6, in <module>' in warm.stderr
    assert b'raise KeyError("from line 5")' in warm.stderr


AGE = """
import os, time
ticks = os.sysconf("SC_CLK_TCK")
started = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]) / ticks
uptime = float(open("/proc/uptime").read().split()[0])
print(round(uptime - started, 3))
"""


def test_clocks_count_from_the_hand_over() -> None:
    """A sandbox that waited 2 s: its interpreter is older than that (it was started
    ahead), yet the run's wall time, and its CPU time, leave the wait out."""
    with Runner(warm=1) as runner:
        runner.run_python("pass")
        wait_ready(runner)
        time.sleep(2.0)
        result = runner.run_python(AGE)
        fresh = runner.run_python(AGE)  # the pool is refilling: this one is fresh
    assert result.status is Status.OK, result
    age = float(result.stdout)
    assert age >= 2.0, "the interpreter did not start before the call"
    assert result.wall_time < age - 1.0
    assert fresh.status is Status.OK
    assert result.cpu_time < fresh.cpu_time, "the start-up's CPU time was counted"


def test_the_cpu_limit_counts_from_the_hand_over() -> None:
    limits = Limits(cpu_time=0.5)
    with Runner(warm=1, limits=limits) as runner:
        wait_ready(runner)
        result = runner.run_python("while True: pass")
        assert runner._pool.taken == 1  # type: ignore[union-attr]
    assert result.status is Status.CPU_TIME_EXCEEDED, result
    assert 0.5 <= result.cpu_time < 0.5 + cpu_overshoot(1)


def test_the_wall_limit_counts_from_the_hand_over() -> None:
    with Runner(warm=1, limits=Limits(wall_time=1.0)) as runner:
        wait_ready(runner)
        time.sleep(1.5)
        result = runner.run_python("import time; time.sleep(60)")
        assert runner._pool.taken == 1  # type: ignore[union-attr]
    assert result.status is Status.WALL_TIME_EXCEEDED, result
    assert 1.0 <= result.wall_time < 1.0 + KILL_LATENCY


#: Whether this sandbox ran a job before (a mark left in its writable working directory).
USED_BEFORE = """
import os
print(os.path.exists("/sandbox/.used"))
open("/sandbox/.used", "w").close()
"""


def test_no_sandbox_runs_two_jobs() -> None:
    """Every call gets a sandbox no call ran in before, warm or not."""
    with Runner(warm=2) as runner:
        for _ in range(6):
            wait_ready(runner, 1)
            result = runner.run_python(USED_BEFORE)
            assert result.status is Status.OK, result
            assert result.stdout == b"False\n"
        assert runner._pool.taken == 6  # type: ignore[union-attr]


def test_each_call_asks_for_one_sandbox_of_its_kind() -> None:
    """A Runner warms run_python with its defaults first; each call then asks for one
    sandbox of its kind, and a full pool makes room by retiring one of the kind called
    the longest ago."""
    with Runner(warm=2) as runner:
        pool = runner._pool
        assert pool is not None
        wait_ready(runner, 2)
        assert runner.warm == 2
        runner.eval_in_sandbox("pass", mem_max_mb=200)  # another kind: fresh
        assert pool.taken == 0
        wait_ready(runner, 1)
        assert runner.eval_in_sandbox("print(1)", mem_max_mb=200).stdout == "1"
        assert pool.taken == 1
        assert runner.run(["/bin/true"]).status is Status.OK  # never warmed
        wait_ready(runner, 1)
        runner.eval_in_sandbox("print(2)", mem_max_mb=200)
        assert pool.taken == 2
        assert runner.run_python("print(3)").stdout == b"3\n"  # the first kind's is left
        assert pool.taken == 3


def _wait_waiting(runner: Runner, count: int) -> None:
    """Wait until ``runner``'s pool has started what the calls asked for and
    ``count`` sandboxes of any kind wait in it."""
    pool = runner._pool
    assert pool is not None
    deadline = time.monotonic() + slow(20.0)
    while True:
        with pool._lock:
            waiting = sum(launched.waiting() for _, launched in pool._ready)
            asked = len(pool._requests)
        if waiting >= count and not asked:
            return
        assert time.monotonic() < deadline, "the warm pool did not refill"
        time.sleep(0.01)


def test_calls_that_alternate_between_two_kinds_find_theirs_waiting() -> None:
    """Two kinds of call in turn, with time between them: after the first call of the
    second kind, every call takes a warm sandbox, and the pool starts no more sandboxes
    than its size plus the calls it served."""
    calls = 12
    with Runner(warm=2) as runner:
        pool = runner._pool
        assert pool is not None
        for number in range(calls):
            _wait_waiting(runner, 2)
            if number % 2:
                assert runner.run_python("print(1)").stdout == b"1\n"
            else:
                assert runner.eval_in_sandbox("print(1)", mem_max_mb=200).stdout == "1"
        assert pool.taken == calls - 1
        _wait_waiting(runner, 2)
        assert pool.started <= calls + 2


def test_a_kind_nobody_calls_gives_way_when_its_sandboxes_age_out() -> None:
    """The Runner's default kind waits, but every call is of another: as the default's
    sandboxes are retired (their lease), the kind in use takes their place."""
    with Runner(warm=2) as runner:
        pool = runner._pool
        assert pool is not None
        wait_ready(runner, 2)
        assert runner.eval_in_sandbox("print(1)", mem_max_mb=200).stdout == "1"
        pool.max_age = 0.5
        with pool._lock:
            pool._lock.notify_all()
        wait_ready(runner, 2)  # two of eval's kind
        pool.max_age = 60.0
        wait_ready(runner, 2)
        before = pool.taken
        assert runner.eval_in_sandbox("print(2)", mem_max_mb=200).stdout == "2"
        assert runner.eval_in_sandbox("print(3)", mem_max_mb=200).stdout == "3"
        assert pool.taken == before + 2


def test_what_the_pool_knows_of_kinds_stays_bounded() -> None:
    """A call of a kind never seen before each time (an agent's limits vary): the pool
    retires the kinds called the longest ago and forgets them."""
    with Runner(warm=1) as runner:
        pool = runner._pool
        assert pool is not None
        for megabytes in range(100, 130):
            assert runner.eval_in_sandbox("print(1)", mem_max_mb=megabytes).stdout == "1"
        with pool._lock:
            assert len(pool._last_call) <= 4 * pool.size + 4
            assert len(pool._ready) <= pool.size


def _sandbox_pids() -> set[int]:
    """This process's bwrap children and all below them."""
    seen: set[int] = set()
    todo = children_of(os.getpid())
    while todo:
        pid = todo.pop()
        seen.add(pid)
        todo += children_of(pid)
    return seen


def _code_files() -> list[str]:
    return [
        name
        for directory in _codefile._directories.values()
        for name in os.listdir(directory)
        if name != "owner"
    ]


def test_close_kills_and_reaps_the_waiting_sandboxes() -> None:
    before = _sandbox_pids()
    files_before = _code_files()
    runner = Runner(warm=3)
    wait_ready(runner, 3)
    waiting = _sandbox_pids() - before
    assert len(waiting) >= 3 * 3  # bwrap, its child (the init) and the interpreter each
    assert len(_code_files()) == len(files_before) + 3
    runner.close()
    assert _sandbox_pids() - before == set()
    for pid in waiting:
        assert not os.path.exists(f"/proc/{pid}"), pid  # not even a zombie
    assert _code_files() == files_before
    assert runner.warm_ready == 0
    with pytest.raises(RuntimeError):
        runner.run_python("pass")


def test_a_collected_runner_leaves_no_sandbox() -> None:
    before = _sandbox_pids()
    runner = Runner(warm=2)
    wait_ready(runner, 2)
    del runner
    deadline = time.monotonic() + PROMPTLY
    while _sandbox_pids() - before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _sandbox_pids() - before == set()


CALLER = """
import json, os, sys, time
from pysandbox import Runner
runner = Runner(warm=2)
while runner.warm_ready < 2:
    time.sleep(0.01)
print(json.dumps(sorted(launched._sandbox.pid for _, launched in runner._pool._ready)),
      flush=True)
time.sleep(600)
"""


def _tree_of(pids: list[int]) -> set[int]:
    seen: set[int] = set()
    todo = list(pids)
    while todo:
        pid = todo.pop()
        seen.add(pid)
        todo += children_of(pid)
    return seen


def _code_directories() -> list[tuple[str, str]]:
    """The private code directories in /dev/shm, with the pid their owner file names."""
    found = []
    for entry in os.listdir("/dev/shm"):
        if entry.startswith("pysandbox-"):
            with contextlib.suppress(OSError, IndexError):
                owner = Path("/dev/shm", entry, "owner").read_text().split()
                found.append((entry, owner[1]))
    return found


def test_warm_sandboxes_die_with_their_caller() -> None:
    """A caller killed with SIGKILL: its warm sandboxes end (the lifeline), and the next
    process to make a code file removes the dead caller's directory."""
    with subprocess.Popen(
        [sys.executable, "-c", CALLER], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as caller:
        try:
            assert caller.stdout is not None
            line = caller.stdout.readline()
            assert line, caller.stderr.read() if caller.stderr else ""
            tree = _tree_of(json.loads(line))
            assert len(tree) >= 6
            owned = [place for place, pid in _code_directories() if pid == str(caller.pid)]
            assert len(owned) == 1, _code_directories()
        finally:
            caller.kill()
            caller.wait()
    deadline = time.monotonic() + slow(5.0)
    while any(os.path.exists(f"/proc/{pid}") for pid in tree) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [pid for pid in tree if os.path.exists(f"/proc/{pid}")] == []
    subprocess.run(
        [sys.executable, "-c", "from pysandbox import run_python; run_python('pass')"],
        check=True,
    )
    assert not os.path.exists(f"/dev/shm/{owned[0]}")


def test_sandboxes_are_retired_before_their_lease_could_break() -> None:
    """The kernel breaks a lease after fs.lease-break-time: a sandbox older than half of
    it is replaced, and one handed over is always younger."""
    with Runner(warm=1) as runner:
        pool = runner._pool
        assert pool is not None
        wait_ready(runner)
        started = pool.started
        pool.max_age = 0.3
        with pool._lock:
            pool._lock.notify_all()
        deadline = time.monotonic() + slow(10.0)
        while pool.started < started + 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert pool.started >= started + 3
        pool.max_age = 60.0
        wait_ready(runner)
        assert runner.run_python("print('fine')").stdout == b"fine\n"


def test_a_sandbox_that_ended_by_itself_is_not_used() -> None:
    """A warm sandbox killed from outside (the host's OOM killer, an admin) is passed
    over: the call runs fresh and succeeds."""
    with Runner(warm=1) as runner:
        wait_ready(runner)
        ((_, launched),) = runner._pool._ready  # type: ignore[union-attr]
        for pid in _tree_of([launched._sandbox.pid]) - {launched._sandbox.pid}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + PROMPTLY
        while not launched.exited() and time.monotonic() < deadline:
            time.sleep(0.01)
        result = runner.run_python("print('fresh')")
        assert result.stdout == b"fresh\n"
        assert runner._pool.taken == 0  # type: ignore[union-attr]


def test_a_lost_lease_kills_the_sandbox_before_its_code_runs() -> None:
    """If the lease is gone at the hand-over, the code never runs in that sandbox."""
    from pysandbox._api import run as _run
    from pysandbox._launch import launcher as _launch

    program, source = _run.python_program("open('/sandbox/ran', 'w')", ())
    plan, _ = _run.build_plan(_run.Call(program, code=source))
    import fcntl

    launched = _launch.start(replace(plan, code=None))
    try:
        wait = time.monotonic() + PROMPTLY
        while not launched.waiting() and time.monotonic() < wait:
            time.sleep(0.01)
        launched.hand_over(source)
        code_file = launched._setup.code_file
        assert code_file is not None
        fcntl.fcntl(code_file.fileno(), _codefile.F_SETLEASE, fcntl.F_UNLCK)
        with pytest.raises(SandboxError, match="could not be handed its code"):
            launched.finish(plan)
    finally:
        launched.close()


@pytest.mark.no_bwrap
@pytest.mark.parametrize(
    ("value", "error", "words"),
    [
        (-1, ValueError, "warm must be at least 0"),
        (1.5, TypeError, "warm must be an int"),
        (True, TypeError, "warm must be an int"),
        ("2", TypeError, "warm must be an int"),
    ],
)
def test_warm_is_checked(value: object, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words):
        Runner(warm=value)  # type: ignore[arg-type]


def test_warm_zero_keeps_no_pool() -> None:
    with Runner(warm=0) as runner:
        assert runner.warm == 0 and runner.warm_ready == 0
        assert runner._pool is None


@pytest.fixture
def no_leases(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(_codefile, "_support_known", True)
    monkeypatch.setattr(_codefile, "_support", "this host refuses file leases (test)")
    yield


def test_a_host_without_leases_refuses_warm_with_the_fix(no_leases: None) -> None:
    with pytest.raises(SandboxError, match="refuses file leases"):
        Runner(warm=1)
