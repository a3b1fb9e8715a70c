# SPDX-License-Identifier: MIT
"""``on_stdout`` and ``on_stderr``: output as it happens, for the sync and async forms.

Every run is real (bwrap, the init, a sandboxed interpreter); the callbacks are the
caller's own code, so what they see and when is checked from the host.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Awaitable, Callable

import pytest
from support.describe import describe
from support.processes import children_of, pids_with_marker, survivors, unique_marker
from support.timing import KILL_LATENCY, PROMPTLY, cpu_overshoot

from pysandbox import Limits, Result, Status, run, run_async, run_python, run_python_async


class Recorder:
    """A callback that keeps each chunk and the thread it was called in."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.threads: set[int] = set()

    def __call__(self, chunk: bytes) -> None:
        self.chunks.append(chunk)
        self.threads.add(threading.get_ident())

    def joined(self) -> bytes:
        return b"".join(self.chunks)


#: Interleaved writes to both streams, small and large, ending at once: some of the
#: output is still in the pipes when the program exits.
BOTH_STREAMS = (
    "import sys\n"
    "for i in range(200):\n"
    "    sys.stdout.write(f'out {i}\\n'); sys.stdout.flush()\n"
    "    sys.stderr.write(f'err {i}\\n' * (i % 7)); sys.stderr.flush()\n"
    "sys.stdout.write('o' * 300000); sys.stderr.write('e' * 200000)\n"
)


def test_chunks_join_to_the_output_of_both_streams_in_the_calling_thread() -> None:
    out, err = Recorder(), Recorder()
    result = run_python(BOTH_STREAMS, on_stdout=out, on_stderr=err)
    assert result.status is Status.OK, describe(result)
    assert out.joined() == result.stdout and err.joined() == result.stderr
    assert result.stdout.startswith(b"out 0\nout 1\n") and result.stdout.endswith(b"o" * 300000)
    assert len(result.stderr) > 200000
    assert all(out.chunks) and all(err.chunks), "an empty chunk was passed"
    assert out.threads == err.threads == {threading.get_ident()}


def test_output_callbacks_see_chunks_while_the_program_runs() -> None:
    """The program prints ``ready`` and then waits for a line on stdin; the stdin
    callback answers only once ``on_stdout`` has seen ``ready``.  Were ``on_stdout`` not
    called while the program runs, nobody would answer and the run would time out."""
    out = Recorder()
    replies: list[bytes] = []

    def answer(chunk: bytes) -> bytes:
        if b"ready" in out.joined() and not replies:
            replies.append(chunk)
            return b"go\n"
        return b""

    code = "import sys\nprint('ready', flush=True)\nprint('got', sys.stdin.readline().strip())\n"
    result = run_python(code, stdin=answer, on_stdout=out, limits=Limits(wall_time=30))
    assert result.status is Status.OK, describe(result)
    assert result.stdout == b"ready\ngot go\n"
    assert out.joined() == result.stdout
    assert replies, "the stdin callback never saw ready after on_stdout"


def test_stderr_callback_sees_chunks_while_the_program_runs() -> None:
    """As above for stderr: the stdin callback is only asked on stdout, so the program
    says ``waiting`` on stdout until a line arrives, and the answer comes once
    ``on_stderr`` has seen ``ready``."""
    err = Recorder()

    def answer(chunk: bytes) -> bytes:
        return b"go\n" if b"ready" in err.joined() else b""

    code = (
        "import select, sys\n"
        "print('ready', file=sys.stderr, flush=True)\n"
        "while not select.select([sys.stdin], [], [], 0.05)[0]:\n"
        "    print('waiting', flush=True)\n"
        "print('got', input(), file=sys.stderr)\n"
    )
    result = run_python(code, stdin=answer, on_stderr=err, limits=Limits(wall_time=30))
    assert result.status is Status.OK, describe(result)
    assert err.joined() == result.stderr == b"ready\ngot go\n"


@pytest.mark.parametrize("truncate", [True, False], ids=["truncated", "killed"])
def test_nothing_past_the_cap_reaches_the_callbacks(truncate: bool) -> None:
    out, err = Recorder(), Recorder()
    code = (
        "import sys\nfor _ in range(100):\n    print('x' * 99); print('y' * 99, file=sys.stderr)\n"
    )
    limits = Limits(stdout=5000, stderr=3000, truncate_output=truncate)
    result = run_python(code, on_stdout=out, on_stderr=err, limits=limits)
    expected = Status.OK if truncate else Status.OUTPUT_EXCEEDED
    assert result.status is expected, describe(result)
    assert out.joined() == result.stdout and err.joined() == result.stderr
    assert len(result.stdout) == 5000 or len(result.stderr) == 3000
    if truncate:
        assert (len(result.stdout), len(result.stderr)) == (5000, 3000)
        assert result.stdout_truncated and result.stderr_truncated


class Boom(Exception):
    pass


#: An OSError too: the C core raises OSError for its own faults, and a callback's must
#: not be mistaken for one (reported as "could not start bubblewrap").
CALLBACK_ERRORS = [Boom("from the callback"), KeyboardInterrupt(), BrokenPipeError(32, "gone")]


@pytest.mark.parametrize("stream", ["on_stdout", "on_stderr"])
@pytest.mark.parametrize("error", CALLBACK_ERRORS)
def test_an_exception_in_a_callback_kills_reaps_and_propagates(
    stream: str, error: BaseException
) -> None:
    marker = unique_marker()
    alive: list[int] = []

    def explode(chunk: bytes) -> None:
        alive.extend(pids_with_marker(marker))
        raise error

    code = (
        "import sys, time\nprint('hi', flush=True); print('hi', file=sys.stderr)\ntime.sleep(60)\n"
    )
    start = time.monotonic()
    with pytest.raises(type(error)) as raised:
        run_python(code, args=[marker], limits=Limits(wall_time=30), **{stream: explode})  # type: ignore[arg-type]
    took = time.monotonic() - start
    left = pids_with_marker(marker)
    survivors(marker, within=0)
    assert raised.value is error
    assert alive, "the program was not running when the callback raised"
    assert left == [], "the sandbox outlived the call"
    assert children_of(os.getpid()) == []
    assert took < PROMPTLY


@pytest.mark.parametrize("error", CALLBACK_ERRORS)
def test_an_exception_in_the_stdin_callback_propagates_as_it_is(error: BaseException) -> None:
    def answer(chunk: bytes) -> bytes:
        if chunk:
            raise error
        return b""

    with pytest.raises(type(error)) as raised:
        run_python("print('ask', flush=True); input()", stdin=answer)
    assert raised.value is error
    assert children_of(os.getpid()) == []


def test_a_slow_callback_still_sees_exactly_the_output_kept() -> None:
    """The callback sleeps twice the wall limit on the first chunk while the program
    writes on; the sandbox is killed at its wall time, the run ends when the callback
    returns, and the output callbacks still see exactly the output kept (the pipe filled
    meanwhile)."""
    wall, nap = 1.0, 2.0
    out = Recorder()

    def slow(chunk: bytes) -> None:
        if not out.chunks:
            time.sleep(nap)
        out(chunk)

    code = "import sys\nwhile True:\n    sys.stdout.write('z' * 4096)\n"
    limits = Limits(wall_time=wall, stdout=64 * 2**20, cpu_time=30)
    start = time.monotonic()
    result = run_python(code, on_stdout=slow, limits=limits)
    assert time.monotonic() - start >= nap
    assert result.status is Status.WALL_TIME_EXCEEDED, describe(result)
    assert wall <= result.wall_time < wall + KILL_LATENCY
    assert out.joined() == result.stdout


# Every limit holds while a callback runs: the C core's watchdog kills the sandbox at the
# deadline or past the CPU limit while the callback still sleeps.

#: Seconds a slow callback sleeps on its first chunk: far past the limits below, so a
#: limit that waits for the callback to return shows in the CPU time and in the processes
#: still alive when it wakes.
NAP = 3.0

#: A program that says so on both streams, with the marker in its command line.
SAYS_READY = "import sys\nprint('ready', flush=True)\nprint('ready', file=sys.stderr, flush=True)\n"

#: The hooks a slow callback can be: the output callbacks and the stdin callback.
HOOKS = ["on_stdout", "on_stderr", "stdin"]


class Napper:
    """A callback (output or stdin) that, on its first chunk, notes which processes of
    the sandbox are running (host-side, by the marker in their command line; a zombie
    has none), sleeps ``NAP`` seconds, and notes them again."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.before: list[int] | None = None
        self.after: list[int] | None = None

    def __call__(self, chunk: bytes) -> bytes:
        # The stdin callback is first asked with b"", before the sandbox starts.
        if chunk and self.before is None:
            self.before = pids_with_marker(self.marker)
            time.sleep(NAP)
            self.after = pids_with_marker(self.marker)
        return b""


def run_with_napper(hook: str, code: str, limits: Limits) -> tuple[Result, Napper, float]:
    """Run ``code`` with a ``Napper`` as ``hook``; the result, the napper, the call's
    duration.  Whatever survived the call is killed (and fails the test's asserts)."""
    marker = unique_marker()
    napper = Napper(marker)
    start = time.monotonic()
    result = run_python(code, args=[marker], limits=limits, **{hook: napper})  # type: ignore[arg-type]
    took = time.monotonic() - start
    survivors(marker, within=0)
    assert napper.before, "the program was not running when the callback began"
    return result, napper, took


@pytest.mark.parametrize("hook", HOOKS)
def test_the_cpu_limit_holds_while_a_callback_runs(hook: str) -> None:
    """The program burns CPU while the callback sleeps: the tree is killed once it passed
    its CPU limit, not when the callback returns (it would have burnt ``NAP`` s)."""
    code = SAYS_READY + "while True:\n    pass\n"
    limit = 0.5
    result, napper, took = run_with_napper(hook, code, Limits(cpu_time=limit, wall_time=30))
    assert result.status is Status.CPU_TIME_EXCEEDED, describe(result)
    assert napper.after == [], "the sandbox was still running when the callback woke"
    assert limit <= result.cpu_time < limit + cpu_overshoot(1), describe(result)
    assert took >= NAP, "the call returned before the callback did"


@pytest.mark.parametrize("hook", HOOKS)
def test_the_wall_time_holds_while_a_callback_runs(hook: str) -> None:
    """The program sleeps while the callback sleeps past the wall limit: the sandbox is
    killed at the deadline, and its wall time says so."""
    code = SAYS_READY + "import time\ntime.sleep(60)\n"
    wall = 1.0
    result, napper, took = run_with_napper(hook, code, Limits(wall_time=wall, cpu_time=30))
    assert result.status is Status.WALL_TIME_EXCEEDED, describe(result)
    assert napper.after == [], "the sandbox was still running when the callback woke"
    assert wall <= result.wall_time < wall + KILL_LATENCY, describe(result)
    assert took >= NAP, "the call returned before the callback did"


def test_the_wall_time_holds_while_an_async_callback_is_awaited() -> None:
    """The same for a coroutine callback of ``run_python_async``: the run's thread waits
    for the event loop, and the watchdog kills the sandbox meanwhile."""
    marker = unique_marker()
    seen: dict[str, list[int]] = {}

    async def nap(chunk: bytes) -> None:
        if not seen:
            seen["before"] = pids_with_marker(marker)
            await asyncio.sleep(NAP)
            seen["after"] = pids_with_marker(marker)

    code = SAYS_READY + "import time\ntime.sleep(60)\n"
    wall = 1.0
    result = asyncio.run(
        run_python_async(code, args=[marker], on_stdout=nap, limits=Limits(wall_time=wall))
    )
    survivors(marker, within=0)
    assert result.status is Status.WALL_TIME_EXCEEDED, describe(result)
    assert seen["before"], "the program was not running when the callback began"
    assert seen["after"] == [], "the sandbox was still running when the callback woke"
    assert wall <= result.wall_time < wall + KILL_LATENCY, describe(result)


def test_the_watchdog_thread_is_joined_on_every_path() -> None:
    """The C core's watchdog is a thread of this process: after runs that end normally,
    by a limit while a callback sleeps, and by a callback's exception after the sandbox
    was killed, the process has no thread it did not have before (a thread of an earlier
    test of this worker may end meanwhile), and the sandbox is gone."""
    marker = unique_marker()

    def threads() -> set[str]:
        return set(os.listdir("/proc/self/task"))

    def sleep_then(error: BaseException | None) -> Callable[[bytes], None]:
        def callback(chunk: bytes) -> None:
            time.sleep(1.0)
            if error is not None:
                raise error

        return callback

    burn = "print(1, flush=True)\nwhile True:\n    pass\n"
    wait = "print(1, flush=True)\nimport time\ntime.sleep(60)\n"
    before = threads()
    assert run_python("print('ok')", args=[marker], on_stdout=Recorder()).status is Status.OK
    burnt = run_python(burn, args=[marker], on_stdout=sleep_then(None), limits=Limits(cpu_time=0.2))
    assert burnt.status is Status.CPU_TIME_EXCEEDED, describe(burnt)
    with pytest.raises(Boom):
        run_python(wait, args=[marker], on_stdout=sleep_then(Boom()), limits=Limits(wall_time=0.5))
    assert threads() - before == set(), "a thread of the run outlived it"
    assert survivors(marker, within=0) == []


@pytest.mark.parametrize("stream", ["on_stdout", "on_stderr"])
def test_a_callback_that_is_not_callable_is_refused_before_running(stream: str) -> None:
    marker = unique_marker()
    calls: list[Callable[[], object]] = [
        lambda: run(["/bin/sh", "-c", f"sleep 30 # {marker}"], **{stream: b"not callable"}),  # type: ignore[arg-type]
        lambda: run_python(f"# {marker}", **{stream: 42}),  # type: ignore[arg-type]
        lambda: asyncio.run(run_async(["/bin/true", marker], **{stream: "no"})),  # type: ignore[arg-type]
        lambda: asyncio.run(run_python_async(f"# {marker}", **{stream: 1.5})),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(TypeError, match=stream):
            call()
    assert pids_with_marker(marker) == []


def test_eval_in_sandbox_takes_no_output_callbacks() -> None:
    from pysandbox import eval_in_sandbox

    with pytest.raises(TypeError):
        eval_in_sandbox("print(1)", on_stdout=print)  # type: ignore[call-arg]


# The async forms.


def test_async_callbacks_plain_and_coroutine_run_on_the_loop() -> None:
    out, err = Recorder(), Recorder()

    async def on_stderr(chunk: bytes) -> None:
        await asyncio.sleep(0)
        err(chunk)

    async def main() -> tuple[Result, int]:
        result = await run_python_async(BOTH_STREAMS, on_stdout=out, on_stderr=on_stderr)
        return result, threading.get_ident()

    result, loop_thread = asyncio.run(main())
    assert result.status is Status.OK, describe(result)
    assert out.joined() == result.stdout and err.joined() == result.stderr
    assert out.threads == err.threads == {loop_thread}


def test_async_callback_awaitable_result_is_awaited_before_reading_on() -> None:
    """A plain callable that returns an awaitable: the run waits for it, so output and
    stdin stay in step (the stdin callback answers only once the awaitable has run)."""
    done: list[bytes] = []

    def on_stdout(chunk: bytes) -> Awaitable[None]:
        async def later() -> None:
            await asyncio.sleep(0.01)
            done.append(chunk)

        return later()

    def answer(chunk: bytes) -> bytes:
        return b"go\n" if b"ready" in b"".join(done) else b""

    code = "print('ready', flush=True)\nprint(input())\n"
    result = asyncio.run(
        run_python_async(code, stdin=answer, on_stdout=on_stdout, limits=Limits(wall_time=30))
    )
    assert result.status is Status.OK, describe(result)
    assert b"".join(done) == result.stdout == b"ready\ngo\n"


@pytest.mark.parametrize("kind", ["coroutine", "plain"])
def test_async_callback_exception_propagates_from_await(kind: str) -> None:
    marker = unique_marker()
    error = Boom("async output callback")

    async def coroutine(chunk: bytes) -> None:
        await asyncio.sleep(0)
        raise error

    def plain(chunk: bytes) -> None:
        raise error

    callback = coroutine if kind == "coroutine" else plain
    code = "import time\nprint('ready', flush=True)\ntime.sleep(60)\n"
    with pytest.raises(Boom) as raised:
        asyncio.run(
            run_python_async(code, args=[marker], on_stdout=callback, limits=Limits(wall_time=30))
        )
    left = pids_with_marker(marker)
    survivors(marker, within=0)
    assert raised.value is error
    assert left == []


def test_cancelling_while_a_callback_is_pending_does_not_deadlock() -> None:
    """The callback waits for an event nobody sets; cancelling the task ends the run,
    cancels the callback and kills the sandbox, all promptly."""
    marker = unique_marker()
    callback_cancelled: list[bool] = []

    async def main() -> float:
        entered = asyncio.Event()

        async def stuck(chunk: bytes) -> None:
            entered.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                callback_cancelled.append(True)
                raise

        code = "import time\nprint('ready', flush=True)\ntime.sleep(60)\n"
        task = asyncio.create_task(
            run_python_async(code, args=[marker], on_stdout=stuck, limits=Limits(wall_time=30))
        )
        await asyncio.wait_for(entered.wait(), 20)
        assert pids_with_marker(marker), "the program is not running"
        cancelled_at = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, PROMPTLY * 2)
        return time.monotonic() - cancelled_at

    took = asyncio.run(main())
    left = pids_with_marker(marker)
    survivors(marker, within=0)
    assert took < PROMPTLY, f"cancellation took {took:.2f} s"
    assert left == []
    assert callback_cancelled == [True]
