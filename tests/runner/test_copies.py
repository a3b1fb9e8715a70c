# SPDX-License-Identifier: MIT
"""Copies of a template (``Template(copies=True)``): each warm sandbox is a fork of one
sandbox that ran the set-up once, made into a sandbox of its own (``src/copy.c``).  Each
claim is checked by code that tries to break it and, where it can be, on the host: a
copy has its own pid, mount, network and IPC namespaces, its own ``/proc``, working
directory, identity (a root caller's) and limits; it cannot reach its template or a
sibling; the template never runs a call's code; nothing is left once the Runner closes.
The attack suite runs through copies too (``THROUGH_EVERY_PATH``)."""

from __future__ import annotations

import concurrent.futures
import json
import os
import time
from typing import Any

import pytest
from support.callers import Caller
from support.timing import slow
from support.warm import wait_ready

from pysandbox import Limits, Runner, SandboxError, Status, Template
from pysandbox._cgroups.ahead import drain as cgroup_drain
from pysandbox._launch.bwrap import SANDBOX_ID_BASE, SANDBOX_ID_SPAN

TEMPLATE = Template(
    imports=["xml.dom.minidom"],
    setup="import xml.dom.minidom\nsecret_of_setup = 42\n",
    files={"model/weights.txt": b"w"},
    copies=True,
)

#: What a copy sees of itself: its pids, its ids, its modules, its files.
LOOK = """
import json, os, sys
print(json.dumps({
    "pid": os.getpid(), "ppid": os.getppid(), "uid": os.getuid(), "gid": os.getgid(),
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "loaded": "xml.dom.minidom" in sys.modules,
    "files": sorted(os.listdir(".")), "cwd": os.getcwd(),
    "weights": open("model/weights.txt").read(),
    "status": {k: v.split() for k, v in (l.split(":", 1) for l in open("/proc/self/status"))
               if k.startswith("Cap") or k in ("NoNewPrivs", "Seccomp")},
}))
"""


def _look(runner: Runner, **keywords: object) -> dict[str, object]:
    result = runner.run_python(LOOK, **keywords)  # type: ignore[arg-type]
    assert result.status is Status.OK, result
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def _copies_of(runner: Runner) -> int:
    """How many copies ``runner``'s template sandboxes made, as the pool counts them."""
    pool = runner._pool
    assert pool is not None
    return pool.started


def test_a_copy_finds_the_template_done_in_a_sandbox_of_its_own() -> None:
    """The modules are loaded and the files in place; the copy is pid 2 under its own
    init, sees only its own two processes, has no capability, no_new_privs and the
    filter; a root caller's copies each have a uid of their own, in the sandboxes'
    range, as fresh sandboxes do."""
    with Runner(warm=2, template=TEMPLATE) as runner:
        wait_ready(runner)
        seen = [_look(runner) for _ in range(3)]
    for look in seen:
        assert look["pid"] == 2 and look["ppid"] == 1 and look["pids"] == [1, 2], look
        assert look["loaded"] and look["weights"] == "w" and look["cwd"] == "/sandbox", look
        assert "secret_of_setup" not in json.dumps(look)
        status = look["status"]
        assert isinstance(status, dict)
        for capabilities in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            assert status[capabilities] == ["0000000000000000"], status
        assert status["NoNewPrivs"] == ["1"], status
        assert status["Seccomp"] == ["2"], status
    uids = [look["uid"] for look in seen]
    if os.geteuid() == 0:
        assert len(set(uids)) == 3, uids
        assert all(SANDBOX_ID_BASE <= u < SANDBOX_ID_BASE + SANDBOX_ID_SPAN for u in uids)  # type: ignore[operator]
    else:
        assert set(uids) == {os.getuid()}


def test_copies_do_not_share_what_they_write() -> None:
    """A copy that rewrites the template's file and adds its own returns both; the next
    copy finds the template's file as the set-up left it and nothing of the first."""
    code = (
        "import os\n"
        "print(sorted(os.listdir('.')), open('model/weights.txt').read())\n"
        "open('model/weights.txt', 'w').write('changed')\n"
        "open('mine.txt', 'w').write('m')\n"
    )
    with Runner(warm=1, template=TEMPLATE) as runner:
        first = runner.run_python(code)
        second = runner.run_python(code)
    assert first.status is Status.OK and second.status is Status.OK, (first, second)
    assert first.stdout == second.stdout == b"['main.py', 'model'] w\n", (
        first.stdout,
        second.stdout,
    )
    assert first.files["model/weights.txt"] == b"changed" and first.files["mine.txt"] == b"m"


def test_the_template_never_runs_a_calls_code() -> None:
    """What one copy does to the modules the template loaded is its own: the next copy
    finds them as the set-up left them."""
    code = "import xml.dom.minidom as m\nprint(getattr(m, 'poisoned', False))\nm.poisoned = True\n"
    with Runner(warm=1, template=TEMPLATE) as runner:
        outputs = [runner.run_python(code).stdout for _ in range(3)]
    assert outputs == [b"False\n"] * 3


#: The port a copy listens on, on its own loopback device.
PORT = 47613

SIBLING = f"""
import socket, sys, time
listener = socket.create_server(("127.0.0.1", {PORT}))
with socket.create_connection(("127.0.0.1", {PORT})):  # its own loopback works
    pass
print("up", flush=True)
time.sleep(float(sys.argv[1]))
print("still here")
"""

ATTACKER = f"""
import os, signal, socket
found = {{"pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}}
try:
    os.kill(-1, signal.SIGKILL)  # every process this one may signal
except OSError as exc:
    found["kill"] = exc.errno
try:
    socket.create_connection(("127.0.0.1", {PORT}), timeout=2).close()
    found["reached"] = True
except OSError as exc:
    found["reached"] = exc.errno
print(found)
"""


def test_a_copy_cannot_reach_its_template_or_a_sibling() -> None:
    """While one copy sleeps, listening on its loopback device, another lists its pids,
    kills every process it may signal and connects to that port on its own loopback:
    it sees and kills only its own, finds nobody listening (each copy has its own
    network), the sibling runs to its end, and the template still makes copies."""
    nap = slow(3.0)
    with (
        Runner(warm=2, limits=Limits(wall_time=4 * nap + 10), template=TEMPLATE) as runner,
        concurrent.futures.ThreadPoolExecutor(2) as pool,
    ):
        wait_ready(runner, 2)
        sleeper = pool.submit(runner.run_python, SIBLING, args=[str(nap)])
        time.sleep(slow(0.5))
        attacker = runner.run_python(ATTACKER)
        slept = sleeper.result()
        after = _look(runner)
    assert slept.status is Status.OK and slept.stdout == b"up\nstill here\n", slept
    assert attacker.status is Status.OK, attacker
    assert b"'pids': [1, 2]" in attacker.stdout and b"'reached': 111" in attacker.stdout, attacker
    assert after["pids"] == [1, 2] and after["loaded"], after


def test_a_copys_limits_are_its_own_and_its_kill_is_prompt() -> None:
    """A copy that sleeps past its wall limit is killed at the limit (its init is
    pinned, not left to bwrap's last-resort kill); one that allocates past its memory
    limit fails alone; the next copy runs as if nothing happened."""
    limits = Limits(wall_time=1.0, memory=64 * 2**20)
    with Runner(warm=1, limits=limits, template=Template(copies=True)) as runner:
        wait_ready(runner)
        slept = runner.run_python("import time\ntime.sleep(30)\n")
        grown = runner.run_python("x = bytearray(256 * 2**20)\n")
        fine = runner.run_python("print('fine')\n")
    assert slept.status is Status.WALL_TIME_EXCEEDED, slept
    assert slept.wall_time < 1.0 + slow(1.5), slept.wall_time
    assert grown.status is Status.MEMORY_EXCEEDED, grown
    assert fine.status is Status.OK and fine.stdout == b"fine\n", fine


def _processes_in_the_sandbox_range() -> list[int]:
    """Pids of processes whose uid is one of the sandboxes' own (a root caller's)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                uid = os.stat(f"/proc/{entry}").st_uid
            except OSError:
                continue
            if SANDBOX_ID_BASE <= uid < SANDBOX_ID_BASE + SANDBOX_ID_SPAN:
                found.append(int(entry))
    return found


def test_nothing_of_a_template_or_its_copies_outlives_the_runner() -> None:
    """Once the Runner is closed, no process of a copy or of the template is left (a
    root caller's are all of the sandboxes' uids), whatever the copies left running,
    and this process holds no more fds than before."""
    if os.geteuid() != 0:
        pytest.skip("a non-root caller's processes are counted by the caller fixture's uids")
    fds = len(os.listdir("/proc/self/fd"))
    left_running = "import os, time\nif os.fork() == 0:\n    time.sleep(60)\n"
    with Runner(warm=2, template=TEMPLATE) as runner:
        for _ in range(3):
            assert runner.run_python(left_running).status is Status.OK
    deadline = time.monotonic() + slow(5.0)
    while _processes_in_the_sandbox_range() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_in_the_sandbox_range() == []
    # A cgroup's directories are removed by the cgroup reaper's thread, as for a fresh
    # call; its descriptors are open until then.
    assert cgroup_drain(30.0)
    assert len(os.listdir("/proc/self/fd")) <= fds


def test_a_failing_set_up_of_copies_raises_with_its_traceback() -> None:
    """The template's set-up runs once, in the template sandbox; when it fails, a call
    raises ``SandboxError`` with its traceback, as without copies."""
    failing = Template(setup="raise RuntimeError('no model here')", copies=True)
    with Runner(warm=1, template=failing) as runner, pytest.raises(SandboxError) as raised:
        runner.run_python("print(1)")
    assert "no model here" in str(raised.value)


def test_copies_start_in_milliseconds_whatever_the_set_up_costs() -> None:
    """A set-up of a second runs once: ten calls take far less than ten set-ups, and
    every one finds the file of the same set-up (the time it ran)."""
    slow_setup = Template(
        setup="import time\ntime.sleep(1.0)\nopen('/sandbox/ran', 'w').write(repr(time.time()))\n",
        copies=True,
    )
    with Runner(warm=1, template=slow_setup) as runner:
        wait_ready(runner)
        started = time.monotonic()
        results = [runner.run_python("print(open('ran').read())") for _ in range(10)]
        took = time.monotonic() - started
    assert all(r.status is Status.OK for r in results), results
    assert len({r.stdout for r in results}) == 1, [r.stdout for r in results]
    assert took < 10.0, took


def test_a_template_whose_kind_is_forgotten_ends_only_once_its_copies_have() -> None:
    """Ending a template sandbox ends its copies (they are in its pid namespace), so
    one whose kind the pool forgets while a call runs in its copy lives until that call
    has returned: the call ends as it would have, however many kinds came meanwhile."""
    with (
        Runner(warm=1, template=Template(copies=True)) as runner,
        concurrent.futures.ThreadPoolExecutor(1) as pool,
    ):
        wait_ready(runner)
        long_call = pool.submit(runner.run_python, "import time\ntime.sleep(2)\nprint('done')\n")
        time.sleep(slow(0.3))
        for seconds in range(2, 14):  # more kinds than the pool keeps (4 * 1 + 4)
            limits = Limits(wall_time=float(seconds))
            assert runner.run_python("print(1)", limits=limits).stdout == b"1\n"
        result = long_call.result()
    assert result.status is Status.OK and result.stdout == b"done\n", result


#: As the caller (``caller.run_script``): one copy sleeps while another lowers its
#: process group's priority and kills it; what the sleeper and the template saw, as
#: JSON.  The wall limit leaves room for the sleep however slow the machine.
GROUP_SCRIPT = r"""
import concurrent.futures, json, sys, time
sys.path.insert(0, sys.argv[1])
from pysandbox import Limits, Runner, Template
NAP = NAP_VALUE
SLEEPER = f"import os, time\ntime.sleep({NAP})\nprint(os.getpriority(os.PRIO_PROCESS, 0))\n"
ATTACKER = '''
import os, signal
os.setpriority(os.PRIO_PGRP, 0, 19)
os.kill(0, signal.SIGKILL)  # its group: itself too
'''
limits = Limits(wall_time=4 * NAP + 10)
with Runner(warm=2, limits=limits, template=Template(copies=True)) as runner, \
        concurrent.futures.ThreadPoolExecutor(1) as pool:
    while runner.warm_ready < 2:
        time.sleep(0.01)
    sleeper = pool.submit(runner.run_python, SLEEPER)
    time.sleep(NAP / 4)
    attacker = runner.run_python(ATTACKER)
    slept = sleeper.result()
    after = runner.run_python("print('after')")
print(json.dumps({
    "slept": [slept.status.name, slept.stdout.decode()],
    "attacker": [attacker.status.name, attacker.signal],
    "after": [after.status.name, after.stdout.decode()],
}))
"""


def test_a_copy_cannot_signal_or_slow_its_group(caller: Caller) -> None:
    """A copy is the leader of a session and a process group of its own (a process
    group is not bounded by a pid namespace): one that lowers its group's priority and
    kills its group ends itself only; a sibling copy of the same uid (a
    non-root caller's) sleeps to its end at its own priority, and the template still
    makes copies."""
    script = GROUP_SCRIPT.replace("NAP_VALUE", repr(slow(2.0)))
    verdict = caller.run_script(script, timeout=slow(60))
    assert verdict["slept"] == ["OK", "0\n"], verdict
    assert verdict["attacker"][0] != "OK", verdict
    assert verdict["after"] == ["OK", "after\n"], verdict


def test_a_set_up_that_leaves_shared_memory_gets_no_copy() -> None:
    """A writable ``MAP_SHARED`` mapping survives a fork shared: one the set-up left
    would be memory every copy and the template write to.  No copy is made of such a
    template; the call says why."""
    sharing = Template(setup="import mmap, sys\nsys.kept = mmap.mmap(-1, 4096)\n", copies=True)
    with Runner(warm=1, template=sharing) as runner, pytest.raises(SandboxError) as raised:
        runner.run_python("print(1)")
    assert "writable shared mapping" in str(raised.value), raised.value


def test_a_copys_launch_makes_no_code_file_and_opens_no_readable_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A copy gets its code in the hand-over and is shown the readable paths by its
    template: its launch makes no host code file (a temporary directory) and opens no
    readable path again (a parse of the mount table), which a copy's hot path would pay
    for nothing.  The copies still see the path and run their code."""
    from pysandbox._launch import codefile, command

    made: list[str] = []
    real_code_file, real_open_readable = codefile.CodeFile.__init__, command.open_readable

    def code_file(self: codefile.CodeFile, *args: Any, **keywords: Any) -> None:
        made.append("code file")
        real_code_file(self, *args, **keywords)

    def open_readable(*args: Any) -> int:
        made.append("readable")
        return real_open_readable(*args)

    monkeypatch.setattr(codefile.CodeFile, "__init__", code_file)
    monkeypatch.setattr(command, "open_readable", open_readable)
    code = f"print(open({__file__!r}).read().startswith('# SPDX'))"
    with Runner(warm=1, template=TEMPLATE) as runner:
        runner.run_python(code, readable=[__file__])
        wait_ready(runner)
        del made[:]
        results = []
        for _ in range(3):
            results.append(runner.run_python(code, readable=[__file__]))
            wait_ready(runner)
        copies = _copies_of(runner)
    assert [(r.status, r.stdout) for r in results] == [(Status.OK, b"True\n")] * 3, results
    assert made == [] and copies >= 4, (made, copies)


#: Pins itself to each CPU in turn and asks the C library which CPU it runs on.
WHICH_CPU = """
import ctypes, json, os
libc = ctypes.CDLL(None)
seen = {}
for cpu in sorted(os.sched_getaffinity(0))[:2]:
    os.sched_setaffinity(0, {cpu})
    seen[cpu] = libc.sched_getcpu()
print(json.dumps(sorted(seen.items())))
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to move between")
def test_a_copys_program_knows_which_cpu_it_runs_on() -> None:
    """The C library reads the CPU number from the thread's rseq area, which the kernel
    keeps up to date only for a registered thread: a copy's program registers it again,
    as a fresh program's C library did, so the number follows the program from CPU to
    CPU instead of staying the template's."""
    with Runner(warm=1, template=Template(copies=True)) as runner:
        runner.run_python("pass")
        pool = runner._pool
        assert pool is not None
        results, taken = [], pool.taken
        for _ in range(3):
            wait_ready(runner)
            results.append(runner.run_python(WHICH_CPU))
        taken = pool.taken - taken
    for result in results:
        assert result.status is Status.OK, result
        assert all(cpu == seen for cpu, seen in json.loads(result.stdout)), result.stdout
    assert taken == 3, taken
