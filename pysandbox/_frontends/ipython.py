# SPDX-License-Identifier: MIT
"""The IPython extension: ``%load_ext pysandbox`` registers the ``%%sandbox`` cell magic.

The magic runs the cell's source with ``run_python`` (so with the notebook's own
interpreter), writes the program's stdout and stderr to the kernel's ``sys.stdout`` and
``sys.stderr`` as they arrive (ipykernel shows them in the cell's output), then displays
a one-line verdict.  An interrupt of the kernel raises ``KeyboardInterrupt`` inside the
call, which kills and reaps the sandbox and propagates: the kernel lives on.

``%%sandbox --session NAME`` runs the cell in a live ``Session`` kept between cells
instead, and ``%sandbox_close NAME`` ends one (``session_magic.py``).

IPython is imported only when IPython calls in here, so ``import pysandbox`` does not
need it (it is not a dependency).
"""

from __future__ import annotations

import argparse
import atexit
import keyword
import os
import shlex
import stat
import sys
from collections.abc import Sequence
from typing import NoReturn

from .._api.run import run_python
from .._model.display import verdict_html, verdict_text
from .._model.file import File
from .._model.result import Result
from .ipython_shell import MAGIC_NAME, LiveStream, Shell, usage
from .options import add_limit_options, limits_from
from .session_magic import (
    CLOSE_MAGIC,
    SessionBook,
    add_session_options,
    close_sessions,
    refuse_session_options,
    run_in_session,
)

__all__ = ["load_ipython_extension", "unload_ipython_extension"]

#: Each shell's sessions (``%%sandbox --session``), by the shell's ``id``: loading the
#: extension again keeps them, unloading it ends them.
_BOOKS: dict[int, SessionBook] = {}


class _HelpShown(Exception):
    """``--help`` printed the usage: the magic ends without running anything."""


class _MagicParser(argparse.ArgumentParser):
    """argparse that reports a bad option as IPython's ``UsageError`` (shown as one
    message, without a traceback) instead of exiting the kernel."""

    def error(self, message: str) -> NoReturn:
        """Raise ``UsageError`` with the usage line and ``message``."""
        from IPython.core.error import UsageError

        raise UsageError(f"{self.format_usage()}{self.prog}: error: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        """End the magic after ``--help`` (``error`` handles every failure)."""
        if message:
            sys.stderr.write(message)
        raise _HelpShown


def _parser() -> _MagicParser:
    """The magic's options: the command line's limit options, then its own."""
    parser = _MagicParser(
        prog=f"%%{MAGIC_NAME}",
        description="Run the cell's Python code in a sandbox, with its output live.",
    )
    add_limit_options(parser)
    parser.add_argument(
        "--files",
        nargs="+",
        action="extend",
        default=[],
        metavar="PATH",
        help="host files (relative to the current directory) copied into the sandbox's "
        "working directory under their base name, or NAME=PATH to choose the name; "
        "an executable file stays executable",
    )
    parser.add_argument(
        "--readable",
        nargs="+",
        action="extend",
        default=[],
        metavar="PATH",
        help="host paths the code may read, bound read-only at the same absolute path",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable of the code (repeat the option for more)",
    )
    for flag, what in (
        ("--files-include", "return only the files that PATTERN matches"),
        ("--files-exclude", "return no file that PATTERN matches, and walk no directory it does"),
    ):
        parser.add_argument(
            flag,
            action="append",
            default=[],
            metavar="PATTERN",
            help=f"{what} (a glob on the path relative to /sandbox, '*' matching '/' too; "
            "a directory matched takes what is below it); repeatable; with --session, set "
            "when the session starts",
        )
    parser.add_argument(
        "--result",
        metavar="NAME",
        help="store the Result (a CellResult with --session) in the notebook's variable NAME",
    )
    add_session_options(parser)
    return parser


def _read_files(specs: Sequence[str]) -> dict[str, File]:
    """The ``--files`` by name in the sandbox, executable when the host file is (its
    owner-execute bit); ``UsageError`` for a file that cannot be read or a name given
    twice."""
    files: dict[str, File] = {}
    for spec in specs:
        name, separator, path = spec.partition("=")
        if not separator:
            name, path = os.path.basename(spec), spec
        if not name or not path:
            usage(f"--files: expected PATH or NAME=PATH, got {spec!r}")
        if name in files:
            usage(f"--files: two files are named {name!r} in the sandbox")
        try:
            with open(path, "rb") as file:
                executable = bool(os.fstat(file.fileno()).st_mode & stat.S_IXUSR)
                files[name] = File(file.read(), executable=executable)
        except OSError as exc:
            usage(f"--files: cannot read {path!r}: {exc.strerror or exc}")
    return files


def _environment(pairs: Sequence[str]) -> dict[str, str]:
    """The ``--env`` variables; ``UsageError`` for one without ``=`` or a name."""
    env: dict[str, str] = {}
    for pair in pairs:
        name, separator, value = pair.partition("=")
        if not separator or not name:
            usage(f"--env: expected NAME=VALUE, got {pair!r}")
        env[name] = value
    return env


def _run_cell(shell: Shell, book: SessionBook, line: str, cell: str) -> None:
    """Run ``cell`` in a sandbox with the options of ``line`` (see ``%%sandbox --help``):
    the output live, then the verdict; ``--result NAME`` stores the ``Result`` in the
    user namespace.  With ``--session NAME``, run it in that session of ``book``
    instead.  Bad options raise IPython's ``UsageError``."""

    try:
        options = _parser().parse_args(shlex.split(line))
    except _HelpShown:
        return
    except ValueError as exc:  # shlex: an unclosed quote
        usage(str(exc))
    if options.result is not None and (
        not options.result.isidentifier() or keyword.iskeyword(options.result)
    ):
        usage(f"--result: not a Python variable name: {options.result!r}")
    files = _read_files(options.files)
    env = _environment(options.env)
    readable = [os.path.abspath(path) for path in options.readable]
    if options.session is not None:
        run_in_session(shell, book, options, cell, files, env, readable)
        return
    refuse_session_options(options)
    stdout, stderr = LiveStream("stdout"), LiveStream("stderr")
    limits = limits_from(options)
    try:
        result: Result = run_python(
            cell,
            limits=limits,
            files=files,
            readable=readable,
            env=env,
            on_stdout=stdout,
            on_stderr=stderr,
            files_include=options.files_include or None,
            files_exclude=options.files_exclude or None,
        )
    except ValueError as exc:
        if stdout.called or stderr.called:
            raise
        usage(str(exc))  # run_python refused an argument before starting anything
    finally:
        stdout.close()
        stderr.close()
    if options.result is not None:
        shell.user_ns[options.result] = result
    shell.display_pub.publish(
        data={
            "text/plain": verdict_text(result, limits),
            "text/html": verdict_html(result, limits),
        }
    )


def load_ipython_extension(ipython: Shell) -> None:
    """Register the ``%%sandbox`` cell magic and the ``%sandbox_close`` line magic: what
    ``%load_ext pysandbox`` calls.  The shell's sessions end when the extension is
    unloaded or the interpreter exits."""
    if not callable(getattr(ipython, "register_magic_function", None)):
        raise TypeError(f"ipython must be an IPython shell, not {type(ipython).__name__}")
    book = _BOOKS.get(id(ipython))
    if book is None:
        book = _BOOKS[id(ipython)] = SessionBook()
        atexit.register(book.close_all)

    def sandbox(line: str, cell: str) -> None:
        _run_cell(ipython, book, line, cell)

    def sandbox_close(line: str) -> None:
        """%sandbox_close [NAME ...]: end the sessions named (all without a name), their
        sandboxes killed and reaped, and forget them."""
        close_sessions(book, line)

    sandbox.__doc__ = _parser().format_help()
    ipython.register_magic_function(sandbox, magic_kind="cell", magic_name=MAGIC_NAME)
    ipython.register_magic_function(sandbox_close, magic_kind="line", magic_name=CLOSE_MAGIC)


def unload_ipython_extension(ipython: Shell) -> None:
    """End the shell's sessions and remove the magics: what ``%unload_ext pysandbox``
    calls."""
    book = _BOOKS.pop(id(ipython), None)
    if book is not None:
        atexit.unregister(book.close_all)
        book.close_all()
    magics = ipython.magics_manager.magics
    magics.get("cell", {}).pop(MAGIC_NAME, None)
    magics.get("line", {}).pop(CLOSE_MAGIC, None)
