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
``pysandbox mcp`` serves the Model Context Protocol (over stdio, or streamable HTTP with
``--http``) with tools that run Python in sandboxes and sessions, for agents.
``pysandbox notebook FILE.ipynb`` runs a notebook's code cells in one session, each under
limits of its own, and reports each cell (``--json``: one JSON object).
``pysandbox selftest`` and ``pysandbox demo`` run the self-test and the reference demo;
bare ``python -m pysandbox`` is the demo, and ``--selftest`` is ``selftest``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import types
from collections.abc import Callable, Iterator, Sequence

from .._model.errors import SandboxError
from .._version import __version__
from .cli_run import add_option, add_run_options, python_command, run_command
from .run_args import PYTHON_OPTIONS, parse_plain
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

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    import signal as _signal
    from typing import NoReturn

    from .options import Usage

    _Commands = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    import _signal  # what signal wraps, without the enums it builds at import

__all__ = [
    "build_parser",
    "command_parser",
    "console_main",
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
    import argparse  # see _top_parser

    return commands.add_parser(
        name,
        help=summary,
        description=description or summary,
        epilog=EXIT_STATUS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _add_run(commands: _Commands) -> argparse.ArgumentParser:
    """``run``'s sub-parser, added to ``commands``."""
    import argparse  # see _top_parser

    parser = _add_command(
        commands,
        "run",
        "run a program in a sandbox",
        "Run PROGRAM in a fresh sandbox; PROGRAM is an absolute path inside the sandbox or "
        "a name on its PATH (/usr/local/bin:/usr/bin:/bin).",
    )
    add_run_options(parser)
    parser.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS...]")
    parser.set_defaults(handler=run_command, parser=parser)
    return parser


def _add_python(commands: _Commands) -> argparse.ArgumentParser:
    """``python``'s sub-parser, added to ``commands``."""
    import argparse  # see _top_parser

    parser = _add_command(
        commands,
        "python",
        "run Python code with this interpreter in a sandbox",
        "Run FILE.py (a host file; '-': our stdin) or CODE with this Python, as "
        "python -u /sandbox/main.py ARGS inside a fresh sandbox.",
    )
    add_run_options(parser)
    for option in PYTHON_OPTIONS:
        add_option(parser, option)
    parser.add_argument("argv", nargs=argparse.REMAINDER, metavar="FILE.py [ARGS...]")
    parser.set_defaults(handler=python_command, parser=parser)
    return parser


def _add_batch(commands: _Commands) -> argparse.ArgumentParser:
    """``batch``'s sub-parser, added to ``commands``."""
    # Imported here: the runner and its outcome records are for batches only.
    from .cli_batch import add_batch_options, batch_command

    parser = _add_command(
        commands,
        "batch",
        "run one sandbox per line of a JSON-lines file, resumable",
        "Run each job of JOBS.jsonl (one JSON object per line) in its own sandbox and\n"
        "append its outcome (the job's id and Result.to_dict(), or an error) to\n"
        "RESULTS.jsonl as one line; rerun the same command to resume an interrupted\n"
        "batch.  The limit options apply to the jobs that give no limits of their own.",
    )
    add_batch_options(parser)
    parser.set_defaults(handler=batch_command, parser=parser)
    return parser


def _add_mcp(commands: _Commands) -> argparse.ArgumentParser:
    """``mcp``'s sub-parser, added to ``commands``."""
    from .cli_mcp import add_mcp_options, mcp_command

    parser = _add_command(
        commands,
        "mcp",
        "serve the Model Context Protocol: tools that run Python in sandboxes, for agents",
        "Serve the Model Context Protocol over stdio (or streamable HTTP with --http) with\n"
        "tools that run Python in fresh sandboxes and in live sessions (docs/mcp.rst).\n"
        "The limit options are the most a tool call may ask for, and its defaults.\n"
        "Needs Python 3.10+ and the MCP SDK: pip install 'pysandbox[mcp]'.",
    )
    add_mcp_options(parser)
    parser.set_defaults(handler=mcp_command, parser=parser)
    return parser


def _add_notebook(commands: _Commands) -> argparse.ArgumentParser:
    """``notebook``'s sub-parser, added to ``commands``."""
    from .cli_notebook import add_notebook_options, notebook_command

    parser = _add_command(
        commands,
        "notebook",
        "run a Jupyter notebook's code cells in one session, each under its own limits",
        "Run the code cells of FILE.ipynb in order in one session (docs/graders.rst,\n"
        "Graded notebooks): a cell that a limit ends is rolled back and the next runs in\n"
        "the state from before it; a cell that raises is reported and the run goes on.\n"
        "The limit options are the session's; --cell-wall-time and --cell-cpu-time each\n"
        "cell's (default --wall-time and --cpu-time).",
    )
    add_notebook_options(parser)
    parser.set_defaults(handler=notebook_command, parser=parser)
    return parser


def _add_selftest(commands: _Commands) -> argparse.ArgumentParser:
    """``selftest``'s sub-parser, added to ``commands``."""
    parser = _add_command(
        commands, "selftest", "attack a sandbox on this host and report which protections hold"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=_selftest_command, parser=parser)
    return parser


def _add_demo(commands: _Commands) -> argparse.ArgumentParser:
    """``demo``'s sub-parser, added to ``commands``."""
    parser = _add_command(commands, "demo", "run the reference implementation's demo")
    parser.set_defaults(handler=_demo_command, parser=parser, json=False)
    return parser


#: Each command and what adds its sub-parser, in the order ``--help`` lists them.
_COMMANDS: dict[str, Callable[[_Commands], argparse.ArgumentParser]] = {
    "run": _add_run,
    "python": _add_python,
    "batch": _add_batch,
    "mcp": _add_mcp,
    "notebook": _add_notebook,
    "selftest": _add_selftest,
    "demo": _add_demo,
}


def _top_parser() -> tuple[argparse.ArgumentParser, _Commands]:
    """The parser of ``pysandbox`` itself, and where its commands' sub-parsers go."""
    import argparse  # not for the command lines that parse_plain takes

    parser = argparse.ArgumentParser(
        prog="pysandbox",
        description="Run untrusted programs under bubblewrap with hard limits.  "
        "Without a command: the reference demo.",
        epilog=EXIT_STATUS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"pysandbox {__version__}")
    return parser, parser.add_subparsers(dest="command", metavar="COMMAND")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of the command line: with ``command`` one of the commands, a parser
    that knows only that one (what it parses, it parses as the whole one would: the
    command must come first); otherwise one sub-parser per command.

    Each sub-parser's defaults carry its handler (``handler``) and itself (``parser``),
    so errors after parsing are usage errors of the right command.
    """
    parser, commands = _top_parser()
    for name in [command] if command in _COMMANDS else list(_COMMANDS):
        _COMMANDS[name](commands)
    return parser


def command_parser(command: str) -> argparse.ArgumentParser:
    """The sub-parser of ``command`` (one of the commands), as ``build_parser`` makes it."""
    return _COMMANDS[command](_top_parser()[1])


class _ParserOnDemand:
    """Stands for a command's sub-parser when ``parse_plain`` parsed the line: a usage
    error makes argparse's parser of the command then, and is its error (the same
    message and status as had argparse parsed the line)."""

    def __init__(self, command: str) -> None:
        self._command = command

    def error(self, message: str) -> NoReturn:
        command_parser(self._command).error(message)


#: The handlers of the commands ``parse_plain`` parses.
_PLAIN_HANDLERS: dict[str, Callable[[Usage, argparse.Namespace], int]] = {
    "run": run_command,
    "python": python_command,
}


def _parse(argv: list[str]) -> tuple[Usage, argparse.Namespace]:
    """The parser (or its stand-in) of ``argv``'s command and the options parsed."""
    plain = parse_plain(argv)
    if plain is not None:
        command = str(plain["command"])
        # A namespace as argparse's would be, without argparse (nor typing's cast).
        quick: argparse.Namespace = types.SimpleNamespace(  # type: ignore[assignment]
            **plain, handler=_PLAIN_HANDLERS[command]
        )
        return _ParserOnDemand(command), quick
    parser = build_parser(argv[0])
    options = parser.parse_args(argv)
    if options.command is None:
        parser.error("choose a command: run, python, batch, mcp, notebook, selftest or demo")
    return options.parser, options


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
    previous = _signal.getsignal(_signal.SIGTERM)
    if previous == _signal.SIG_IGN:
        yield
        return
    _signal.signal(_signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        _signal.signal(_signal.SIGTERM, previous)


def _dispatch(argv: list[str]) -> int:
    """Parse ``argv`` and run its command; errors that leave no result become statuses."""
    options: argparse.Namespace | None = None
    try:
        if not argv:
            return _demo()
        if argv[0] == "--selftest":
            argv = ["selftest", *argv[1:]]
        parser, options = _parse(argv)
        handler: Callable[[Usage, argparse.Namespace], int] = options.handler
        return handler(parser, options)
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


def console_main() -> NoReturn:
    """The console script and ``python -m pysandbox``: ``main()``, then the exit.

    The exit skips the interpreter's teardown of every loaded module, several
    milliseconds that a grader shelling out once per test would pay on every
    ``pysandbox run``: the ``atexit`` handlers run and the standard streams are flushed
    first, as at a normal exit, then the process ends with ``main()``'s status.  Daemon
    threads are left as the interpreter's exit leaves them (the cgroup reaper's is one:
    its ``atexit`` handler finishes its jobs).  While another thread still runs, or when
    a flush fails, the exit is the interpreter's own (which joins the threads, and
    reports the failed flush with status 120)."""
    status = main()
    main_thread = threading.main_thread()
    if any(not thread.daemon for thread in threading.enumerate() if thread is not main_thread):
        sys.exit(status)
    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        sys.exit(status)
    os._exit(status)
