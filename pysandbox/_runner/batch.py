# SPDX-License-Identifier: MIT
"""``run_batch``: the jobs of a JSON-lines file through one ``Runner``, one outcome line
per job appended to a ``ResultsFile``; what ``pysandbox batch`` runs.

The jobs are read lazily, a line at a time as ``Runner.map`` asks for the next job, so a
file of any length costs the memory of the read-ahead window plus one id per line (for
resuming and for refusing a duplicate id).  A line that is not a job (bad UTF-8 or JSON,
a bad key or value) or repeats an earlier line's id becomes an error outcome in its
place, given by the caller's Runner: on a cluster (``client``) it is never sent to a
worker.  A line whose id the results file already has is skipped (resume).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from typing import Any, BinaryIO

from .._model.cancel import CancelEvent
from .._model.limits import Limits
from .._model.untrusted import bounded_lines, loads
from .job import Job, JobId
from .outcome import Outcome
from .progress import open_bar
from .results_file import ResultsFile
from .runner import Runner

__all__ = [
    "MAX_JOB_LINE_BYTES",
    "BatchReport",
    "DuplicateIdError",
    "JobLineError",
    "job_lines",
    "open_results",
    "run_batch",
]

#: The longest job line (its stdin and files included): a longer one is an error
#: outcome, and reading it costs at most this much memory.
MAX_JOB_LINE_BYTES = 256 * 2**20


class JobLineError(ValueError):
    """A line of the jobs file that is not a job; the message starts with ``line N: ``."""


class DuplicateIdError(JobLineError):
    """A job line whose id an earlier line of the jobs file has."""


@dataclasses.dataclass
class BatchReport:
    """What a batch did so far: filled in as it goes, so an interrupted batch reports too."""

    #: How many outcomes of each verdict (``"OK"``, ``"ERROR"``...) this run wrote.
    verdicts: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    #: Job lines skipped because the results file had their ids (an earlier run's).
    skipped: int = 0
    #: Seconds from the first job read to the last outcome written (or the interruption).
    elapsed: float = 0.0

    @property
    def written(self) -> int:
        """Outcome lines this run wrote."""
        return sum(self.verdicts.values())

    def summary(self) -> str:
        """One line for people: ``12 jobs in 1.4 s (8.6 jobs/s): OK=10, ERROR=2; ...``."""
        rate = self.written / self.elapsed if self.elapsed > 0 else 0.0
        counts = ", ".join(f"{verdict}={n}" for verdict, n in sorted(self.verdicts.items()))
        line = f"{self.written} jobs in {self.elapsed:.1f} s ({rate:.1f} jobs/s)"
        line += f": {counts}" if counts else ""
        if self.skipped:
            line += f"; {self.skipped} skipped, already in the results"
        return line


@dataclasses.dataclass(frozen=True)
class _Rejected(Job):
    """A line that is not a job, sent through ``Runner.map`` in a job's place so that its
    error outcome keeps its place in the output order and in the read-ahead window; it
    never runs (``_BatchRunner.run_job`` answers with its ``problem``)."""

    problem: JobLineError | None = None


def _rejected(job_id: JobId, problem: JobLineError) -> _Rejected:
    return _Rejected(id=job_id, code="", problem=problem)


class _BatchRunner(Runner):
    """A ``Runner`` that answers a ``_Rejected`` line with its error outcome itself: in
    ``run_job`` for a local map, and before a cluster map would send it to a worker
    (whose Runner is a plain one and would run the placeholder as a job)."""

    def _answer_here(self, job: Job) -> Outcome | None:
        """The error outcome of a line that was not a job; None for a job to run."""
        if isinstance(job, _Rejected):
            assert job.problem is not None
            return Outcome.of_error(job.id, job.problem)
        return None

    def run_job(self, job: Job, *, cancel: CancelEvent | None = None) -> Outcome:
        """The outcome of ``job``: its run, or the error of a line that was not a job."""
        here = self._answer_here(job)
        return here if here is not None else super().run_job(job, cancel=cancel)


def _valid_id(value: object) -> JobId | None:
    """``value`` if it can be a job's id (a str or an int, not a bool), else None."""
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return value
    return None


def _parse(number: int, line: bytes) -> Job:
    """The job on line ``number``, its id the line number when it gives none; a
    ``_Rejected`` carrying the reason (and the line's id, if it has a valid one) when
    the line is not a job: too long, too deep, a number out of range, not UTF-8, not
    JSON, not a job (``_untrusted.loads`` bounds the parse itself)."""
    try:
        data = loads(line, max_bytes=MAX_JOB_LINE_BYTES)
    except json.JSONDecodeError as exc:
        return _rejected(
            number, JobLineError(f"line {number}: bad JSON: {exc.msg}, column {exc.colno}")
        )
    except ValueError as exc:  # UntrustedInputError: too long, deep, big, not UTF-8
        return _rejected(number, JobLineError(f"line {number}: {exc}"))
    given = _valid_id(data.get("id")) if isinstance(data, dict) else None
    job_id = number if given is None else given
    try:
        job = Job.from_dict(data)
    except (TypeError, ValueError) as exc:
        return _rejected(job_id, JobLineError(f"line {number}: {exc}"))
    return job if job.id is not None else dataclasses.replace(job, id=number)


def read_jobs(
    lines: Iterable[bytes], results: ResultsFile, on_skip: Callable[[], None]
) -> Iterator[Job]:
    """The jobs of ``lines`` (the jobs file, blank lines aside) that ``results`` does not
    have yet, read one line at a time as they are asked for.

    A line whose id an earlier line has becomes a ``DuplicateIdError`` outcome, unless
    ``results`` already holds that outcome; ``on_skip`` is called for each line skipped.
    """
    first_line: dict[JobId, int] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        job = _parse(number, line)
        assert job.id is not None
        if job.id not in first_line:
            first_line[job.id] = number
            if job.id in results.done:
                on_skip()
            else:
                yield job
        elif results.duplicates[job.id] > 0:
            results.duplicates[job.id] -= 1
            on_skip()
        else:
            yield _rejected(
                job.id,
                DuplicateIdError(
                    f"line {number}: duplicate id {json.dumps(job.id)}, also on line "
                    f"{first_line[job.id]}; ids must be unique"
                ),
            )


def job_lines(stream: BinaryIO) -> Iterator[bytes]:
    """The lines of the jobs file ``stream`` for ``run_batch``, each cut past
    ``MAX_JOB_LINE_BYTES`` (the cut line becomes an error outcome)."""
    return bounded_lines(stream, MAX_JOB_LINE_BYTES)


def open_results(path: str) -> ResultsFile:
    """The results file at ``path`` for a batch, with what an earlier run left in it."""
    return ResultsFile(path, duplicate_error=DuplicateIdError.__name__)


def run_batch(
    lines: Iterable[bytes],
    results: ResultsFile,
    report: BatchReport,
    *,
    limits: Limits,
    max_concurrent: int | None,
    warm: int = 0,
    readable: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    ordered: bool,
    progress: bool,
    total: int | None = None,
    client: object = None,
) -> None:
    """Run every job of ``lines`` that ``results`` lacks and append its outcome there,
    counting in ``report`` as it goes.

    :param limits: the limits of a job that gives none.
    :param max_concurrent: the most sandboxes at once (None: the number of CPUs).
    :param warm: warm sandboxes to keep (``Runner(warm=)``; on a cluster, per worker).
    :param readable: host paths every job may read (a job's ``readable`` adds to them).
    :param env: variables every job gets (a job's ``env`` is merged over them).
    :param ordered: write the outcomes in the order of the lines, not as jobs end.
    :param progress: show a tqdm bar on stderr (``total`` job lines, when known); a
        skipped line moves it on too.  ``ImportError`` when tqdm is missing.
    :param client: a ``distributed.Client``: the jobs run on its cluster's workers
        (``Runner.map(client=...)``), ``max_concurrent`` capping each worker process;
        the bad lines are answered here and never sent.

    An exception (``KeyboardInterrupt``, an ``OSError`` of the results file) kills and
    reaps the running sandboxes before it propagates; every line written is whole.
    """
    bar: Any = open_bar(total) if progress else None
    start = time.monotonic()

    def skipped() -> None:
        report.skipped += 1
        if bar is not None:
            bar.update(1)

    try:
        with _BatchRunner(
            limits=limits, readable=readable, env=env, max_concurrent=max_concurrent, warm=warm
        ) as runner:
            outcomes = runner.map(
                read_jobs(lines, results, skipped),
                ordered=ordered,
                progress=False if bar is None else bar,
                client=client,
            )
            try:
                for outcome in outcomes:
                    results.append(outcome)
                    report.verdicts[outcome.verdict] += 1
            finally:
                if isinstance(outcomes, Generator):
                    outcomes.close()
    finally:
        report.elapsed = time.monotonic() - start
        if bar is not None:
            bar.close()
