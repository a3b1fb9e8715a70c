# SPDX-License-Identifier: MIT
"""``pysandbox batch``: its options, the jobs file, ``--scheduler``'s cluster, and the run."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any, BinaryIO, Callable

from .._model.errors import SandboxError
from .._model.units import refuse_long
from .options import add_limit_options, argparse_type, limits_from, pairs
from .terminal import (
    EXIT_INTERRUPTED,
    EXIT_SANDBOX_ERROR,
    EXIT_TERMINATED,
    Terminated,
)

__all__ = [
    "MAX_WHOLE_NUMBER",
    "SCHEDULER_TIMEOUT",
    "add_batch_options",
    "batch_command",
    "whole_number",
]


#: The largest ``--max-concurrent`` and ``--warm``: far more than any host runs.
MAX_WHOLE_NUMBER = 1_000_000


#: Seconds ``batch --scheduler`` tries to reach the scheduler before it gives up (125).
SCHEDULER_TIMEOUT = 10.0


def whole_number(least: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``least`` (argparse names the option):
    ``--max-concurrent`` (1) and ``--warm`` (0, none)."""

    def parse(text: str) -> int:
        refuse_long(text)
        try:
            if not text.isascii():  # int() takes any script's digits
                raise ValueError(text)
            value = int(text)
        except ValueError:
            raise ValueError(f"expected a whole number; got {text!r}") from None
        if value < least:
            raise ValueError(f"must be at least {least}, got {text!r}")
        if value > MAX_WHOLE_NUMBER:
            raise ValueError(f"must be at most {MAX_WHOLE_NUMBER}, got {text!r}")
        return value

    return argparse_type(parse)


def _scheduler_address(text: str) -> str:
    """``--scheduler``: a Dask address with a host and a port (``tcp://HOST:8786``),
    checked by Dask's own parser; a usage error without Dask or with a bad address."""
    import importlib.util

    if importlib.util.find_spec("distributed") is None:
        raise argparse.ArgumentTypeError("needs Dask: pip install pysandbox[dask]")
    from distributed.comm.addressing import get_address_host_port  # type: ignore[import-untyped, import-not-found, unused-ignore]

    try:
        get_address_host_port(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (expected tcp://HOST:PORT)") from None
    return text


def _cluster(address: str) -> Any:
    """A client of the scheduler at ``address`` whose workers can all start a sandbox;
    ``SandboxError`` (exit 125) when the scheduler cannot be reached within
    ``SCHEDULER_TIMEOUT`` or a worker cannot start a sandbox."""
    from .._runner.dask import connect, probe_on_worker

    try:
        client = connect(address, timeout=SCHEDULER_TIMEOUT)
    except OSError as exc:
        raise SandboxError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    try:
        answers = client.run(probe_on_worker)
        problems = {worker: why for worker, why in answers.items() if why is not None}
        if problems:
            worker, why = sorted(problems.items())[0]
            raise SandboxError(
                f"{len(problems)} of the {len(answers)} workers of {address} cannot start a "
                f"sandbox; {worker}: {why}"
            )
        if not answers:
            print(
                f"pysandbox: the scheduler at {address} has no workers yet; the jobs wait for them",
                file=sys.stderr,
            )
    except BaseException:
        client.close()
        raise
    return client


def _open_jobs(parser: argparse.ArgumentParser, path: str, out: str) -> BinaryIO:
    """JOBS opened for reading in binary (``-``: our stdin); a usage error when it cannot
    be read or is the results file itself."""
    if path == "-":
        return sys.stdin.buffer
    try:
        if os.path.exists(out) and os.path.samefile(path, out):
            parser.error(f"JOBS and --out are the same file: {path}")
        return open(path, "rb")
    except OSError as exc:
        parser.error(f"cannot read JOBS {path}: {exc.strerror or exc}")


def _job_lines(path: str) -> int | None:
    """How many non-blank lines the regular file ``path`` has (the progress bar's
    total), read in one streaming pass; None for stdin or a pipe."""
    from .._model.untrusted import bounded_lines

    if path == "-" or not os.path.isfile(path):
        return None
    with open(path, "rb") as stream:  # a line of any length costs 64 KiB
        return sum(1 for line in bounded_lines(stream, 1 << 16) if line.strip())


def batch_command(parser: argparse.ArgumentParser, options: argparse.Namespace) -> int:
    # Imported here, not with the module: the parser of every command adds batch's
    # options, and only batch runs these (asyncio among them).
    import importlib.util

    from .._api.run import run
    from .._runner.batch import BatchReport, job_lines, open_results, run_batch
    from .._runner.results_file import ResultsFileError

    if options.progress and importlib.util.find_spec("tqdm") is None:
        parser.error("--progress needs tqdm: pip install pysandbox[progress]")
    env = pairs(parser, "--env", options.env)
    jobs = _open_jobs(parser, options.jobs, options.out)
    # a host (or cluster) that cannot run a sandbox fails here (125), before RESULTS
    client = None if options.scheduler is None else _cluster(options.scheduler)
    max_concurrent = options.max_concurrent
    if client is None:
        run(["true"])
    elif max_concurrent is None:  # each worker as many as it has threads
        max_concurrent = max(client.nthreads().values(), default=None)
    try:
        results = open_results(options.out)
    except ResultsFileError as exc:
        if client is not None:
            client.close()
        parser.error(f"argument --out: {exc}")
    if results.repaired:
        print(
            f"pysandbox: cut off a partial last line of {options.out} ({results.repaired} "
            "bytes), left by an interrupted run",
            file=sys.stderr,
        )
    report = BatchReport()
    try:
        with results, jobs, client if client is not None else contextlib.nullcontext():
            run_batch(
                job_lines(jobs),
                results,
                report,
                limits=limits_from(options),
                max_concurrent=max_concurrent,
                warm=options.warm,
                readable=[os.path.abspath(path) for path in options.readable],
                env=env,
                ordered=options.ordered,
                progress=options.progress,
                total=_job_lines(options.jobs) if options.progress else None,
                client=client,
            )
    except (KeyboardInterrupt, Terminated) as stop:
        kind = "interrupted" if isinstance(stop, KeyboardInterrupt) else "terminated"
        print(
            f"pysandbox: {kind}: the running sandboxes were killed; {report.summary()}; "
            "rerun the same command to resume",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED if kind == "interrupted" else EXIT_TERMINATED
    except OSError as exc:
        print(
            f"pysandbox: error: the batch stopped: {exc}; {report.summary()}; fix it and "
            "rerun the same command to resume",
            file=sys.stderr,
        )
        return EXIT_SANDBOX_ERROR
    print(f"pysandbox: batch done: {report.summary()}", file=sys.stderr)
    return 0


def add_batch_options(command: argparse.ArgumentParser) -> None:
    """``batch``'s arguments: JOBS, --out, the concurrency, order, progress, the
    environment and readable paths of every job, and the limits of a job without any."""
    command.add_argument(
        "jobs",
        metavar="JOBS.jsonl",
        help="one JSON job per line (schema: docs/graders.rst); '-': our stdin",
    )
    command.add_argument(
        "--out",
        required=True,
        metavar="RESULTS.jsonl",
        help="append one JSON outcome per job here; the jobs whose ids it has are skipped",
    )
    command.add_argument(
        "--max-concurrent",
        type=whole_number(1),
        metavar="N",
        help="the most sandboxes running at once (default: the number of CPUs)",
    )
    command.add_argument(
        "--warm",
        type=whole_number(0),
        default=0,
        metavar="K",
        help="keep K sandboxes started ahead of the jobs (docs/services.rst: Warm sandboxes), "
        "in each worker process with --scheduler (default: 0, none)",
    )
    command.add_argument(
        "--scheduler",
        type=_scheduler_address,
        metavar="ADDRESS",
        help="run the jobs on the workers of the Dask scheduler at ADDRESS "
        "(tcp://HOST:8786) instead of here; --max-concurrent then caps each worker process "
        "(default: its threads); needs pysandbox[dask]",
    )
    command.add_argument(
        "--ordered",
        action="store_true",
        help="write the outcomes in the order of JOBS (default: as the jobs end)",
    )
    command.add_argument(
        "--progress",
        action="store_true",
        help="show a progress bar with the count of each verdict (needs tqdm)",
    )
    command.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set an environment variable for every job (a job's env wins); repeatable",
    )
    command.add_argument(
        "--readable",
        action="append",
        default=[],
        metavar="PATH",
        help="let every job read host PATH, read-only at the same path; repeatable",
    )
    add_limit_options(command)
