# SPDX-License-Identifier: MIT
"""``Runner.map(jobs, client=...)``: the jobs on the workers of a Dask cluster.

The caller's side (``map_on_cluster``) submits one task per job, each under a key of its
own, never more than a window of a few tasks per slot of the cluster, topped up as tasks
end, so the client's memory stays flat however many jobs there are.  Each task ends in
exactly one ``Outcome``: the worker's, or an error outcome when Dask gave up on the task
(``KilledWorker`` after its workers died too often, a cancel, a worker that cannot
import pysandbox).  A task whose future the map has already answered is skipped, so no
job is yielded twice.

The workers' side (``run_on_worker``) runs each job with a ``Runner`` of its process,
made on first use from the caller's settings (limits, readable, env, max_concurrent,
warm, the short slots) and kept for later tasks with the same settings:
``max_concurrent`` caps the sandboxes of each worker process, not of the cluster, and
``warm`` keeps that many warm sandboxes in each worker process.  A sandbox ends when
the process that started it dies (the lifeline, ``_lifeline.py``), so a worker killed
with SIGKILL leaves no sandbox behind; the scheduler runs its tasks again elsewhere.

Leaving the loop early cancels the tasks not yet started (``Client.cancel``) and, for
those running, sets the map's cancel event in every worker process (``Client.run``):
their sandboxes are killed within the C core's 50 ms tick.

Dask is optional (``pip install pysandbox[dask]``): this module is imported only when a
map is given a client, and imports ``distributed`` only then.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Generator, Hashable, Iterable
from typing import TYPE_CHECKING, Any

from .._model.limits import Limits
from .job import Job, JobId
from .outcome import Outcome

if TYPE_CHECKING:
    from .runner import Runner

__all__ = [
    "Settings",
    "cancel_on_worker",
    "check_client",
    "connect",
    "map_on_cluster",
    "probe_on_worker",
    "run_on_worker",
    "worker_runners",
]

#: Tasks in flight per slot of the cluster: a worker that finishes a job finds the next
#: one already there, and no more than this many tasks per slot wait.
WINDOW_PER_SLOT = 2

#: Seconds between two looks at the cluster's size, so a cluster that grows during a
#: map gets a wider window.
RESIZE_EVERY = 5.0

#: Maps cancelled that a worker process remembers, so a task of one that starts after
#: the cancel reached the worker is cancelled too.
REMEMBERED_CANCELS = 1024


@dataclasses.dataclass(frozen=True)
class Settings:
    """The caller's ``Runner`` as data: what each worker process's ``Runner`` is made of."""

    limits: Limits
    readable: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    max_concurrent: int
    warm: int
    short_slots: int
    short_wall_time: float | None

    @classmethod
    def of(cls, runner: Runner) -> Settings:
        """The settings of ``runner``."""
        return cls(
            runner.limits,
            runner.readable,
            tuple(sorted(runner.env.items())),
            runner.max_concurrent,
            runner.warm,
            runner.short_slots,
            runner.short_wall_time,
        )


class _WorkerState:
    """A worker process's Runners (one per ``Settings``) and the cancel events of the
    maps whose tasks run there.  Thread-safe: a worker runs tasks on several threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runners: dict[Settings, Runner] = {}
        self._events: dict[Hashable, tuple[threading.Event, int]] = {}
        self._cancelled: collections.OrderedDict[Hashable, None] = collections.OrderedDict()

    def runner(self, settings: Settings) -> Runner:
        """The Runner of ``settings`` in this process, made on first use."""
        from .runner import Runner

        with self._lock:
            found = self._runners.get(settings)
            if found is None:
                found = Runner(
                    limits=settings.limits,
                    readable=settings.readable,
                    env=dict(settings.env),
                    max_concurrent=settings.max_concurrent,
                    warm=settings.warm,
                    short_slots=settings.short_slots,
                    short_wall_time=settings.short_wall_time,
                )
                self._runners[settings] = found
            return found

    def runners(self) -> list[Runner]:
        """Every Runner this process has made."""
        with self._lock:
            return list(self._runners.values())

    def enter(self, map_id: Hashable) -> threading.Event:
        """The cancel event of ``map_id`` for a task that starts (set if the map was
        cancelled already); ``leave`` must follow."""
        with self._lock:
            event, users = self._events.get(map_id, (threading.Event(), 0))
            if map_id in self._cancelled:
                event.set()
            self._events[map_id] = (event, users + 1)
            return event

    def leave(self, map_id: Hashable) -> None:
        """A task of ``map_id`` ended; its event is dropped with the map's last task."""
        with self._lock:
            event, users = self._events[map_id]
            if users == 1:
                del self._events[map_id]
            else:
                self._events[map_id] = (event, users - 1)

    def cancel(self, map_id: Hashable) -> None:
        """Set the cancel event of ``map_id``'s running tasks, and of those to come."""
        with self._lock:
            self._cancelled[map_id] = None
            while len(self._cancelled) > REMEMBERED_CANCELS:
                self._cancelled.popitem(last=False)
            if map_id in self._events:
                self._events[map_id][0].set()


_WORKER = _WorkerState()


def run_on_worker(map_id: str, settings: Settings, job: Job) -> Outcome:
    """The task of one job, run by a Dask worker: the job in a sandbox of this
    process's Runner for ``settings``, under its cap; ends early when the map is
    cancelled (``cancel_on_worker``)."""
    cancel = _WORKER.enter(map_id)
    try:
        return _WORKER.runner(settings).run_job(job, cancel=cancel)
    finally:
        _WORKER.leave(map_id)


def cancel_on_worker(map_id: str) -> None:
    """Run by ``Client.run`` in each worker process when a map is left: kill the
    sandboxes of ``map_id``'s running tasks and cancel its tasks that start later."""
    _WORKER.cancel(map_id)


def worker_runners() -> list[Runner]:
    """The Runners of this worker process, one per caller's settings (for
    ``Client.run``: their ``running`` and ``waiting`` gauges show a worker's load)."""
    return _WORKER.runners()


def connect(address: str, *, timeout: float | None = None) -> Any:
    """A ``distributed.Client`` of the scheduler at ``address`` (``tcp://HOST:8786``),
    for ``Runner.map(client=...)``; ``ImportError`` saying how to install Dask.

    :param timeout: seconds to reach the scheduler before ``OSError`` (None: Dask's
        ``distributed.comm.timeouts.connect``, 30 s by default).
    """
    if not isinstance(address, str):
        raise TypeError(f"address must be a str, not {type(address).__name__}")
    if not address:
        raise ValueError("address must name a scheduler, such as tcp://HOST:8786")
    distributed = _import_distributed()
    if timeout is None:
        return distributed.Client(address)
    return distributed.Client(address, timeout=timeout)


def probe_on_worker() -> str | None:
    """Run by ``Client.run`` in each worker process before a batch: None when this
    process can start a sandbox, else why it cannot (so a worker host without
    bubblewrap fails the batch once instead of filling its results with errors)."""
    from .._api.run import run

    try:
        run(["true"])
    except Exception as exc:  # SandboxError, a broken host: the reason is the answer
        return f"{type(exc).__name__}: {exc}"
    return None


def _import_distributed() -> Any:
    """The ``distributed`` module, or ``ImportError`` naming the extra to install."""
    try:
        import distributed  # type: ignore[import-untyped, import-not-found, unused-ignore]
    except ImportError as exc:
        raise ImportError("Runner.map(client=...) needs Dask: pip install pysandbox[dask]") from exc
    return distributed


def check_client(client: object) -> None:
    """``TypeError`` naming ``client`` unless it is a ``distributed.Client``."""
    distributed = _import_distributed()
    if not isinstance(client, distributed.Client):
        raise TypeError(f"client must be a distributed.Client, not {type(client).__name__}")


class _Window:
    """How many tasks a map keeps in flight: ``WINDOW_PER_SLOT`` per slot of the cluster
    (a worker's slots: the fewer of its threads and ``max_concurrent``), looked up again
    every ``RESIZE_EVERY`` seconds."""

    def __init__(self, client: Any, max_concurrent: int) -> None:
        self._client = client
        self._max_concurrent = max_concurrent
        self._size = WINDOW_PER_SLOT
        self._checked = -RESIZE_EVERY

    def size(self) -> int:
        """The window now (at least ``WINDOW_PER_SLOT``, for a cluster still empty)."""
        now = time.monotonic()
        if now - self._checked >= RESIZE_EVERY:
            self._checked = now
            threads = self._client.nthreads()
            slots = sum(min(count, self._max_concurrent) for count in threads.values())
            self._size = WINDOW_PER_SLOT * max(slots, 1)
        return self._size


def _answer(future: Any, job_id: JobId | None) -> Outcome:
    """The outcome of a finished task: the worker's, or an error outcome for a task
    Dask gave up on (``KilledWorker``, cancelled, or the worker side raised)."""
    try:
        outcome = future.result()
    except (Exception, asyncio.CancelledError) as exc:  # asyncio's is a BaseException
        return Outcome.of_error(job_id, exc)
    if not isinstance(outcome, Outcome):
        error = TypeError(f"the worker returned a {type(outcome).__name__}, not an Outcome")
        return Outcome.of_error(job_id, error)
    return outcome


def _answer_here(runner: Runner, index: int, job: object) -> Outcome | None:
    """The outcome of the ``index``-th item when the caller gives it without a worker:
    an error outcome for an item that is not a ``Job``, or ``runner``'s own answer (a
    batch's bad line); None for a job to send."""
    if not isinstance(job, Job):
        error = TypeError(f"jobs[{index}] must be a Job, not {type(job).__name__}")
        return Outcome.of_error(index, error)
    return runner._answer_here(job)


def map_on_cluster(
    runner: Runner,
    client: Any,
    jobs: Iterable[object],
    *,
    ordered: bool,
    closed: Callable[[], bool],
) -> Generator[Outcome, None, None]:
    """Run ``jobs`` on the workers of ``client``'s cluster with ``runner``'s settings as
    each worker's defaults, and yield one outcome per job as each ends (``ordered``: in
    input order).

    A job without an id gets its place in the input before it is sent; an item that is
    not a ``Job``, or a job ``runner`` answers itself (``Runner._answer_here``), is an
    outcome in its place and is not sent.  ``closed`` is asked before each
    job is read; once true the map cancels its tasks and raises ``RuntimeError``.
    """
    distributed = _import_distributed()
    settings = Settings.of(runner)
    map_id = f"pysandbox-map-{uuid.uuid4().hex}"
    window = _Window(client, settings.max_concurrent)
    tasks = distributed.as_completed()
    in_flight: dict[str, tuple[Any, int, JobId | None]] = {}
    order: collections.deque[int] = collections.deque()  # ordered: indices not yielded
    ready: dict[int, Outcome] = {}  # ordered: outcomes waiting for an earlier job's
    source = enumerate(jobs)
    exhausted = False
    try:
        while True:
            while not exhausted and len(order if ordered else in_flight) < window.size():
                if closed():
                    raise RuntimeError("the Runner was closed during map; its tasks were cancelled")
                item = next(source, None)
                if item is None:
                    exhausted = True
                    break
                index, job = item
                if ordered:
                    order.append(index)
                here = _answer_here(runner, index, job)
                if here is not None:
                    if ordered:
                        ready[index] = here
                    else:
                        yield here
                    continue
                assert isinstance(job, Job)
                if job.id is None:
                    job = dataclasses.replace(job, id=index)
                key = f"{map_id}-{index}"
                future = client.submit(run_on_worker, map_id, settings, job, key=key)
                in_flight[key] = (future, index, job.id)
                tasks.add(future)
            while order and order[0] in ready:
                yield ready.pop(order.popleft())
            if not in_flight:
                if exhausted:
                    return
                continue
            finished = next(tasks)
            entry = in_flight.pop(finished.key, None)
            if entry is None:
                continue  # a future answered once already: never a second outcome
            _, index, job_id = entry
            if ordered:
                ready[index] = _answer(finished, job_id)
            else:
                yield _answer(finished, job_id)
    finally:
        _stop(client, map_id, [entry[0] for entry in in_flight.values()])


def _stop(client: Any, map_id: str, futures: list[Any]) -> None:
    """Cancel ``futures`` and the sandboxes of ``map_id`` still running on the workers.

    Best effort on a cluster in trouble: a scheduler or worker that does not answer is
    skipped (its sandboxes end with their limits, or with the worker process)."""
    if not futures:
        return
    try:
        client.cancel(futures)
        client.run(cancel_on_worker, map_id)
    except Exception:  # the cluster is gone or going: nothing left to cancel there
        return
