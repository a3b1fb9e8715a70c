# SPDX-License-Identifier: MIT
"""``run_async`` and ``run_python_async``: concurrency, cancellation, a free event loop.

pytest-asyncio is not used: each test drives its own loop with ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from support.describe import describe
from support.processes import pids_with_marker, survivors, unique_marker
from support.timing import PROMPTLY, slow

from pysandbox import Limits, Result, Status, run_async, run_python_async


def test_run_async_returns_a_result() -> None:
    result = asyncio.run(run_async(["/bin/sh", "-c", "cat; echo err >&2; exit 4"], stdin="in"))
    assert result.status is Status.NONZERO_EXIT, describe(result)
    assert (result.returncode, result.stdout, result.stderr) == (4, b"in", b"err\n")


def test_run_python_async_passes_every_option() -> None:
    code = (
        "import os, sys\n"
        "print(sys.argv[1:], sys.stdin.read(), open('in.txt').read(), os.environ['K'])\n"
        "open('out.txt', 'w').write('out')\n"
    )
    result = asyncio.run(
        run_python_async(
            code,
            args=["a"],
            stdin=b"stdin",
            files={"in.txt": b"file"},
            env={"K": "v"},
            limits=Limits(stdout=1000),
        )
    )
    assert result.status is Status.OK, describe(result)
    assert result.stdout == b"['a'] stdin file v\n"
    assert result.files["out.txt"] == b"out"


#: The least each of the sixteen concurrent programs sleeps.
OVERLAP_SLEEP = slow(0.5)
#: Runs started at once.
CONCURRENT = 16
#: The process cap of each run: room for every process of all sixteen sandboxes (bwrap,
#: the init, sh, date or sleep), which a non-root caller without a cgroup of its own
#: counts together, per uid (docs/security.rst).  With the default of 64, three of the sixteen
#: shells of the lab's non-root user failed with "Cannot fork".
PROCESSES = 8 * CONCURRENT


def test_sixteen_concurrent_runs_overlap() -> None:
    """The sixteen sandboxed programs were all running at one instant: each says when
    it started and ended, by the clock the sandbox shares with the host.  Each sleeps
    long enough for all sixteen to start even if their start-ups took turns: sixteen
    times one run of the same program without the sleep, timed here first (0.02 s here,
    0.3 s in an emulated guest).  Runs that took turns never overlap, however long the
    sleep."""

    async def one_run(sleep: float) -> Result:
        script = f"date +%s.%N; sleep {sleep}; date +%s.%N"
        limits = Limits(processes=PROCESSES, wall_time=sleep + slow(10))
        return await run_async(["/bin/sh", "-c", script], limits=limits)

    def alone() -> float:
        start = time.monotonic()
        result = asyncio.run(one_run(0))
        assert result.status is Status.OK, describe(result)
        return time.monotonic() - start

    sleep = max(OVERLAP_SLEEP, CONCURRENT * max(alone(), alone()))

    async def main() -> list[Result]:
        return await asyncio.gather(*(one_run(sleep) for _ in range(CONCURRENT)))

    results = asyncio.run(main())
    assert all(result.status is Status.OK for result in results), [describe(r) for r in results]
    assert all(result.wall_time >= sleep for result in results)
    spans = [[float(t) for t in result.stdout.split()] for result in results]
    assert max(start for start, _ in spans) < min(end for _, end in spans), (sleep, spans)


def test_cancelling_kills_the_sandbox_promptly() -> None:
    marker = unique_marker()

    async def main() -> tuple[list[int], float, float]:
        task = asyncio.create_task(
            run_python_async(
                "import time; time.sleep(60)", args=[marker], limits=Limits(wall_time=20)
            )
        )
        deadline = time.monotonic() + 10
        seen: list[int] = []
        while not seen and time.monotonic() < deadline and not task.done():
            await asyncio.sleep(0.02)
            seen = pids_with_marker(marker)
        assert seen, "the sandboxed program never started"
        await asyncio.sleep(0.2)  # well inside the run
        cancelled_at = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return seen, cancelled_at, time.monotonic() - cancelled_at

    seen, cancelled_at, to_cancel = asyncio.run(main())
    to_end = time.monotonic() - cancelled_at
    assert seen
    assert to_cancel < PROMPTLY, f"cancellation took {to_cancel:.2f} s"
    # asyncio.run waits for the executor's threads: a sandbox left running (60 s, or
    # 20 s of wall limit) shows here.
    assert to_end < PROMPTLY, f"the loop only ended {to_end:.2f} s after the cancel"
    assert survivors(marker) == []


def test_a_cancel_scope_that_cancels_again_still_waits_for_the_sandbox_to_end() -> None:
    """anyio (under FastAPI, Starlette and the MCP SDK) cancels every await of a task
    whose scope was cancelled, not only the first: the run still returns only once its
    sandbox is gone, so nothing of it is left the moment the scope exits."""
    anyio = pytest.importorskip("anyio")
    marker = unique_marker()

    async def main() -> list[int]:
        with anyio.move_on_after(slow(2)):
            await run_python_async(
                "import time; time.sleep(60)", args=[marker], limits=Limits(wall_time=30)
            )
        return pids_with_marker(marker)

    assert anyio.run(main) == []


#: How long the sandboxed program of the event-loop test sleeps; a loop blocked by the
#: run would not tick for that long.
BLOCKING = 2.0
#: The ticker's period.
TICK = 0.05


def test_event_loop_is_not_blocked_during_a_run() -> None:
    async def main() -> tuple[Result, list[float]]:
        ticks: list[float] = []
        stop = asyncio.Event()

        async def ticker() -> None:
            while not stop.is_set():
                ticks.append(time.monotonic())
                await asyncio.sleep(TICK)

        ticking = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        try:
            result = await run_python_async(f"import time; time.sleep({BLOCKING})")
        finally:
            stop.set()
            await ticking
        return result, ticks

    result, ticks = asyncio.run(main())
    assert result.status is Status.OK, describe(result)
    assert len(ticks) >= BLOCKING / slow(TICK), f"only {len(ticks)} ticks during the run"
    gaps = [later - earlier for earlier, later in zip(ticks, ticks[1:])]
    assert max(gaps) < BLOCKING / 2, f"the loop stalled for {max(gaps):.2f} s"


def test_async_callback_exception_propagates() -> None:
    marker = unique_marker()

    class Boom(Exception):
        pass

    def callback(chunk: bytes) -> bytes:
        if chunk:
            raise Boom("async callback")
        return b""

    code = "import time\nprint('ready')\ntime.sleep(60)\n"
    with pytest.raises(Boom, match="async callback"):
        asyncio.run(
            run_python_async(code, args=[marker], stdin=callback, limits=Limits(wall_time=20))
        )
    assert survivors(marker) == []


@pytest.mark.parametrize(
    ("call", "error", "name"),
    [
        (lambda: run_async([]), ValueError, "argv"),
        (lambda: run_async(["sleep", "30"], files={"/abs": b""}), ValueError, "files"),
        (lambda: run_python_async("import time; time.sleep(30)", stdin=1), TypeError, "stdin"),
    ],
    ids=["argv", "files", "stdin"],
)
def test_async_bad_arguments_raise_before_running(
    call: object, error: type[Exception], name: str
) -> None:
    start = time.monotonic()
    with pytest.raises(error, match=name):
        asyncio.run(call())  # type: ignore[operator]
    assert time.monotonic() - start < PROMPTLY
