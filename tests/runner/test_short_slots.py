# SPDX-License-Identifier: MIT
"""``Runner(short_slots=K, short_wall_time=S)``: a call whose wall time is at most ``S``
starts at once while every other slot is held by long calls, the long calls still get
the general slots in their order (a stream of short calls does not starve them), and
``close()`` and cancellation leave no process.  Real sandboxes; the order of events is
watched from the host (the programs alive with each call's marker, the Runner's
gauges), never inferred from absolute durations."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from support.processes import pids_with_marker, survivors, unique_marker
from support.runner import gated, wait_until
from support.timing import PROMPTLY, slow

from pysandbox import Cancelled, Job, Limits, Result, Runner, Status
from pysandbox._runner.slots import Slots

LONG = Limits(wall_time=60)
SHORT = Limits(wall_time=5)
SLEEP = "import time; time.sleep(30)"


def _in_thread(call: Callable[[], Result]) -> tuple[threading.Thread, list[object]]:
    """``call`` started on a thread of its own; the list gets its result or error."""
    outcome: list[object] = []

    def target() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    return thread, outcome


def _sleeping(runner: Runner, marker: str) -> tuple[threading.Thread, list[object]]:
    """A long call that sleeps 30 s, its program carrying ``marker`` in its argv."""
    return _in_thread(lambda: runner.run_python(SLEEP, args=[marker], limits=LONG))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"short_slots": True, "short_wall_time": 1}, TypeError, "short_slots"),
        ({"short_slots": 1.0, "short_wall_time": 1}, TypeError, "short_slots"),
        ({"short_slots": -1, "short_wall_time": 1}, ValueError, "short_slots"),
        ({"short_slots": 2, "short_wall_time": 1}, ValueError, "short_slots.*max_concurrent"),
        ({"short_slots": 1}, ValueError, "short_wall_time"),
        ({"short_slots": 1, "short_wall_time": "1"}, TypeError, "short_wall_time"),
        ({"short_slots": 1, "short_wall_time": True}, TypeError, "short_wall_time"),
        ({"short_slots": 1, "short_wall_time": 0}, ValueError, "short_wall_time"),
        ({"short_slots": 1, "short_wall_time": -1.0}, ValueError, "short_wall_time"),
        ({"short_slots": 1, "short_wall_time": float("inf")}, ValueError, "short_wall_time"),
        ({"short_slots": 1, "short_wall_time": float("nan")}, ValueError, "short_wall_time"),
        ({"short_wall_time": 1.0}, ValueError, "short_slots"),
    ],
)
def test_bad_short_slots_are_refused_naming_the_argument(
    kwargs: dict[str, object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        Runner(max_concurrent=2, **kwargs)  # type: ignore[arg-type]


def test_without_short_slots_nothing_changes() -> None:
    with Runner(max_concurrent=2) as runner:
        assert (runner.short_slots, runner.short_wall_time) == (0, None)
    with Runner(max_concurrent=3, short_slots=1, short_wall_time=2) as runner:
        assert (runner.short_slots, runner.short_wall_time) == (1, 2.0)


def test_a_short_ticket_passes_waiting_long_ones_but_takes_no_general_slot_before_them() -> None:
    """The queue alone: a long ticket waits for the one general slot, a short one
    behind it takes the short slot at once; a second short one, finding the short slot
    busy, does not take the general slot the long one before it waits for."""
    slots = Slots(2, 1, 1.0)
    holder = slots.ticket()
    holder.wait(wall_time=10)
    order: list[str] = []

    def waiter(name: str, wall_time: float) -> None:
        with slots.ticket() as ticket:
            ticket.wait(wall_time=wall_time)
            order.append(name)
            release[name].wait()

    release = {name: threading.Event() for name in ("long", "short", "second")}
    threads = {
        "long": threading.Thread(target=waiter, args=("long", 10.0)),
        "short": threading.Thread(target=waiter, args=("short", 1.0)),
        "second": threading.Thread(target=waiter, args=("second", 0.5)),
    }
    threads["long"].start()
    wait_until(lambda: slots.waiting == 1, "the long ticket to queue")
    threads["short"].start()
    wait_until(lambda: order == ["short"], "the short ticket to pass the long one")
    threads["second"].start()
    wait_until(lambda: slots.waiting == 2, "the second short ticket to queue")
    slots.leave(holder)
    wait_until(lambda: order == ["short", "long"], "the long ticket to take the general slot")
    assert slots.waiting == 1  # the second short ticket waits for the short slot
    release["short"].set()
    wait_until(lambda: order == ["short", "long", "second"], "the second short ticket")
    for name, thread in threads.items():
        release[name].set()
        thread.join(PROMPTLY)
    assert slots.running == 0


def test_a_short_call_starts_while_every_long_slot_sleeps() -> None:
    """Two long calls hold the two general slots and a third waits; short calls (a
    ``run_python`` and an ``eval_in_sandbox`` whose timeout is short) run and return
    while the long ones are still sleeping and the third is still queued."""
    marker = unique_marker()
    runner = Runner(max_concurrent=3, short_slots=1, short_wall_time=5)
    try:
        sleepers = [_sleeping(runner, f"{marker}-{i}") for i in range(2)]
        wait_until(
            lambda: all(pids_with_marker(f"{marker}-{i}", bwrap=False) for i in range(2)),
            "both long calls to sleep",
        )
        queued = _sleeping(runner, f"{marker}-2")
        wait_until(lambda: runner.waiting == 1, "the third long call to queue")
        result = runner.run_python("print('quick')", limits=SHORT)
        assert result.status is Status.OK and result.stdout == b"quick\n"
        assert runner.eval_in_sandbox("print(2)", timeout_max_time_sec=5).stdout == "2"
        # Both returned while the long calls sleep and the third waits for a slot.
        assert all(thread.is_alive() for thread, _ in [*sleepers, queued])
        assert (runner.running, runner.waiting) == (2, 1)
        assert not pids_with_marker(f"{marker}-2", bwrap=False)
    finally:
        runner.close()
    assert survivors(marker, within=0) == []
    for thread, outcome in [*sleepers, queued]:
        thread.join(PROMPTLY)
        assert len(outcome) == 1 and isinstance(outcome[0], Cancelled)


def test_a_long_call_is_not_starved_by_short_ones(world_readable_dir: Path) -> None:
    """One general and one short slot.  A long call holds the general slot, a second
    long call waits for it, a short call holds the short slot and a second short call
    waits too.  When the first long call ends, its slot goes to the long call that
    waited first, not to the short call queued after it."""
    gates = {name: world_readable_dir / name for name in ("long", "short")}
    marker = unique_marker()
    runner = Runner(
        max_concurrent=2, short_slots=1, short_wall_time=30, readable=[str(world_readable_dir)]
    )
    try:
        first = _in_thread(lambda: runner.run_python(gated(gates["long"]), limits=LONG))
        wait_until(lambda: runner.running == 1, "the first long call")
        second = _sleeping(runner, f"{marker}-long")
        wait_until(lambda: runner.waiting == 1, "the second long call to queue")
        patient = Limits(wall_time=30)  # short for this Runner, and longer than the test
        short = _in_thread(lambda: runner.run_python(gated(gates["short"]), limits=patient))
        wait_until(lambda: runner.running == 2, "the short call to take the short slot")
        queued = _in_thread(
            lambda: runner.run_python(SLEEP, args=[f"{marker}-short"], limits=patient)
        )
        wait_until(lambda: runner.waiting == 2, "the second short call to queue")
        gates["long"].touch()
        first[0].join(slow(30))
        wait_until(
            lambda: bool(pids_with_marker(f"{marker}-long", bwrap=False)),
            "the second long call to take the freed general slot",
        )
        assert runner.waiting == 1 and not pids_with_marker(f"{marker}-short", bwrap=False)
        gates["short"].touch()
        short[0].join(slow(30))
        wait_until(
            lambda: bool(pids_with_marker(f"{marker}-short", bwrap=False)),
            "the second short call to take the short slot",
        )
    finally:
        runner.close()
    assert survivors(marker, within=0) == []
    assert [type(outcome[0]) for _, outcome in (first, short, second, queued)] == [
        Result,
        Result,
        Cancelled,
        Cancelled,
    ]


def test_async_short_calls_pass_and_cancelled_long_ones_leave_nothing() -> None:
    """asyncio: with the general slot held by a sleeping long task and a second long
    task queued, a short task returns; cancelling the queued task takes it out of the
    queue, cancelling the running one kills its sandbox."""
    marker = unique_marker()

    async def main() -> None:
        async with Runner(max_concurrent=2, short_slots=1, short_wall_time=5) as runner:
            running = asyncio.create_task(
                runner.run_python_async(SLEEP, args=[f"{marker}-0"], limits=LONG)
            )
            while not pids_with_marker(f"{marker}-0", bwrap=False):
                await asyncio.sleep(0.01)
            queued = asyncio.create_task(
                runner.run_python_async(SLEEP, args=[f"{marker}-1"], limits=LONG)
            )
            while runner.waiting == 0:
                await asyncio.sleep(0.01)
            result = await runner.run_python_async("print('quick')", limits=SHORT)
            assert result.stdout == b"quick\n" and not running.done()
            for task in (queued, running):
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            assert (runner.running, runner.waiting) == (0, 0)

    asyncio.run(asyncio.wait_for(main(), slow(60)))
    assert survivors(marker, within=0) == []


def test_a_maps_short_job_passes_its_long_jobs() -> None:
    """A map of three sleeping long jobs then a short one, on two general slots and a
    short one: the short job's outcome comes first, while the long jobs sleep."""
    marker = unique_marker()
    jobs = [Job(id=i, code=SLEEP, args=(f"{marker}-{i}",), limits=LONG) for i in range(3)]
    jobs.append(Job(id="short", code="print('quick')", limits=SHORT))
    with Runner(max_concurrent=3, short_slots=1, short_wall_time=5) as runner:
        outcomes = runner.map(jobs)
        first = next(outcomes)
        assert first.id == "short" and first.result is not None
        assert first.result.stdout == b"quick\n"
        assert runner.waiting == 1  # the third long job still waits for a slot
        outcomes.close()  # leaving the map kills the sleeping jobs
    assert survivors(marker, within=0) == []
