# SPDX-License-Identifier: MIT
"""The ``pysandbox`` command line (the console script, and ``python -m pysandbox``).

``pysandbox run [options] -- PROGRAM ARGS...`` and ``pysandbox python [options] FILE.py |
-c CODE [ARGS...]`` run one program in a fresh sandbox: its stdout and stderr pass
through as they arrive, then one verdict line goes to stderr (or, with ``--json``, one
JSON object, ``Result.to_dict()``, goes to stdout), and the exit status mirrors the
program's.
``pysandbox batch JOBS.jsonl --out RESULTS.jsonl`` runs one job per line of JOBS and
appends one outcome line per job to RESULTS, resuming where an earlier run stopped;
with ``--scheduler tcp://HOST:8786`` the jobs run on the workers of a Dask cluster.
``pysandbox selftest`` and ``pysandbox demo`` run the self-test and the reference demo;
bare ``python -m pysandbox`` is the demo, and ``--selftest`` is ``selftest``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Callable, NoReturn

from .._model.errors import SandboxError
from .._version import __version__
from .cli_batch import add_batch_options, batch_command
from .cli_run import add_run_options, python_command, run_command
from .terminal import (
    EXIT_INTERRUPTED,
    EXIT_READER_GONE,
    EXIT_SANDBOX_ERROR,
    EXIT_SELFTEST_FAILED,
    EXIT_STATUS_HELP,
    EXIT_TERMINATED,
    EXIT_USAGE,
    ReaderGone,
    Terminated,
    say,
)

__all__ = [
    "build_parser",
    "main",
]


def _selftest_command(parser: argparse.ArgumentParser, options: argparse.Namespace) -> int:
    # Imported here, as json and dataclasses: the other commands need none of them.
    import dataclasses
    import json

    from .._api.selftest import selftest

    report = selftest()
    if options.json:
        checks = [dataclasses.asdict(check) for check in report.checks]
        print(json.dumps({"ok": report.ok, "checks": checks}))
    else:
        print(report)
    return 0 if report.ok else EXIT_SELFTEST_FAILED


def _demo_command(parser: argparse.ArgumentParser, options: argparse.Namespace) -> int:
    return _demo()


def _demo() -> int:
    """The reference demo, imported only when it runs."""
    from .demo import demo

    return demo()


def _add_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    summary: str,
    description: str | None = None,
) -> argparse.ArgumentParser:
    """A sub-parser whose ``--help`` ends with the exit statuses."""
    return commands.add_parser(
        name,
        help=summary,
        description=description or summary,
        epilog=EXIT_STATUS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def build_parser() -> argparse.ArgumentParser:
    """The parser of the whole command line, with one sub-parser per command.

    Each sub-parser's defaults carry its handler (``handler``) and itself (``parser``),
    so errors after parsing are usage errors of the right command.
    """
    parser = argparse.ArgumentParser(
        prog="pysandbox",
        description="Run untrusted programs under bubblewrap with hard limits.  "
        "Without a command: the reference demo.",
        epilog=EXIT_STATUS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"pysandbox {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    run_parser = _add_command(
        commands,
        "run",
        "run a program in a sandbox",
        "Run PROGRAM in a fresh sandbox; PROGRAM is an absolute path inside the sandbox or "
        "a name on its PATH (/usr/local/bin:/usr/bin:/bin).",
    )
    add_run_options(run_parser)
    run_parser.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS...]")
    run_parser.set_defaults(handler=run_command, parser=run_parser)
    python_parser = _add_command(
        commands,
        "python",
        "run Python code with this interpreter in a sandbox",
        "Run FILE.py (a host file; '-': our stdin) or CODE with this Python, as "
        "python -u /sandbox/main.py ARGS inside a fresh sandbox.",
    )
    add_run_options(python_parser)
    python_parser.add_argument("-c", dest="code", metavar="CODE", help="the code to run")
    python_parser.add_argument("argv", nargs=argparse.REMAINDER, metavar="FILE.py [ARGS...]")
    python_parser.set_defaults(handler=python_command, parser=python_parser)
    batch_parser = _add_command(
        commands,
        "batch",
        "run one sandbox per line of a JSON-lines file, resumable",
        "Run each job of JOBS.jsonl (one JSON object per line) in its own sandbox and\n"
        "append its outcome (the job's id and Result.to_dict(), or an error) to\n"
        "RESULTS.jsonl as one line; rerun the same command to resume an interrupted\n"
        "batch.  The limit options apply to the jobs that give no limits of their own.",
    )
    add_batch_options(batch_parser)
    batch_parser.set_defaults(handler=batch_command, parser=batch_parser)
    selftest_parser = _add_command(
        commands, "selftest", "attack a sandbox on this host and report which protections hold"
    )
    selftest_parser.add_argument("--json", action="store_true", help="print one JSON object")
    selftest_parser.set_defaults(handler=_selftest_command, parser=selftest_parser)
    demo_parser = _add_command(commands, "demo", "run the reference implementation's demo")
    demo_parser.set_defaults(handler=_demo_command, parser=demo_parser, json=False)
    return parser


def _fail(options: argparse.Namespace | None, kind: str, message: str, status: int) -> int:
    """Report an error that left no result: on stderr, and as JSON with ``--json``."""
    say(f"pysandbox: {kind.replace('_', ' ')}: {message}")
    if options is not None and getattr(options, "json", False):
        import json

        print(json.dumps({"error": message, "kind": kind}))
    return status


def _raise_terminated(signum: int, frame: object) -> NoReturn:
    raise Terminated


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """Make SIGTERM raise ``Terminated`` for the duration, in the main thread, unless
    it is ignored (as ``nohup`` and some supervisors start a command)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous == signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _dispatch(argv: list[str]) -> int:
    """Parse ``argv`` and run its command; errors that leave no result become statuses."""
    options: argparse.Namespace | None = None
    try:
        if not argv:
            return _demo()
        if argv[0] == "--selftest":
            argv = ["selftest", *argv[1:]]
        parser = build_parser()
        options = parser.parse_args(argv)
        if options.command is None:
            parser.error("choose a command: run, python, batch, selftest or demo")
        handler: Callable[[argparse.ArgumentParser, argparse.Namespace], int] = options.handler
        return handler(options.parser, options)
    except SandboxError as exc:
        return _fail(options, "sandbox_error", str(exc), EXIT_SANDBOX_ERROR)
    except KeyboardInterrupt:
        return _fail(options, "interrupted", "the sandbox was killed", EXIT_INTERRUPTED)
    except Terminated:
        return _fail(options, "terminated", "the sandbox was killed", EXIT_TERMINATED)
    except ReaderGone as gone:
        return _reader_gone(gone.fd)
    except BrokenPipeError:
        return _reader_gone(sys.stdout.fileno())


def _reader_gone(fd: int) -> int:
    """Exit as a program killed by SIGPIPE would, once the reader of ``fd`` went away;
    ``fd`` now writes to /dev/null, so the interpreter's last flush at exit raises no
    error of its own."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
    return EXIT_READER_GONE


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (``sys.argv[1:]`` when None) and return its exit
    status; usage errors print argparse's message and return ``EXIT_USAGE``, never raise."""
    try:
        with _sigterm_unwinds():
            return _dispatch(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        return _exit_code(exc)


def _exit_code(exc: SystemExit) -> int:
    """The status a ``SystemExit`` (argparse's ``--help`` or usage error) stands for."""
    if exc.code is None:
        return 0
    return exc.code if isinstance(exc.code, int) else EXIT_USAGE
