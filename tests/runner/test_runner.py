# SPDX-License-Identifier: MIT
"""``Runner``: the cap holds, the wait is reported apart from the wall time, defaults and
per-call arguments combine, ``close()`` kills and releases, and threads and asyncio
tasks share one Runner.  Every run is a real sandbox; the cap is watched from the host,
through the processes alive with each call's marker.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest
from support.processes import pids_with_marker, survivors, unique_marker
from support.runner import alive, gated, wait_until
from support.timing import PROMPTLY, slow

from pysandbox import (
    Cancelled,
    Limits,
    Result,
    Runner,
    Status,
    eval_in_sandbox,
)


def test_a_runner_runs_what_the_module_functions_run(world_readable_dir: Path) -> None:
    with Runner() as runner:
        result = runner.run(["/bin/sh", "-c", "cat; exit 4"], stdin="in")
        assert (result.status, result.stdout, result.returncode) == (
            Status.NONZERO_EXIT,
            b"in",
            4,
        )
        assert runner.run_python("import sys; print(sys.argv[1:])", args=["a"]).stdout == (
            b"['a']\n"
        )
        assert runner.eval_in_sandbox("print(6 * 7)") == eval_in_sandbox("print(6 * 7)")
        assert runner.run_python("print(1)").queued_time >= 0.0
    assert runner.closed


@pytest.mark.no_bwrap
@pytest.mark.parametrize(
    ("options", "error", "named"),
    [
        ({"max_concurrent": 0}, ValueError, "max_concurrent"),
        ({"max_concurrent": -3}, ValueError, "max_concurrent"),
        ({"max_concurrent": True}, TypeError, "max_concurrent"),
        ({"max_concurrent": 2.0}, TypeError, "max_concurrent"),
        ({"max_concurrent": "2"}, TypeError, "max_concurrent"),
        ({"limits": {"memory": 1}}, TypeError, "limits"),
        ({"readable": "/usr"}, TypeError, "readable"),
        ({"readable": ["relative"]}, ValueError, "readable"),
        ({"readable": ["/proc"]}, ValueError, "readable"),
        ({"env": {"A": 1}}, TypeError, "env"),
        ({"env": {"A=B": "1"}}, ValueError, "env"),
    ],
)
def test_bad_arguments_are_refused_naming_them(
    options: dict[str, object], error: type[Exception], named: str
) -> None:
    with pytest.raises(error, match=named):
        Runner(**options)  # type: ignore[arg-type]


@pytest.mark.no_bwrap
def test_max_concurrent_defaults_to_the_cpus() -> None:
    with Runner() as runner:
        assert runner.max_concurrent == os.cpu_count()
    with Runner(max_concurrent=5) as runner:
        assert runner.max_concurrent == 5


def test_the_cap_holds_for_calls_from_many_threads(
    world_readable_dir: Path, runners: list[Runner]
) -> None:
    """Six calls on a Runner of two: the host never sees more than two of the programs
    alive, sees two at once (the cap is used), and opens one gate at a time."""
    runner = Runner(max_concurrent=2, readable=[str(world_readable_dir)])
    runners.append(runner)
    base = unique_marker()
    markers = [f"{base}-{i}-" for i in range(6)]
    gates = [world_readable_dir / f"gate-{i}" for i in range(6)]
    results: dict[int, Result] = {}

    def call(i: int) -> None:
        results[i] = runner.run_python(gated(gates[i]), args=[markers[i]])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    most = 0
    opened: set[int] = set()
    while len(opened) < 6:
        now = alive(markers)
        assert len(now) <= 2, f"more sandboxes alive than max_concurrent: {sorted(now)}"
        most = max(most, len(now))
        running = now - opened
        if len(running) == min(2, 6 - len(opened)):
            chosen = min(running)
            gates[chosen].touch()
            opened.add(chosen)
        time.sleep(0.01)
    for thread in threads:
        thread.join(slow(30))
    assert most == 2
    assert sorted(results) == list(range(6))
    assert all(result.stdout == b"through\n" for result in results.values())
    assert (runner.running, runner.waiting) == (0, 0)


def test_the_wait_is_queued_time_and_not_wall_time(
    world_readable_dir: Path, runners: list[Runner]
) -> None:
    runner = Runner(max_concurrent=1, readable=[str(world_readable_dir)])
    runners.append(runner)
    marker = unique_marker()
    gate = world_readable_dir / "gate"
    first: list[Result] = []
    holder = threading.Thread(
        target=lambda: first.append(runner.run_python(gated(gate), args=[marker]))
    )
    holder.start()
    wait_until(lambda: bool(pids_with_marker(marker, bwrap=False)), "the first call's program")
    second: list[tuple[Result, float]] = []

    def queued_call() -> None:
        started = time.monotonic()
        result = runner.run_python("print('second')")
        second.append((result, time.monotonic() - started))

    waiter = threading.Thread(target=queued_call)
    waiter.start()
    wait_until(lambda: runner.waiting == 1, "the second call to queue")
    assert runner.running == 1
    held_for = 0.3
    time.sleep(held_for)  # the second call waits at least this long: a lower bound
    gate.touch()
    holder.join(slow(30))
    waiter.join(slow(30))
    ((result, elapsed),) = second
    assert result.stdout == b"second\n"
    assert result.queued_time >= held_for
    # Queueing and running are disjoint parts of the call: a wall time that counted the
    # wait would make the two add up to more than the whole call took.
    assert result.wall_time + result.queued_time <= elapsed
    assert first[0].queued_time < result.queued_time


def test_per_call_arguments_combine_with_the_defaults(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    extra = tmp_path / "extra"
    for directory, text in ((shared, "s"), (extra, "e")):
        directory.mkdir()
        directory.chmod(0o755)
        (directory / "f").write_text(text)
        (directory / "f").chmod(0o644)
    tmp_path.chmod(0o755)
    read_both = (
        "import os\n"
        f"for d in ({str(shared)!r}, {str(extra)!r}):\n"
        "    print(open(d + '/f').read() if os.path.exists(d + '/f') else '-')\n"
        "print(os.environ.get('A'), os.environ.get('B'))\n"
    )
    with Runner(
        limits=Limits(stdout=64), readable=[str(shared)], env={"A": "1", "B": "2"}
    ) as runner:
        defaults = runner.run_python(read_both)
        assert defaults.stdout == b"s\n-\n1 2\n"
        merged = runner.run_python(read_both, readable=[str(extra)], env={"B": "3"})
        assert merged.stdout == b"s\ne\n1 3\n"
        assert runner.run_python("print('x' * 100)").status is Status.OUTPUT_EXCEEDED
        own = runner.run_python("print('x' * 100)", limits=Limits())
        assert own.status is Status.OK
        assert runner.env == {"A": "1", "B": "2"}
        assert runner.readable == (str(shared),)


def test_close_kills_running_sandboxes_and_releases_waiters() -> None:
    runner = Runner(max_concurrent=1)
    marker = unique_marker()
    outcomes: dict[str, BaseException | Result] = {}

    def call(name: str, code: str, args: list[str]) -> None:
        try:
            outcomes[name] = runner.run_python(code, args=args)
        except BaseException as exc:
            outcomes[name] = exc

    running = threading.Thread(
        target=call, args=("running", "import time; time.sleep(60)", [marker])
    )
    running.start()
    wait_until(lambda: bool(pids_with_marker(marker, bwrap=False)), "the sleeping program")
    waiting = threading.Thread(target=call, args=("waiting", "print(1)", []))
    waiting.start()
    wait_until(lambda: runner.waiting == 1, "the second call to queue")
    started = time.monotonic()
    runner.close()
    assert time.monotonic() - started < PROMPTLY
    # close() returned only once both calls had ended: nothing is left to wait for.
    assert survivors(marker, within=0) == []
    running.join(PROMPTLY)
    waiting.join(PROMPTLY)
    assert isinstance(outcomes["running"], Cancelled)
    assert isinstance(outcomes["waiting"], Cancelled)
    assert "slot" in str(outcomes["waiting"])
    with pytest.raises(RuntimeError, match="closed"):
        runner.run_python("print(1)")
    with pytest.raises(RuntimeError, match="closed"):
        runner.eval_in_sandbox("print(1)")
    runner.close()  # idempotent


def test_a_callers_cancel_also_ends_the_wait_for_a_slot(
    world_readable_dir: Path, runners: list[Runner]
) -> None:
    runner = Runner(max_concurrent=1, readable=[str(world_readable_dir)])
    runners.append(runner)
    gate = world_readable_dir / "gate"
    holder = threading.Thread(target=runner.run_python, args=(gated(gate),))
    holder.start()
    wait_until(lambda: runner.running == 1, "the first call to take the slot")
    cancel = threading.Event()
    caught: list[BaseException] = []

    def queued() -> None:
        try:
            runner.run_python("print(1)", cancel=cancel)
        except BaseException as exc:
            caught.append(exc)

    waiter = threading.Thread(target=queued)
    waiter.start()
    wait_until(lambda: runner.waiting == 1, "the second call to queue")
    cancel.set()
    waiter.join(PROMPTLY)
    assert len(caught) == 1 and isinstance(caught[0], Cancelled)
    assert runner.waiting == 0
    gate.touch()
    holder.join(slow(30))


def test_eight_threads_share_one_runner() -> None:
    results: dict[tuple[int, int], Result] = {}
    with Runner(max_concurrent=3) as runner:

        def worker(thread: int) -> None:
            for call in range(3):
                results[thread, call] = runner.run_python(
                    "import sys; print(sys.argv[1])", args=[f"{thread}.{call}"]
                )

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(slow(60))
        assert (runner.running, runner.waiting) == (0, 0)
    assert len(results) == 24
    for (thread, call), result in results.items():
        assert result.stdout == f"{thread}.{call}\n".encode()


def test_many_asyncio_tasks_queue_without_blocking_the_loop(world_readable_dir: Path) -> None:
    """Twelve tasks on a Runner of one: the first holds the slot until a ticker task on
    the same loop opens its gate, which the ticker does only after it has seen the other
    eleven queued and ticked on: a wait that blocked the loop would never end (the gated
    program gives up after a minute and the test fails)."""
    gate = world_readable_dir / "gate"

    async def main() -> tuple[list[Result], int]:
        async with Runner(max_concurrent=1, readable=[str(world_readable_dir)]) as runner:
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while runner.waiting < 11:
                    await asyncio.sleep(0.01)
                for _ in range(5):
                    ticks += 1
                    await asyncio.sleep(0.01)
                gate.touch()

            ticking = asyncio.create_task(ticker())
            first = asyncio.create_task(runner.run_python_async(gated(gate)))
            await asyncio.sleep(0)  # the first call starts before the others queue
            while runner.running == 0:
                await asyncio.sleep(0.01)
            others = [
                runner.run_python_async("import sys; print(sys.argv[1])", args=[str(i)])
                for i in range(11)
            ]
            results = await asyncio.gather(first, *others)
            await ticking
            return list(results), ticks

    results, ticks = asyncio.run(asyncio.wait_for(main(), slow(60)))
    assert ticks == 5
    assert results[0].stdout == b"through\n"
    assert [r.stdout for r in results[1:]] == [f"{i}\n".encode() for i in range(11)]
    assert all(r.queued_time > 0 for r in results[1:])


def test_cancelling_a_task_that_waits_for_a_slot(world_readable_dir: Path) -> None:
    gate = world_readable_dir / "gate"

    async def main() -> tuple[int, Result]:
        async with Runner(max_concurrent=1, readable=[str(world_readable_dir)]) as runner:
            first = asyncio.create_task(runner.run_python_async(gated(gate)))
            while runner.running == 0:
                await asyncio.sleep(0.01)
            queued = asyncio.create_task(runner.eval_in_sandbox_async("print(1)"))
            while runner.waiting == 0:
                await asyncio.sleep(0.01)
            queued.cancel()
            with pytest.raises(asyncio.CancelledError):
                await queued
            left = runner.waiting
            gate.touch()
            return left, await first

    left, first = asyncio.run(main())
    assert left == 0
    assert first.stdout == b"through\n"


def test_async_forms_take_the_same_arguments() -> None:
    async def main() -> tuple[Result, Result, object]:
        async with Runner(env={"A": "1"}) as runner:
            chunks: list[bytes] = []
            ran = await runner.run_async(
                ["/bin/sh", "-c", 'echo "$A$B"'], env={"B": "2"}, on_stdout=chunks.append
            )
            assert b"".join(chunks) == ran.stdout
            python = await runner.run_python_async(
                "import sys; print(sys.stdin.read(), sys.argv[1])", args=["x"], stdin="in"
            )
            evaluated = await runner.eval_in_sandbox_async("print(6 * 7)")
            return ran, python, evaluated

    ran, python, evaluated = asyncio.run(main())
    assert ran.stdout == b"12\n"
    assert python.stdout == b"in x\n"
    assert evaluated == eval_in_sandbox("print(6 * 7)")


@pytest.mark.no_bwrap
def test_async_bad_arguments_raise_before_anything_runs() -> None:
    async def main() -> None:
        async with Runner() as runner:
            with pytest.raises(TypeError, match="on_stdout"):
                await runner.run_async(["/bin/true"], on_stdout=3)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="code"):
                await runner.run_python_async(b"print(1)")  # type: ignore[arg-type]
            with pytest.raises(ValueError, match="mem_max_mb"):
                await runner.eval_in_sandbox_async("print(1)", mem_max_mb=0)
            assert (runner.running, runner.waiting) == (0, 0)

    asyncio.run(main())
