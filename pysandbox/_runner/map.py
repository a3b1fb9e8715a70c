# SPDX-License-Identifier: MIT
"""``map_jobs``: many jobs through a pool of threads, one outcome per job as each ends
(or in input order), the jobs read lazily and the memory flat however many there are.

Threads suit the work: each waits in the C core, which releases the GIL.  The caller's
iterable is read only as far as the window (twice the workers) asks, each job of the
window on a thread of its own (those beyond the workers wait for a slot of the Runner,
planned and ready to start, in input order: ``_slots.place_in_line``), and an outcome
is dropped once yielded.  Leaving the loop
(``break``, an exception, ``KeyboardInterrupt``, the generator's ``close``) sets the
map's cancel event: the running sandboxes are killed and reaped, the queued jobs
dropped, and no more jobs are read.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import threading
from collections.abc import Callable, Generator, Iterable

from .._model.cancel import CancelEvent
from .job import Job
from .outcome import Outcome
from .slots import Turns, place_in_line

__all__ = ["RunJob", "map_jobs"]

#: How a worker runs one job: the job and the map's cancel event to its outcome; never
#: raises for the job's own faults (``Runner.run_job``).
RunJob = Callable[[Job, CancelEvent], Outcome]

#: Jobs read ahead per worker: a worker that finishes finds its next job waiting, and
#: no more than this many outcomes wait for a slow one in ordered mode.
READ_AHEAD = 2


def _outcome(
    run_job: RunJob, turns: Turns, index: int, job: object, cancel: CancelEvent
) -> Outcome:
    """The outcome of the ``index``-th item of the input, its id the index when the job
    has none; an item that is not a ``Job`` is an error outcome.  The job waits for a
    slot in its place in ``turns``: after every job read before it."""
    with place_in_line(turns, index):
        if not isinstance(job, Job):
            error = TypeError(f"jobs[{index}] must be a Job, not {type(job).__name__}")
            return Outcome.of_error(index, error)
        outcome = run_job(job, cancel)
    return outcome if outcome.id is not None else dataclasses.replace(outcome, id=index)


def map_jobs(
    run_job: RunJob,
    jobs: Iterable[object],
    *,
    workers: int,
    ordered: bool,
    closed: Callable[[], bool],
) -> Generator[Outcome, None, None]:
    """Run ``jobs`` with ``run_job``, ``workers`` at once (the Runner's cap, which
    ``run_job`` waits for), and yield their outcomes.

    :param ordered: yield in input order (waiting for a slow job while the others run
        on, holding at most ``READ_AHEAD * workers`` outcomes) rather than as they end.
    :param closed: asked before each job is read; once true the map stops with
        ``RuntimeError`` (its ``Runner`` was closed and has killed the runs).
    """
    cancel = threading.Event()
    turns = Turns()
    source = enumerate(jobs)
    window = READ_AHEAD * workers
    pending: collections.deque[concurrent.futures.Future[Outcome]] = collections.deque()
    # A thread per job of the window: beyond the ``workers`` running, the others wait
    # for a slot with their plans built, so a slot that frees starts its next sandbox at
    # once instead of after the outcome is handed back and the next job read and planned.
    pool = concurrent.futures.ThreadPoolExecutor(window, thread_name_prefix="pysandbox-map")
    try:
        exhausted = False
        while True:
            while not exhausted and len(pending) < window:
                if closed():
                    raise RuntimeError("the Runner was closed during map; its runs were killed")
                item = next(source, None)
                if item is None:
                    exhausted = True
                    break
                pending.append(pool.submit(_outcome, run_job, turns, item[0], item[1], cancel))
            if not pending:
                return
            if ordered:
                yield pending.popleft().result()
                continue
            done, _ = concurrent.futures.wait(
                pending, return_when=concurrent.futures.FIRST_COMPLETED
            )
            for future in done:
                pending.remove(future)
                yield future.result()
    finally:
        cancel.set()
        pool.shutdown(wait=True, cancel_futures=True)
