# SPDX-License-Identifier: MIT
"""``Session``: state that lives between calls, exceptions as data, rollback of a call
that a limit ended or that crashed the interpreter, per-call and per-session limits,
and nothing of a session left on the host once it is closed.

Every session runs the real thing: bwrap, the init, the keeper, fork per call.  The
host side looks for a session's processes by a marker in its bwrap's command line (an
environment variable of the session), and for a call's by a marker in theirs.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from support.processes import children_of, pids_with_marker, survivors, unique_marker
from support.timing import PROMPTLY, cpu, slow

from pysandbox import CellResult, Limits, SandboxError, Session, Status

LIMITS = Limits(wall_time=slow(5), cpu_time=1)


def session_pids(marker: str) -> list[int]:
    """The session's bwrap and every process below it, from the host."""
    found = pids_with_marker(marker)
    pending = list(found)
    while pending:
        children = children_of(pending.pop())
        found += children
        pending += children
    return found


@pytest.fixture
def marked() -> Iterator[tuple[Session, str]]:
    """A session whose processes the host can find, closed and checked gone after."""
    marker = unique_marker()
    session = Session(limits=LIMITS, env={"PYSANDBOX_TEST_MARKER": marker})
    try:
        yield session, marker
    finally:
        session.close()
        assert survivors(marker, within=PROMPTLY) == []


def test_state_lives_between_calls_as_in_a_notebook(marked: tuple[Session, str]) -> None:
    session, _ = marked
    assert session.run("import math\nx = 20").committed
    session.run("def double(n):\n    return 2 * n\nclass Box:\n    size = 1")
    result = session.run("print(double(x) + 2)\nBox.size + math.floor(1.5)")
    assert result.stdout == b"42\n" and result.value == "2", result
    assert session.run("_ * 10").value == "20"
    assert session.run("open('notes.txt', 'w').write('kept')").value == "4"
    assert session.run("open('notes.txt').read()").value == "'kept'"
    assert session.run("import os; os.getcwd()").value == "'/sandbox'"


def test_the_namespace_holds_only_what_the_code_put_there(
    marked: tuple[Session, str],
) -> None:
    """Each call's process warms itself up on the session's dicts before its call
    comes: that leaves no key behind and takes none away, a key like its own
    included."""
    session, _ = marked
    session.run("globals()['\\0pysandbox-warm-up'] = 'mine'\nimport linecache")
    session.run("before = set(globals())")
    session.run("y = 2")
    result = session.run("sorted(set(globals()) - before), sorted(before - set(globals()))")
    assert result.value == "(['before', 'y'], [])", result
    key = "'\\0pysandbox-warm-up'"
    kept = session.run(f"globals()[{key}], {key} in linecache.cache")
    assert kept.value == "('mine', False)", kept


def test_an_exception_comes_back_as_data_and_the_session_goes_on(
    marked: tuple[Session, str],
) -> None:
    session, _ = marked
    result = session.run("done = 'before'\n\n1 / 0\ndone = 'after'")
    assert result.committed and result.status is Status.OK and not result
    assert result.error is not None and result.error.type == "ZeroDivisionError"
    assert result.error.message == "division by zero"
    assert 'File "<cell-1>", line 3' in result.error.traceback
    assert "1 / 0" in result.error.traceback and "session_keeper" not in result.error.traceback
    assert session.run("done").value == "'before'"
    syntax = session.run("def broken(:")
    assert syntax.error is not None and syntax.error.type == "SyntaxError"
    assert session.run("done").value == "'before'"


@pytest.mark.parametrize(
    ("code", "options", "status"),
    [
        ("import time\ntime.sleep(1000)", {"wall_time": 1}, Status.WALL_TIME_EXCEEDED),
        ("while True:\n    pass", {"cpu_time": 0.5}, Status.CPU_TIME_EXCEEDED),
        ("hog = bytearray(512 * 2**20)", {}, Status.MEMORY_EXCEEDED),
        ("print('x' * 10**6)", {"stdout": 1000}, Status.OUTPUT_EXCEEDED),
        ("import os\nos._exit(3)", {}, Status.NONZERO_EXIT),
        ("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)", {}, Status.SIGNALED),
    ],
    ids=["wall", "cpu", "memory", "output", "exit", "segfault"],
)
def test_a_call_a_limit_ends_is_rolled_back_exactly(
    marked: tuple[Session, str], code: str, options: dict[str, float], status: Status
) -> None:
    session, _ = marked
    session.run("state = {'calls': 1}\nimport sys")
    changes = "state['calls'] = 2\nstate['new'] = True\nimport fractions\nadded = 1\n"
    result = session.run(changes + code, **options)
    assert result.rolled_back and result.status is status, result
    assert result.reason
    after = session.run("state, 'fractions' in sys.modules, 'added' in globals()")
    assert after.value == "({'calls': 1}, False, False)", after


def test_a_crash_says_how_the_interpreter_ended(marked: tuple[Session, str]) -> None:
    session, _ = marked
    exited = session.run("import os\nos._exit(7)")
    assert exited.returncode == 7 and exited.signal is None
    crashed = session.run("import os, signal\nos.kill(os.getpid(), signal.SIGABRT)")
    assert crashed.signal == 6 and crashed.returncode is None


def test_output_past_the_cap_is_cut_when_asked_and_the_call_commits(
    marked: tuple[Session, str],
) -> None:
    session, _ = marked
    result = session.run("print('x' * 5000)\nkept = 1", stdout=100, truncate_output=True)
    assert result.committed and result.stdout == b"x" * 100 and result.stdout_truncated
    assert session.run("kept").value == "1"


def test_many_rollbacks_in_a_row_keep_every_variable(marked: tuple[Session, str]) -> None:
    session, _ = marked
    session.run("values = list(range(1000))")
    for _ in range(5):
        assert session.run("values.clear()\nwhile True: pass", cpu_time=0.2).rolled_back
    assert session.run("sum(values)").value == str(sum(range(1000)))


@pytest.mark.parametrize("padding", [0, 300_000], ids=["small", "larger_than_a_pipe"])
def test_a_call_ended_before_it_read_its_code_leaves_no_trace(
    marked: tuple[Session, str], padding: int
) -> None:
    """A wall time so short that the call process is killed before it has read its
    code (or while it reads it: the code is larger than a pipe holds): what it did not
    read must not be taken by the next call for its own."""
    session, _ = marked
    session.run("count = 0")
    committed = 0
    for _ in range(10):
        code = "count += 1\n" + "#" * padding
        committed += session.run(code, wall_time=1e-5).committed
    result = session.run("count")
    assert result.value == str(committed), result
    assert session.run("count * 2").value == str(2 * committed)


def test_no_process_a_call_started_outlives_it(marked: tuple[Session, str]) -> None:
    session, _ = marked
    child = unique_marker()
    started = session.run(
        "import subprocess, sys\n"
        f"waiter = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1000)', "
        f"'{child}'])\n"
        "waiter.pid"
    )
    assert started.committed and started.value is not None
    assert pids_with_marker(child, bwrap=False) == []
    rolled = session.run(
        "import os, subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1000)', '{child}'])\n"
        "time.sleep(1000)",
        wall_time=1,
    )
    assert rolled.rolled_back
    assert pids_with_marker(child, bwrap=False) == []


def test_files_go_in_and_the_changed_ones_come_back(marked: tuple[Session, str]) -> None:
    session, _ = marked
    result = session.run(
        "data = open('in.txt').read()\nopen('out.txt', 'w').write(data.upper())",
        files={"in.txt": b"hello"},
    )
    assert dict(result.files) == {"out.txt": b"HELLO"}, result
    again = session.run("x = 1")
    assert dict(again.files) == {}


def test_files_that_cannot_be_written_refuse_the_call_and_the_session_goes_on(
    marked: tuple[Session, str],
) -> None:
    """An input file whose name is a directory the code made: the call raises, its code
    does not run, and the session goes on."""
    session, _ = marked
    session.run("import os\nos.mkdir('taken')\nran = 0")
    with pytest.raises(SandboxError, match="files could not be written: taken"):
        session.run("ran += 1", files={"taken": b"data"})
    assert session.run("ran").value == "0"
    assert session.run("ran += 1\nran", files={"free.txt": b"data"}).value == "1"


def test_interrupt_ends_only_the_running_call(marked: tuple[Session, str]) -> None:
    session, _ = marked
    session.run("kept = 'yes'")
    timer = threading.Timer(0.5, session.interrupt)
    timer.start()
    result = session.run("kept = 'no'\nwhile True:\n    pass", wall_time=slow(30), cpu_time=60)
    timer.join()
    assert result.rolled_back and result.reason == "the call was interrupted", result
    assert session.run("kept").value == "'yes'"


def test_close_leaves_nothing_and_later_calls_raise() -> None:
    marker = unique_marker()
    session = Session(limits=LIMITS, env={"PYSANDBOX_TEST_MARKER": marker})
    session.run("import threading, time\nthreading.Thread(target=time.sleep, args=(1000,)).start()")
    assert len(session_pids(marker)) >= 3
    session.close()
    assert session_pids(marker) == []
    with pytest.raises(SandboxError, match="the session has ended: it was closed"):
        session.run("1")
    session.close()


def test_an_idle_session_ends_by_itself() -> None:
    marker = unique_marker()
    session = Session(limits=LIMITS, idle_timeout=0.5, env={"PYSANDBOX_TEST_MARKER": marker})
    deadline = time.monotonic() + PROMPTLY + 0.5
    while session_pids(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert session_pids(marker) == []
    with pytest.raises(SandboxError, match="idle timeout"):
        session.run("1")
    session.close()


def test_the_cpu_budget_ends_the_session() -> None:
    with Session(limits=LIMITS, cpu_budget=cpu(1)) as session:
        result = session.run("while True:\n    pass", cpu_time=30, wall_time=slow(30))
        assert result.lost and result.status is Status.CPU_TIME_EXCEEDED, result
        assert "CPU budget" in result.reason
        with pytest.raises(SandboxError, match="CPU budget"):
            session.run("1")


def test_the_lifetime_ends_the_session() -> None:
    with Session(limits=LIMITS, lifetime=slow(1)) as session:
        result = session.run("import time\ntime.sleep(100)", wall_time=slow(30))
        assert result.lost and "lifetime" in result.reason, result


def test_a_result_is_a_cell_result_and_reads_like_one(marked: tuple[Session, str]) -> None:
    session, _ = marked
    result = session.run("40 + 2")
    assert isinstance(result, CellResult) and result and result.value == "42"
    assert result.cpu_time >= 0 and result.wall_time > 0 and result.max_rss > 0


@pytest.mark.no_bwrap
@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"limits": "big"}, TypeError, "limits"),
        ({"lifetime": 0}, ValueError, "lifetime"),
        ({"idle_timeout": -1.0}, ValueError, "idle_timeout"),
        ({"cpu_budget": "1"}, TypeError, "cpu_budget"),
        ({"cpu_budget": float("nan")}, ValueError, "cpu_budget"),
        ({"lifetime": True}, TypeError, "lifetime"),
        ({"env": {"A=B": "1"}}, ValueError, "env"),
        ({"files": {"../up": b""}}, ValueError, "files"),
        ({"limits": Limits(open_files=15)}, ValueError, "open_files"),
    ],
)
def test_bad_session_arguments_are_named_before_anything_starts(
    options: dict[str, object], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words):
        Session(**options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("code", "options", "error", "words"),
    [
        (1, {}, TypeError, "code"),
        ("a\0b", {}, ValueError, "code"),
        ("1", {"wall_time": 0}, ValueError, "wall_time"),
        ("1", {"cpu_time": -1}, ValueError, "cpu_time"),
        ("1", {"stdout": 0}, ValueError, "stdout"),
        ("1", {"files": [b"x"]}, TypeError, "files"),
    ],
)
def test_bad_call_arguments_are_named_and_the_session_goes_on(
    marked: tuple[Session, str],
    code: object,
    options: dict[str, object],
    error: type[Exception],
    words: str,
) -> None:
    session, _ = marked
    with pytest.raises(error, match=words):
        session.run(code, **options)  # type: ignore[arg-type]
    assert session.run("1").value == "1"


def test_a_cancelled_task_rolls_its_call_back_and_the_session_goes_on(
    marked: tuple[Session, str],
) -> None:
    session, _ = marked

    async def scenario() -> CellResult:
        await session.run_async("kept = 'yes'")
        task = asyncio.ensure_future(
            session.run_async("kept = 'no'\nwhile True:\n    pass", wall_time=slow(30), cpu_time=60)
        )
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await session.run_async("kept")

    assert asyncio.run(scenario()).value == "'yes'"


#: Run as a program: a session whose call loops until Ctrl-C (SIGINT from the test),
#: then prints what the caller saw and what the session still holds.
CTRL_C = """
import sys
from pysandbox import Limits, Session
with Session(limits=Limits(wall_time=60, cpu_time=60)) as session:
    session.run("kept = 'yes'")
    print("ready", flush=True)
    try:
        session.run("kept = 'no'\\nwhile True:\\n    pass")
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    print(session.run("kept").value, flush=True)
"""


def test_ctrl_c_in_the_caller_rolls_the_call_back_then_raises() -> None:
    caller = subprocess.Popen(
        [sys.executable, "-c", CTRL_C], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert caller.stdout is not None
    assert caller.stdout.readline() == b"ready\n"
    time.sleep(0.5)
    caller.send_signal(signal.SIGINT)
    out, err = caller.communicate(timeout=PROMPTLY * 4)
    assert out.decode().split() == ["interrupted", "'yes'"], err.decode()
    assert caller.returncode == 0


def test_a_thread_runs_on_and_the_next_call_sees_its_work(
    marked: tuple[Session, str],
) -> None:
    session, _ = marked
    session.run(
        "import threading, time\nticks = []\nstop = threading.Event()\n"
        "def tick():\n    while not stop.is_set():\n        ticks.append(1)\n"
        "        time.sleep(0.01)\n"
        "threading.Thread(target=tick, daemon=True).start()"
    )
    time.sleep(0.3)
    seen = session.run("len(ticks) > 5")
    assert seen.value == "True", seen


def test_a_file_a_thread_writes_between_calls_comes_back_with_the_next(
    marked: tuple[Session, str],
) -> None:
    """A call's files are those that changed since the last call's answer: what a
    thread wrote in between is not lost, and an input file the call did not change
    does not come back."""
    session, _ = marked
    started = session.run(
        "import threading, time\n"
        "def later():\n    time.sleep(0.2)\n    open('late.txt', 'w').write('late')\n"
        "threading.Thread(target=later, daemon=True).start()"
    )
    assert started.committed and dict(started.files) == {}, started
    time.sleep(slow(1))
    result = session.run("x = 1", files={"given.txt": b"kept"})
    assert dict(result.files) == {"late.txt": b"late"}, result


def test_a_thread_ends_with_the_next_commit_and_leaves_nothing_after_it(
    marked: tuple[Session, str],
) -> None:
    """A thread that prints and forks without end: the next call that commits ends it,
    and the call after that sees none of its output and none of its processes."""
    session, _ = marked
    started = session.run(
        "import os, sys, threading, time\n"
        "def busy():\n"
        "    while True:\n"
        "        print('tick', flush=True)\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(30)\n"
        "            os._exit(0)\n"
        "        time.sleep(0.002)\n"
        "threading.Thread(target=busy, daemon=True).start()\n"
        "time.sleep(0.05)"
    )
    assert started.committed, started
    assert session.run("x = 1", stdout=10**6).committed
    after = session.run(
        "def living(pid):\n"
        "    try:\n"
        "        return open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[0] != 'Z'\n"
        "    except OSError:\n"
        "        return False\n"
        "sorted(int(p) for p in os.listdir('/proc') if p.isdigit() and living(p))"
    )
    assert after.stdout == b"", after
    # The init, the keeper, the state and this call's process; nothing the thread forked
    # (the state the last commit replaced may still be a zombie the keeper is reaping).
    assert after.value is not None and len(eval(after.value)) == 4, after


def test_a_call_starts_once_the_state_its_predecessor_replaced_is_gone(
    marked: tuple[Session, str],
) -> None:
    """Calls back to back, each committing a new state: when a call's code starts, the
    state the last commit replaced has exited (its memory is free), so the session's
    state is the keeper's child, and the keeper the init's."""
    session, _ = marked
    session.run(
        "import os\n"
        "def parent(pid):\n"
        "    with open(f'/proc/{pid}/stat', 'rb') as stat:\n"
        "        return int(stat.read().rsplit(b')', 1)[1].split()[1])\n"
        "blob = [bytearray(4096) for _ in range(25_000)]"
    )
    for _ in range(20):
        result = session.run("for b in blob: b[0] = 1\nparent(parent(os.getppid()))")
        assert result.value == "1", result


def test_what_a_thread_writes_before_the_next_commit_is_that_calls(
    marked: tuple[Session, str],
) -> None:
    """A thread that writes without pause, then a call that commits (its process has no
    thread: the thread ends with it): the call after that gets none of the thread's
    output, every time (the state with the thread is stopped, and waited for, before
    the commit's answer takes the last of its output)."""
    session, _ = marked
    writer = (
        "import os, threading\n"
        "def busy():\n"
        "    while True:\n"
        "        os.write(1, b't')\n"
        "threading.Thread(target=busy, daemon=True).start()"
    )
    for _ in range(20):
        session.run(writer, truncate_output=True)
        assert session.run("x = 1", truncate_output=True).committed
        after = session.run("y = 2")
        assert after.committed and after.stdout == b"", after


def test_a_committed_call_counts_the_cpu_of_what_it_left_running(
    marked: tuple[Session, str],
) -> None:
    """A child the call left burning CPU is killed at the call's end, and its CPU time
    is the call's."""
    session, _ = marked
    # The child says when it has burnt 0.3 s, whatever share of a busy machine it gets.
    result = session.run(
        "import os, time\nr, w = os.pipe()\nif os.fork() == 0:\n"
        "    while time.process_time() < 0.3: pass\n"
        "    os.write(w, b'x')\n    while True: pass\n"
        "os.read(r, 1)",
        cpu_time=cpu(5),
    )
    assert result.committed, result
    # The keeper counts in clock ticks (1/100 s), which may leave a few out.
    assert result.cpu_time >= 0.25, result


def test_a_child_forked_by_the_code_that_runs_on_ends_at_the_cells_end(
    marked: tuple[Session, str],
) -> None:
    session, _ = marked
    result = session.run("import os\nchild = os.fork()\nwhere = 'parent' if child else 'child'")
    assert result.committed, result
    assert session.run("where").value == "'parent'"


def test_ctrl_c_to_the_callers_whole_process_group_rolls_back_too() -> None:
    """A terminal's Ctrl-C and a notebook's stop button send SIGINT to every process of
    the caller's group: the session's bwrap is in a group of its own, so the call is
    rolled back as for a SIGINT to the caller alone, not lost with a killed bwrap."""
    caller = subprocess.Popen(
        [sys.executable, "-c", CTRL_C],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert caller.stdout is not None
    assert caller.stdout.readline() == b"ready\n"
    time.sleep(0.5)
    os.killpg(caller.pid, signal.SIGINT)
    out, err = caller.communicate(timeout=PROMPTLY * 4)
    assert out.decode().split() == ["interrupted", "'yes'"], err.decode()


def test_output_is_shown_as_it_comes(marked: tuple[Session, str]) -> None:
    """``on_stdout`` sees the first line while the call still runs: on it, the callback
    interrupts the call, which would otherwise loop until its wall time."""
    session, _ = marked
    seen: list[bytes] = []

    def show(chunk: bytes) -> None:
        # Python 3.13's unbuffered print writes the text and its newline apart.
        seen.append(chunk)
        if b"\n" in b"".join(seen):
            session.interrupt()

    result = session.run(
        "print('first')\nwhile True:\n    pass", on_stdout=show, wall_time=60, cpu_time=60
    )
    assert result.rolled_back and result.reason == "the call was interrupted", result
    assert b"".join(seen) == result.stdout == b"first\n"
    assert result.wall_time < 30


def test_a_raising_callback_rolls_the_call_back_and_propagates(
    marked: tuple[Session, str],
) -> None:
    session, _ = marked
    session.run("kept = 'yes'")

    def refuse(chunk: bytes) -> None:
        raise LookupError("seen enough")

    with pytest.raises(LookupError, match="seen enough"):
        session.run(
            "kept = 'no'\nprint('hello', flush=True)\nwhile True:\n    pass",
            on_stdout=refuse,
            wall_time=slow(30),
            cpu_time=60,
        )
    assert session.run("kept").value == "'yes'"
