# SPDX-License-Identifier: MIT
"""The IPython extension: ``%load_ext pysandbox`` registers the ``%%sandbox`` cell magic.

The magic runs the cell's source with ``run_python`` (so with the notebook's own
interpreter), writes the program's stdout and stderr to the kernel's ``sys.stdout`` and
``sys.stderr`` as they arrive (ipykernel shows them in the cell's output), then displays
a one-line verdict.  An interrupt of the kernel raises ``KeyboardInterrupt`` inside the
call, which kills and reaps the sandbox and propagates: the kernel lives on.

IPython is imported only when IPython calls in here, so ``import pysandbox`` does not
need it (it is not a dependency).
"""

from __future__ import annotations

import argparse
import codecs
import keyword
import os
import shlex
import stat
import sys
from collections.abc import Callable, MutableMapping, Sequence
from typing import NoReturn, Protocol

from .._api.run import run_python
from .._model.display import verdict_html, verdict_text
from .._model.escape import escape_controls
from .._model.file import File
from .._model.result import Result
from .options import add_limit_options, limits_from

__all__ = ["Shell", "load_ipython_extension"]

MAGIC_NAME = "sandbox"


class _DisplayPublisher(Protocol):
    def publish(self, data: dict[str, str]) -> None:
        """Show ``data`` (MIME type to content) in the cell's output."""


class Shell(Protocol):
    """What the extension uses of IPython's ``InteractiveShell`` (typed here: IPython
    is not imported to type-check pysandbox)."""

    user_ns: MutableMapping[str, object]
    display_pub: _DisplayPublisher

    def register_magic_function(
        self, func: Callable[[str, str], None], magic_kind: str, magic_name: str
    ) -> None:
        """Make ``func`` the magic ``magic_name`` of kind ``magic_kind``."""


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
    parser.add_argument(
        "--result",
        metavar="NAME",
        help="store the Result in the notebook's variable NAME",
    )
    return parser


def _usage(message: str) -> NoReturn:
    from IPython.core.error import UsageError

    raise UsageError(f"%%{MAGIC_NAME}: {message}")


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
            _usage(f"--files: expected PATH or NAME=PATH, got {spec!r}")
        if name in files:
            _usage(f"--files: two files are named {name!r} in the sandbox")
        try:
            with open(path, "rb") as file:
                executable = bool(os.fstat(file.fileno()).st_mode & stat.S_IXUSR)
                files[name] = File(file.read(), executable=executable)
        except OSError as exc:
            _usage(f"--files: cannot read {path!r}: {exc.strerror or exc}")
    return files


def _environment(pairs: Sequence[str]) -> dict[str, str]:
    """The ``--env`` variables; ``UsageError`` for one without ``=`` or a name."""
    env: dict[str, str] = {}
    for pair in pairs:
        name, separator, value = pair.partition("=")
        if not separator or not name:
            _usage(f"--env: expected NAME=VALUE, got {pair!r}")
        env[name] = value
    return env


class _LiveStream:
    """Writes each chunk of the program's output to ``sys.<name>`` as it arrives,
    decoded incrementally (a character split between chunks stays whole; invalid UTF-8
    becomes U+FFFD).  The stream is looked up at each write: the kernel may swap it.
    On a terminal (a terminal IPython) the control characters are escaped, as the
    command line does, so the output cannot hide or fake the verdict after it."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        #: The program ran and wrote: an error now is not about the options.
        self.called = False

    def __call__(self, chunk: bytes) -> None:
        self.called = True
        self._write(self._decoder.decode(chunk))

    def close(self) -> None:
        """Write what the decoder still holds (an incomplete character at the end)."""
        self._write(self._decoder.decode(b"", final=True))

    def _write(self, text: str) -> None:
        if text:
            stream = getattr(sys, self._name)
            if callable(getattr(stream, "isatty", None)) and stream.isatty():
                text = escape_controls(text)
            stream.write(text)
            stream.flush()


def _run_cell(shell: Shell, line: str, cell: str) -> None:
    """Run ``cell`` in a sandbox with the options of ``line`` (see ``%%sandbox --help``):
    the output live, then the verdict; ``--result NAME`` stores the ``Result`` in the
    user namespace.  Bad options raise IPython's ``UsageError``."""
    try:
        options = _parser().parse_args(shlex.split(line))
    except _HelpShown:
        return
    except ValueError as exc:  # shlex: an unclosed quote
        _usage(str(exc))
    if options.result is not None and (
        not options.result.isidentifier() or keyword.iskeyword(options.result)
    ):
        _usage(f"--result: not a Python variable name: {options.result!r}")
    files = _read_files(options.files)
    env = _environment(options.env)
    readable = [os.path.abspath(path) for path in options.readable]
    stdout, stderr = _LiveStream("stdout"), _LiveStream("stderr")
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
        )
    except ValueError as exc:
        if stdout.called or stderr.called:
            raise
        _usage(str(exc))  # run_python refused an argument before starting anything
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
    """Register the ``%%sandbox`` cell magic: what ``%load_ext pysandbox`` calls."""
    if not callable(getattr(ipython, "register_magic_function", None)):
        raise TypeError(f"ipython must be an IPython shell, not {type(ipython).__name__}")

    def sandbox(line: str, cell: str) -> None:
        _run_cell(ipython, line, cell)

    sandbox.__doc__ = _parser().format_help()
    ipython.register_magic_function(sandbox, magic_kind="cell", magic_name=MAGIC_NAME)
