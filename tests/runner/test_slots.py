# SPDX-License-Identifier: MIT
"""The order in which a Runner's slots are given: first come first served, and a map's
jobs in input order however their threads are scheduled (``pysandbox/_runner/slots.py``)."""

from __future__ import annotations

import threading
import time

import pytest
from support.timing import PROMPTLY

from pysandbox import Job, Outcome
from pysandbox._model.cancel import Cancelled
from pysandbox._runner.map import map_jobs
from pysandbox._runner.slots import Slots, Turns, place_in_line


def _wait_until(condition: object, what: str) -> None:
    deadline = time.monotonic() + PROMPTLY
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def _queued(slots: Slots) -> int:
    with slots._condition:
        return len(slots._queue)


def test_a_freed_slot_goes_to_the_ticket_that_waited_first() -> None:
    """The slot that ``a`` gives back goes to ``b``, which was waiting, and not to ``c``,
    which asks for one at that very moment (with the lock held from the release to its
    request, so ``b`` cannot have run in between)."""
    slots = Slots(1)
    order: list[str] = []
    a = slots.ticket()
    a.wait()

    def waiter() -> None:
        with slots.ticket() as b:
            b.wait()
            order.append("b")

    thread = threading.Thread(target=waiter)
    thread.start()
    _wait_until(lambda: _queued(slots) == 1, "b never queued")
    with slots._condition:
        slots.leave(a)
        with slots.ticket() as c:
            c.wait()
            order.append("c")
    thread.join(PROMPTLY)
    assert order == ["b", "c"]


def test_a_cancelled_waiter_leaves_the_queue_and_the_next_gets_the_slot() -> None:
    slots = Slots(1)
    holder = slots.ticket()
    holder.wait()
    cancel = threading.Event()
    errors: list[BaseException] = []
    got: list[str] = []

    def first() -> None:
        with slots.ticket() as ticket:
            try:
                ticket.wait(cancel)
            except Cancelled as exc:
                errors.append(exc)

    def second() -> None:
        with slots.ticket() as ticket:
            ticket.wait()
            got.append("second")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    threads[0].start()
    _wait_until(lambda: _queued(slots) == 1, "the first never queued")
    threads[1].start()
    _wait_until(lambda: _queued(slots) == 2, "the second never queued")
    cancel.set()
    _wait_until(lambda: _queued(slots) == 1, "the cancelled one is still in the queue")
    slots.leave(holder)
    for thread in threads:
        thread.join(PROMPTLY)
    assert len(errors) == 1 and got == ["second"]
    assert _queued(slots) == 0 and slots.running == 0


def test_places_in_line_order_the_tickets_of_threads_that_reach_them_out_of_order() -> None:
    """Thread 0 is the last to ask for its slot; it still gets the first."""
    slots = Slots(1)
    holder = slots.ticket()
    holder.wait()
    turns = Turns()
    order: list[int] = []

    def job(place: int) -> None:
        with place_in_line(turns, place), slots.ticket() as ticket:
            ticket.wait()
            order.append(place)

    threads = [threading.Thread(target=job, args=(place,)) for place in (2, 1, 0)]
    for thread in threads:
        thread.start()
    _wait_until(lambda: _queued(slots) == 3, "the three never queued")
    slots.leave(holder)
    for thread in threads:
        thread.join(PROMPTLY)
    assert order == [0, 1, 2]


def test_a_place_left_without_a_ticket_lets_the_next_one_on() -> None:
    turns = Turns()
    with place_in_line(turns, 0):
        pass  # a job answered without a sandbox (a bad line of a batch)
    slots = Slots(1)
    with place_in_line(turns, 1), slots.ticket() as ticket:
        assert ticket.wait() >= 0


@pytest.mark.parametrize("ordered", [False, True], ids=["as-they-end", "ordered"])
def test_a_map_starts_its_jobs_in_input_order(ordered: bool) -> None:
    """The first job is the slowest to plan: every other job of the window reaches the
    queue before it.  With one slot, the jobs still run one by one in input order."""
    slots = Slots(1)
    started: list[object] = []

    def run_job(job: Job, cancel: object) -> Outcome:
        if job.id == 0:
            time.sleep(0.3)  # planning: files encoded, paths checked...
        with slots.ticket() as ticket:
            ticket.wait()
            started.append(job.id)
        return Outcome.of_error(job.id, RuntimeError("a job of this test runs nothing"))

    jobs = [Job(id=n, code="pass") for n in range(12)]
    outcomes = list(map_jobs(run_job, jobs, workers=4, ordered=ordered, closed=lambda: False))
    assert started == list(range(12))
    assert sorted(int(str(outcome.id)) for outcome in outcomes) == list(range(12))
