# SPDX-License-Identifier: MIT
"""Issue 21, item 4: hostile code attacks a ``Session`` and its channel to the host.

The code of a session shares its uid with the keeper (``session_keeper.py``): it can
write anything to the pipes it holds (the result pipe to the keeper, its stdout and
stderr), forge the keeper's frames, flood them, stop or kill the keeper and the state
process, start processes that try to outlive the call, and try every one-shot attack of
``test_attacks.py``.  Each test runs such code for real and checks FROM THE HOST that
the caller got a well-formed ``CellResult`` (or a documented ``SandboxError``) in
bounded time, that its memory did not grow with the flood, and that no process of the
session is left once the call (or ``close()``) returned.

The host finds a session's processes as the children tree of the calling process
(``descendants``): taken before the session starts and while it runs, the difference is
the session (bwrap, the init, the keeper, the state, the call and what it started).
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from support.callers import Caller
from support.processes import (
    parent_of,
    pid_state,
    pids_with_marker,
    start_time,
    survivors,
    unique_marker,
)
from support.timing import PROMPTLY, cpu, slow

from pysandbox import CellResult, Limits, SandboxError, Session, Status
from pysandbox._api.session import GRACE
from pysandbox._model.session_result import OUTCOMES

MiB = 2**20
#: A call's wall time in these tests: short, since most attacks end at or before it.
WALL = 2.0
#: The latest a call may return: its wall time, the host's grace, and slack for a
#: busy machine (a broken promise would hang for good, or for the session's lifetime).
CALL_BOUND = WALL + GRACE + PROMPTLY
#: How much the caller's resident memory may grow across an attack that floods: the
#: host keeps at most one call's caps (1 MiB here) and one pipe read (1 MiB).
RSS_GROWTH = 64 * MiB
#: Per-call limits of the attacks: small output caps, so a flood is cut early.
LIMITS = Limits(wall_time=WALL, cpu_time=cpu(1.5), stdout=MiB, stderr=MiB)

# --------------------------------------------------------------------------- helpers


def descendants(root: int) -> dict[int, int | None]:
    """Every process under ``root`` (zombies included), with its start time, from the
    children files of all its threads and theirs."""
    found: dict[int, int | None] = {}
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
                        found[int(child)] = start_time(int(child))
                        pending.append(int(child))
    return found


def living(processes: Mapping[int, int | None]) -> dict[int, str]:
    """Those of ``processes`` (pid: start time) that are still the same process, with
    their state (a zombie counts: it was not reaped)."""
    alive = {}
    for pid, started in processes.items():
        now = pid_state(pid)
        if started is not None and start_time(pid) == started and now not in ("", "X"):
            alive[pid] = now
    return alive


def wait_gone(processes: Mapping[int, int | None], within: float) -> dict[int, str]:
    """Poll until none of ``processes`` lives or ``within`` passed; those still there,
    SIGKILLed (this test started them) so a failure leaves nothing behind."""
    deadline = time.monotonic() + within
    while (left := living(processes)) and time.monotonic() < deadline:
        time.sleep(0.02)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return left


def rss() -> int:
    """The caller's resident memory, in bytes."""
    with open("/proc/self/status", "rb") as status:
        for line in status:
            if line.startswith(b"VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Watched:
    """A session under watch: the processes it is made of, seen from the host."""

    def __init__(self, session: Session, before: Mapping[int, int | None]) -> None:
        self.session = session
        # Its roots: the caller's children that were not there before it started (its
        # bwrap).  Another session started later is not below them.
        self.roots = {
            pid: started
            for pid, started in descendants(os.getpid()).items()
            if before.get(pid) != started and parent_of(pid) == os.getpid()
        }
        self.seen: dict[int, int | None] = {}

    def look(self) -> dict[int, int | None]:
        """The session's processes now, also kept in ``seen``."""
        now = {pid: self.roots[pid] for pid in living(self.roots)}
        for root in list(now):
            now.update(descendants(root))
        self.seen.update(now)
        return now


@contextlib.contextmanager
def watched_session(**options: object) -> Iterator[Watched]:
    """A ``Session`` (limits ``LIMITS`` unless given) whose processes the host records;
    after ``close()``, every one of them must be gone and reaped."""
    options.setdefault("limits", LIMITS)
    before = descendants(os.getpid())
    session = Session(**options)  # type: ignore[arg-type]
    watch = Watched(session, before)
    try:
        assert watch.roots, "the session's bwrap is no child of the caller"
        watch.look()
        yield watch
    finally:
        watch.look()
        session.close()
    left = wait_gone(watch.seen, slow(0.5))
    assert left == {}, f"processes of the session outlived close(): {left}"
    assert not session.alive


def timed_run(watch: Watched, code: str, **options: object) -> tuple[CellResult, float]:
    """``watch.session.run(code)``, its wall time seen by the caller; the session's tree
    is recorded while the call runs (by a thread) so that whatever it starts is checked."""
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            watch.look()
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.monotonic()
    try:
        result = watch.session.run(code, **options)  # type: ignore[arg-type]
    finally:
        elapsed = time.monotonic() - started
        stop.set()
        sampler.join()
    return result, elapsed


def well_formed(result: object) -> CellResult:
    """``result`` is a ``CellResult`` whose fields have their documented types."""
    assert isinstance(result, CellResult), type(result)
    assert result.outcome in OUTCOMES, result.outcome
    assert isinstance(result.status, Status)
    assert isinstance(result.stdout, bytes) and isinstance(result.stderr, bytes)
    assert len(result.stdout) <= LIMITS.stdout and len(result.stderr) <= LIMITS.stderr
    assert result.value is None or isinstance(result.value, str)
    assert isinstance(result.reason, str)
    assert isinstance(result.files, Mapping)
    return result


def lost_for_good(watch: Watched, result: CellResult) -> None:
    """The call lost the session: the result says why, the session refuses more calls."""
    assert result.outcome == "lost", result
    assert result.reason, result
    assert not watch.session.alive
    with pytest.raises(SandboxError, match="the session has ended"):
        watch.session.run("1")


def report_of(result: CellResult) -> dict[str, object]:
    """The JSON report a call printed on its last line of stdout."""
    lines = result.stdout.strip().splitlines()
    assert lines, result
    report = json.loads(lines[-1])
    assert isinstance(report, dict)
    return report


#: Sandbox-side helpers of the attacks: the keeper's frame format and the pipes the call
#: process holds (the result pipe is the one whose other end is the keeper's).
PRELUDE = """
import errno, json, os, signal, struct, sys, time

def frame(kind, payload):
    return struct.pack(">BI", ord(kind), len(payload)) + payload

def result_pipes():
    fds = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if fd > 2 and os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                os.set_blocking(fd, True)
                os.write(fd, b"")
                fds.append(fd)
        except OSError:
            pass  # the fd of the listing itself, gone; a read end
    return fds

def send(data):
    fds = result_pipes()
    assert fds, "no writable pipe"
    for fd in fds:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]

def parent(pid):
    with open(f"/proc/{pid}/stat", "rb") as stat:
        return int(stat.read().rsplit(b")", 1)[1].split()[1])

def tree():
    # The keeper is the init's child; the state this call's parent (the state it
    # replaced may still be between them, as it ends).
    state = keeper = os.getppid()
    while parent(keeper) != 1:
        keeper = parent(keeper)
    return keeper, state
"""


def attack_code(code: str) -> str:
    return PRELUDE + textwrap.dedent(code)


# --------------------------------------------------------------------------- item 1

#: What a call writes to the keeper's result pipe, and then does.  Each would confuse a
#: keeper or host that trusted it.
GARBAGE = {
    # A megabyte of random bytes: headers of random kinds and lengths.
    "random_bytes": "send(os.urandom(MiB))\n",
    # The host's own DONE frame, well formed, on the keeper's pipe.
    "host_frames": (
        "done = json.dumps({'outcome': 'committed', 'status': 'ok', 'value': '42'}).encode()\n"
        "send(frame('D', done) * 100)\n"
    ),
    # A header that promises more than ever comes, then the call ends normally.
    "partial_frame": "send(struct.pack('>BI', ord('f'), 1000) + b'{' * 10)\n",
    # Garbage, then the call keeps running: the keeper must still end it at its wall time.
    "garbage_then_loop": "send(os.urandom(4096))\nwhile True: pass\n",
    # Every fd of every process of the sandbox that opens for writing gets a forged frame
    # in the host's format: the reply pipe to the host, if the call could reach it.
    "every_fd_in_proc": """
        done = frame('D', json.dumps({'outcome': 'committed', 'status': 'ok'}).encode())
        reached = []
        for pid in [p for p in os.listdir('/proc') if p.isdigit()]:
            try:
                names = os.listdir(f'/proc/{pid}/fd')
            except OSError:
                continue
            for name in names:
                try:
                    fd = os.open(f'/proc/{pid}/fd/{name}', os.O_WRONLY | os.O_NONBLOCK)
                except OSError:
                    continue
                with contextlib.suppress(OSError):
                    os.write(fd, done + os.urandom(256))
                    reached.append(f'{pid}/{name}')
                os.close(fd)
        print(json.dumps(reached), flush=True)
    """,
}


@pytest.mark.parametrize("attack", sorted(GARBAGE))
def test_garbage_on_the_pipes_loses_at_most_the_session(attack: str) -> None:
    """The call writes garbage or forged frames to every pipe it can reach: the keeper's
    result pipe, and, through ``/proc/PID/fd``, anything of another process that opens
    for writing.  The host gets a well-formed result within the call's wall time plus
    the grace, no error escapes, the caller's memory stays put, and a lost session
    leaves no process behind."""
    code = "import contextlib\nMiB = 2**20\n" + textwrap.dedent(GARBAGE[attack])
    grown = 0
    with watched_session() as watch:
        assert watch.session.run("x = 'kept'").outcome == "committed"
        memory = rss()
        result, elapsed = timed_run(watch, attack_code(code))
        grown = rss() - memory
        well_formed(result)
        assert elapsed < CALL_BOUND, (elapsed, result)
        if result.outcome == "lost":
            lost_for_good(watch, result)
        else:
            # The keeper saw through it: the call ended as calls end, the session goes
            # on, and a forged value never became the call's.
            assert result.value != "42", result
            assert result.error is None, result.error  # the attack itself ran whole
            after = watch.session.run("x")
            assert (after.outcome, after.value) == ("committed", repr("kept")), after
    assert grown < RSS_GROWTH, grown


def test_flood_of_output_grows_nothing_on_the_host() -> None:
    """The call writes its stdout and stderr as fast as it can, forever: the keeper cuts
    it at the caps, the host keeps at most the caps, and the call is rolled back with
    the session intact."""
    with watched_session() as watch:
        watch.session.run("x = 1")
        memory = rss()
        result, elapsed = timed_run(
            watch,
            "import os\nchunk = b'x' * 65536\nwhile True:\n"
            "    os.write(1, chunk)\n    os.write(2, chunk)\n",
        )
        grown = rss() - memory
        well_formed(result)
        assert elapsed < CALL_BOUND
        assert (result.outcome, result.status) == ("rolled_back", Status.OUTPUT_EXCEEDED), result
        assert watch.session.run("x").value == "1"
    assert grown < RSS_GROWTH, grown


# --------------------------------------------------------------------------- item 2

#: Forged results on the keeper's pipe, each one the keeper would pass on or choke on:
#: the host must end the session (``lost``) without trusting any of it.
FORGED = {
    # A header claiming 4 GiB: neither the keeper nor the host may try to buffer it.
    "four_gib_header": "send(struct.pack('>BI', ord('f'), 0xFFFFFFFF) + b'x' * 65536)\n",
    # A FINISHED whose value nests 500 deep: the keeper's json passes it on in DONE.
    "nested_value": (
        "v = '[' * 500 + ']' * 500\n"
        'send(frame(\'f\', (\'{"pid": %d, "error": null, "value": %s}\' '
        "% (os.getpid(), v)).encode()))\n"
        "time.sleep(100)\n"
    ),
    # A FINISHED nesting 200,000 deep: past what the keeper's json can parse at all.
    "deeply_nested": (
        "send(frame('f', b'{\"pid\": 1, \"value\": ' + b'[' * 200000 + b']' * 200000 + b'}'))\n"
        "time.sleep(100)\n"
    ),
    # A FINISHED with fields of the wrong types.
    "wrong_types": (
        "send(frame('f', json.dumps({'pid': os.getpid(), 'value': 7, "
        "'error': {'type': [1], 'message': None}}).encode()))\n"
        "time.sleep(100)\n"
    ),
    # A FINISHED naming a pid that is not the call (the init).
    "foreign_pid": (
        "send(frame('f', json.dumps({'pid': 1, 'value': None, 'error': None}).encode()))\n"
        "time.sleep(100)\n"
    ),
    # A FINISHED whose value is two megabytes: past the host's cap on a DONE.
    "huge_value": (
        "send(frame('f', json.dumps({'pid': os.getpid(), 'value': 'v' * (2 << 20), "
        "'error': None}).encode()))\n"
        "time.sleep(100)\n"
    ),
    # An ENDED (the state's report of the call's end) with a status that is no int.
    "ended_bad_status": (
        "send(frame('e', json.dumps({'pid': 5, 'status': 'x', 'cpu': 0, "
        "'max_rss': 0}).encode()))\n"
        "time.sleep(100)\n"
    ),
    # An ENDED with a CPU time of NaN, which JSON cannot say and the host must refuse.
    "ended_nan_cpu": (
        'send(frame(\'e\', b\'{"pid": 5, "status": 9, "cpu": NaN, "max_rss": -1}\'))\n'
        "time.sleep(100)\n"
    ),
    # An unknown kind of result.
    "unknown_kind": "send(frame('z', b'{}'))\ntime.sleep(100)\n",
}


@pytest.mark.parametrize("attack", sorted(FORGED))
def test_forged_results_lose_the_session(attack: str) -> None:
    """The call forges the state's and call's reports on the keeper's result pipe: too
    long, too deep, of the wrong types, of a foreign pid.  The host returns a
    well-formed result, ``lost`` unless the forgery was harmless, within the call's
    wall time plus the grace; the session then refuses calls, and nothing is left."""
    with watched_session() as watch:
        result, elapsed = timed_run(watch, attack_code(FORGED[attack]))
        well_formed(result)
        assert elapsed < CALL_BOUND, (elapsed, result)
        if attack in ("foreign_pid", "ended_bad_status", "ended_nan_cpu", "unknown_kind"):
            # The keeper itself is fooled or crashes: no sane answer can come.
            lost_for_good(watch, result)
        elif result.outcome != "lost":
            assert result.error is None, result.error  # the attack itself ran whole
            # Only a harmless reading is acceptable: never the forged value as data.
            assert result.value is None or len(result.value) <= 65536, result
            assert result.error is None or isinstance(result.error.type, str)
        else:
            lost_for_good(watch, result)


# --------------------------------------------------------------------------- item 3

#: Attacks on the session's own processes: the keeper (the state's parent), the state
#: (the call's parent), everything.  ``tree()`` gives ``(keeper, state)``.
KILLS = {
    "kill_parent_chain": """
        keeper, state = tree()
        os.kill(keeper, signal.SIGKILL)
        os.kill(state, signal.SIGKILL)
        time.sleep(100)
    """,
    "kill_everything": """
        for pid in [int(p) for p in os.listdir('/proc') if p.isdigit()]:
            if pid != os.getpid():
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        time.sleep(100)
    """,
    "kill_minus_one": """
        os.kill(-1, signal.SIGKILL)
        time.sleep(100)
    """,
    "stop_keeper": """
        keeper, state = tree()
        os.kill(keeper, signal.SIGSTOP)
        while True: pass
    """,
    "stop_keeper_then_finish": """
        keeper, state = tree()
        os.kill(keeper, signal.SIGSTOP)
    """,
    "stop_state_then_loop": """
        keeper, state = tree()
        os.kill(state, signal.SIGSTOP)
        while True: pass
    """,
}


@pytest.mark.parametrize("attack", sorted(KILLS))
def test_killing_or_stopping_the_keeper(attack: str) -> None:
    """The call kills or stops the keeper and the state process (its parent chain,
    every pid of its ``/proc``, ``kill -1``).  The call returns within its wall time
    plus ``GRACE`` plus slack with a well-formed result: ``lost`` when the keeper can
    no longer answer (a stopped state may instead read as a rolled-back call, and the
    session must then still hold its state); after ``close()`` nothing is left."""
    with watched_session() as watch:
        watch.session.run("x = 41")
        result, elapsed = timed_run(watch, attack_code(KILLS[attack]))
        well_formed(result)
        assert elapsed < CALL_BOUND, (elapsed, result)
        if attack == "stop_state_then_loop" and result.outcome == "rolled_back":
            after = watch.session.run("x + 1", wall_time=slow(2))
            assert after.outcome in ("committed", "lost"), after
            if after.outcome == "committed":
                assert after.value == "42"
        else:
            lost_for_good(watch, result)


def test_state_thread_kills_the_keeper_between_calls() -> None:
    """A committed call leaves a thread in the state process that kills the keeper once
    the call has returned: the session ends between calls.  The next ``run`` raises
    the documented ``SandboxError`` or returns ``lost``, promptly; nothing is left."""
    code = """
        import threading
        def later():
            time.sleep(0.3)
            os.kill(os.getppid(), signal.SIGKILL)  # in the state: its parent, the keeper
        threading.Thread(target=later, daemon=True).start()
    """
    with watched_session() as watch:
        first, _ = timed_run(watch, attack_code(code))
        assert first.outcome == "committed", first
        time.sleep(1.0)
        started = time.monotonic()
        try:
            second = watch.session.run("1")
        except SandboxError as exc:
            assert "ended" in str(exc)
        else:
            lost_for_good(watch, well_formed(second))
        assert time.monotonic() - started < CALL_BOUND


#: The caller of ``test_kill_everything_as_each_caller``, in a fresh process of the
#: caller's uid: one session, the attack, the session's process tree recorded from the
#: host while it lives, then closed; the verdict as JSON.
KILL_SCRIPT = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from pysandbox import Limits, Session

def children(root):
    found, pending = [], [root]
    while pending:
        pid = pending.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children") as file:
                    kids = [int(kid) for kid in file.read().split()]
            except OSError:
                continue
            found += kids
            pending += kids
    return found

def started(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return int(stat.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None

session = Session(limits=Limits(wall_time=WALL, cpu_time=5))
tree = {pid: started(pid) for pid in children(os.getpid())}
session.run("x = 1")
started = time.monotonic()
result = session.run(CODE)
elapsed = time.monotonic() - started
session.close()
print(json.dumps({"outcome": result.outcome, "elapsed": elapsed, "tree": tree,
                  "alive": session.alive}))
"""


def test_kill_everything_as_each_caller(caller: Caller) -> None:
    """``kill_everything`` from a session of a root caller and of a non-root one (each a
    fresh process of its uid): ``lost`` in bounded time, and every process the session
    had is gone after ``close()`` (for a non-root caller the ``caller`` fixture also
    finds no process of its uid left)."""
    script = KILL_SCRIPT.replace("WALL", repr(WALL)).replace(
        "CODE", repr(attack_code(KILLS["kill_everything"]))
    )
    verdict = caller.run_script(script, timeout=slow(20))
    assert verdict["outcome"] == "lost", verdict
    assert verdict["elapsed"] < CALL_BOUND, verdict
    assert verdict["alive"] is False
    tree = {int(pid): started for pid, started in verdict["tree"].items()}
    assert len(tree) >= 3, verdict  # bwrap, the init, the keeper at least
    assert wait_gone(tree, slow(0.5)) == {}


# --------------------------------------------------------------------------- item 4

SPY = """
import json, os, signal
report = {"sandbox": sorted(os.listdir("/sandbox")),
          "proc": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}
for pid in OTHERS:
    try:
        os.kill(pid, signal.SIGKILL)
        report[str(pid)] = "done"
    except OSError as exc:
        report[str(pid)] = errno.errorcode.get(exc.errno, str(exc.errno))
print(json.dumps(report), flush=True)
"""


def test_one_session_cannot_see_or_touch_another() -> None:
    """Two sessions at once: a file one writes in its ``/sandbox`` is absent in the
    other's, its ``/proc`` lists none of the other's processes, and its signals to the
    other's processes (by their host pids) fail; the other's state is untouched."""
    name = f"secret-{uuid.uuid4().hex}"
    with watched_session() as first, watched_session() as second:
        assert first.session.run(f"open({name!r}, 'w').write('one'); x = 1").outcome == (
            "committed"
        )
        assert second.session.run("x = 2").outcome == "committed"
        first_pids = sorted(first.look())
        second_pids = sorted(second.look())
        assert first_pids and second_pids
        spy = "import errno\n" + SPY.replace("OTHERS", repr(first_pids))
        result, _ = timed_run(second, spy)
        assert result.outcome == "committed", result
        report = report_of(result)
        assert name not in report["sandbox"], report
        assert len(report["proc"]) <= 6, report  # its own init, keeper, state, call
        assert not set(report["proc"]) & set(first_pids), report
        for pid in first_pids:
            assert report[str(pid)] == "ESRCH", report
        # The other way round too.
        spy = "import errno\n" + SPY.replace("OTHERS", repr(second_pids))
        back = report_of(first.session.run(spy))
        assert name in back["sandbox"]
        for pid in second_pids:
            assert back[str(pid)] == "ESRCH", back
        assert first.session.run("x").value == "1"
        assert second.session.run("x").value == "2"
        assert living({pid: start_time(pid) for pid in first_pids}), "the first session died"


# --------------------------------------------------------------------------- item 5

#: A caller that opens a session, starts a call that runs for good with a child whose
#: command line holds the marker, says so and waits to be killed.
DYING_CALLER = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
from pysandbox import Limits, Session
marker, mode = sys.argv[2], sys.argv[3]
session = Session(limits=Limits(wall_time=60, cpu_time=60))
code = (
    "import subprocess, sys, time\n"
    f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', {marker!r}])\n"
    "print('ready', flush=True)\n"
)
if mode == "in_call":
    print("calling", flush=True)
    session.run(code + "time.sleep(300)\n")
else:
    session.run("x = 1")
    print("ready", flush=True)
    sys.stdin.read()
"""


@pytest.mark.parametrize("mode", ["in_call", "between_calls"])
def test_session_dies_with_its_caller(mode: str) -> None:
    """A caller process opens a session and is SIGKILLed, in a call (whose child holds
    a marker) or between calls: within a few seconds nothing of its sandbox is alive
    (bwrap, the init, the keeper, the state, the call, the call's child)."""
    import pysandbox

    marker = unique_marker()
    package = str(Path(pysandbox.__file__).parents[1])
    with subprocess.Popen(
        [sys.executable, "-c", DYING_CALLER, package, marker, mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    ) as proc:
        try:
            assert proc.stdout is not None
            if mode == "in_call":
                assert proc.stdout.readline() == b"calling\n"
                deadline = time.monotonic() + slow(5)
                while not pids_with_marker(marker, bwrap=False):
                    assert time.monotonic() < deadline, "the call's child never started"
                    time.sleep(0.02)
            else:
                assert proc.stdout.readline() == b"ready\n"
            tree = descendants(proc.pid)
            assert len(tree) >= 4, tree  # bwrap, the init, the keeper, the state
        finally:
            proc.kill()
            proc.wait()
    left = wait_gone(tree, slow(1.0))
    assert left == {}, f"processes of the dead caller's session: {left}"
    assert survivors(marker, within=slow(0.5)) == []


# --------------------------------------------------------------------------- item 6

BACKGROUND = {
    "popen": "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(100)', MARKER])\n",
    "fork": (
        "if os.fork() == 0:\n"
        "    os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(100)', "
        "MARKER])\n"
    ),
    "plain_fork": "if os.fork() == 0:\n    time.sleep(100)\n    os._exit(0)\n",
    "daemon": (
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "        signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "        os.execv(sys.executable, [sys.executable, '-c', "
        "'import time; time.sleep(100)', MARKER])\n"
        "    os._exit(0)\n"
    ),
}


def settled(watch: Watched) -> dict[int, str]:
    """The session's living processes once the state that the last commit replaced is
    gone: it is killed at the commit and reaped right after the answer (a large state
    takes milliseconds to unmap), so give it that moment, no more; a process or zombie
    of a call itself stays and is seen."""
    deadline = time.monotonic() + PROMPTLY
    now = living(watch.look())
    while time.monotonic() < deadline:
        time.sleep(0.02)
        later = living(watch.look())
        if later == now and "Z" not in later.values():
            break
        now = later
    return now


@pytest.mark.parametrize("ending", ["committed", "rolled_back"])
@pytest.mark.parametrize("kind", sorted(BACKGROUND))
def test_background_processes_do_not_outlive_the_call(kind: str, ending: str) -> None:
    """A call starts a process that would sleep for good (``Popen``, a fork that execs, a
    plain fork, a double-forked daemon that ignores SIGTERM and SIGHUP), then ends
    normally or loops until its wall time.  When ``run`` returns, the host finds no
    such process and no zombie: the session has exactly the processes it had before
    the call, and the state still works."""
    marker = unique_marker()
    tail = "" if ending == "committed" else "while True: pass\n"
    code = (
        "import os, signal, subprocess, sys, time\n"
        f"MARKER = {marker!r}\n" + BACKGROUND[kind] + "time.sleep(0.2)\n" + tail
    )
    with watched_session() as watch:
        watch.session.run("x = 1")
        before = settled(watch)
        result, elapsed = timed_run(watch, code)
        after = settled(watch)
        assert result.outcome == ending, result
        assert elapsed < CALL_BOUND
        assert pids_with_marker(marker) == [], "a call's process outlived the call"
        assert "Z" not in after.values(), f"a zombie of the call: {after}"
        assert len(after) == len(before), (before, after)
        if ending == "rolled_back":
            # The state is the very process it was before the call; only the spare call
            # process it forks after each call (the killed call's successor) is new.
            gone, new = set(before) - set(after), set(after) - set(before)
            assert len(gone) <= 1 and len(new) == len(gone), (before, after)
            assert all(parent_of(pid) in before for pid in new), (before, after)
        assert watch.session.run("x").value == "1"
    assert survivors(marker, within=0.1) == []


# --------------------------------------------------------------------------- item 7


def session_attack(code: str, **options: object) -> dict[str, object]:
    """Run an attack as a session's second call; its committed report."""
    with watched_session(**options) as watch:
        watch.session.run("import ctypes, errno, json, os, sys\nreport = {}")
        result, _ = timed_run(
            watch,
            "report = {}\n"
            "def attempt(key, action):\n"
            "    try:\n"
            "        action()\n"
            "        report[key] = 'done'\n"
            "    except OSError as exc:\n"
            "        report[key] = errno.errorcode.get(exc.errno, str(exc.errno))\n"
            + textwrap.dedent(code)
            + "\nprint(json.dumps(report), flush=True)\n",
            wall_time=slow(5),
        )
        assert result.outcome == "committed", result
        assert result.error is None, result.error
        return report_of(result)


def test_host_files_are_out_of_reach(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As ``test_callers_secrets_are_out_of_reach``: the caller's environment, a file of
    the caller's, the host's password files, the keeper's own source and the keeper's
    memory and fds are all out of reach of a call."""
    secret = uuid.uuid4().hex
    monkeypatch.setenv("PYSANDBOX_SESSION_SECRET", secret)
    path = tmp_path / "secret.txt"
    path.write_text(secret)
    report = session_attack(
        f"""
        report["env"] = dict(os.environ)
        for p in ("/etc/shadow", "/etc/passwd", {str(path)!r}, "/proc/1/root/etc/shadow",
                  "/proc/1/environ", "/proc/2/environ", "/proc/2/mem"):
            attempt("read " + p, lambda: open(p, "rb").read(64))
        attempt("list keeper fds", lambda: os.listdir("/proc/2/fd"))
        attempt("write keeper", lambda: open("/.pysandbox-session/keeper.py", "a").write("x"))
        attempt("replace keeper", lambda: os.rename("/sandbox", "/.pysandbox-session/k"))
        """
    )
    assert secret not in json.dumps(report)
    assert "PYSANDBOX_SESSION_SECRET" not in report.pop("env")  # type: ignore[operator]
    assert {key for key, value in report.items() if value == "done"} == set(), report
    assert report["read /etc/shadow"] == "ENOENT"
    assert report[f"read {path}"] == "ENOENT"


def test_writes_outside_the_working_directory_fail() -> None:
    """Creating files in ``/etc``, ``/lib``, ``/proc``, ``/sys`` and the keeper's
    directory fails from a call; none appears on the host."""
    name = f"pysandbox-session-{uuid.uuid4().hex}"
    targets = [os.path.join(d, name) for d in ("/etc", "/lib", "/proc", "/sys", "/usr")]
    report = session_attack(
        f"""
        for p in {targets!r} + ["/.pysandbox-session/{name}"]:
            attempt("create " + p, lambda: open(p, "x").close())
        attempt("chmod /", lambda: os.chmod("/", 0o777))
        def lower():
            fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
            try:
                os.write(fd, b"-1000")
            finally:
                os.close(fd)
        attempt("lower own oom_score_adj", lower)
        """
    )
    assert {key for key, value in report.items() if value == "done"} == set(), report
    for path in targets:
        assert not os.path.lexists(path)


def test_no_network_from_a_session() -> None:
    """TCP and UDP to real host listeners from a call: nothing reaches them."""
    with contextlib.ExitStack() as stack:
        tcp = stack.enter_context(socket.create_server(("127.0.0.1", 0)))
        udp = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        udp.bind(("127.0.0.1", 0))
        report = session_attack(
            f"""
            import socket
            def tcp():
                with socket.create_connection(("127.0.0.1", {tcp.getsockname()[1]}), 2):
                    pass
            def udp():
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                    sock.sendto(b"escaped", ("127.0.0.1", {udp.getsockname()[1]}))
                    sock.settimeout(1)
                    sock.recv(1)
            attempt("tcp", tcp)
            attempt("udp", udp)
            """
        )
        tcp.setblocking(False)
        udp.setblocking(False)
        with pytest.raises(BlockingIOError):
            tcp.accept()
        with pytest.raises(BlockingIOError):
            udp.recv(100)
    assert report["tcp"] in ("ECONNREFUSED", "ENETUNREACH"), report
    assert report["udp"] != "done", report


def test_host_processes_survive_kill_from_a_session() -> None:
    """A call kills host processes by pid (a sleeper of root, the test process) and
    ``kill -1``: the host ones live on, the session is lost or goes on."""
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        with watched_session() as watch:
            code = (
                "import os, signal\n"
                f"for pid in ({sleeper.pid}, {os.getpid()}):\n"
                "    try:\n"
                "        os.kill(pid, signal.SIGKILL)\n"
                "    except OSError:\n"
                "        pass\n"
                "os.kill(-1, signal.SIGKILL)\n"
            )
            result, elapsed = timed_run(watch, code)
            well_formed(result)
            assert elapsed < CALL_BOUND
        assert sleeper.poll() is None, "a host process was killed"
        os.kill(os.getpid(), 0)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_literal_result_is_data() -> None:
    """A cell's value comes back as its ``repr`` text, never evaluated on the host: a
    value whose repr is code stays a string."""
    with watched_session() as watch:
        result = watch.session.run(
            "class Evil:\n"
            "    def __repr__(self):\n"
            "        return \"__import__('os').system('touch /tmp/pwned')\"\n"
            "Evil()"
        )
        assert result.outcome == "committed"
        assert isinstance(result.value, str)
        with pytest.raises(ValueError):
            ast.literal_eval(result.value)
