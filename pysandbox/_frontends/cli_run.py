# SPDX-License-Identifier: MIT
"""``pysandbox run`` and ``pysandbox python``: their options, the inputs, the program's output
passed through, the output files and the verdict."""

from __future__ import annotations

import codecs
import os
import stat
import sys
from collections.abc import Callable, Sequence

from .._model.escape import escape_controls
from .._model.file import File
from .._model.limits import Limits
from .._model.record import record
from .._model.verdict import LIMIT_STATUSES, describe
from .options import add_limit_options, limits_from, pairs
from .run_args import FLAG, MANY, RUN_OPTIONS, RunOption
from .terminal import (
    EXIT_LIMIT,
    EXIT_SANDBOX_ERROR,
    EXIT_SIGNAL_BASE,
    ReaderGone,
    on_terminal,
    say,
)

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import TextIO

    from .._model.result import Result
    from .options import Usage
    from .output_dir import OutputDir

__all__ = [
    "add_option",
    "add_run_options",
    "exit_status",
    "input_files",
    "python_command",
    "run_command",
]


class _Passthrough:
    """Writes the program's output bytes to our stdout and stderr as they arrive (each
    chunk flushed at once), and knows whether the last byte written ended a line (so the
    verdict starts on a line of its own).

    To a pipe or a file the bytes go as they are.  To a terminal they are decoded as
    UTF-8 (invalid bytes as ``\\xNN``) and every control character but newline and tab
    is written as a visible escape (``_escape.escape_controls``): the program cannot
    move the cursor, clear, conceal or set attributes, so it cannot hide or fake our
    verdict line."""

    def __init__(self) -> None:
        self.ends_line = True
        self._decoders = {
            name: codecs.getincrementaldecoder("utf-8")("backslashreplace")
            for name in ("stdout", "stderr")
            if on_terminal(getattr(sys, name))
        }

    def _write(self, name: str, chunk: bytes, final: bool = False) -> None:
        stream: TextIO = getattr(sys, name)
        decoder = self._decoders.get(name)
        if decoder is not None:
            text = escape_controls(decoder.decode(chunk, final))
            chunk = text.encode(stream.encoding or "utf-8", "backslashreplace")
        if chunk:
            try:
                stream.flush()
                stream.buffer.write(chunk)
                stream.buffer.flush()
            except BrokenPipeError:
                raise ReaderGone(stream.fileno()) from None
            self.ends_line = chunk.endswith(b"\n")

    def stdout(self, chunk: bytes) -> None:
        """Write ``chunk`` of the program's stdout to ours."""
        self._write("stdout", chunk)

    def stderr(self, chunk: bytes) -> None:
        """Write ``chunk`` of the program's stderr to ours."""
        self._write("stderr", chunk)

    def finish(self) -> None:
        """Write what a terminal's decoder still holds (a character cut at the end)."""
        for name in self._decoders:
            self._write(name, b"", final=True)


@record
class _Inputs:
    """What the options shared by ``run`` and ``python`` ask for, read and checked."""

    limits: Limits
    stdin: bytes | None
    files: dict[str, File]
    env: dict[str, str]
    readable: list[str]
    #: ``--files-include`` and ``--files-exclude``, checked; None when not given.
    files_include: list[str] | None
    files_exclude: list[str] | None
    #: Where the program's output goes as it arrives; None with ``--json``.
    passthrough: _Passthrough | None
    #: ``--output-dir``, created or checked empty, held open; None without it.
    output_dir: OutputDir | None

    @property
    def on_stdout(self) -> Callable[[bytes], None] | None:
        """``run``'s ``on_stdout``: our stdout, live, unless the output goes into JSON."""
        return None if self.passthrough is None else self.passthrough.stdout

    @property
    def on_stderr(self) -> Callable[[bytes], None] | None:
        """``run``'s ``on_stderr``: our stderr, live, unless the output goes into JSON."""
        return None if self.passthrough is None else self.passthrough.stderr


def exit_status(result: Result) -> int:
    """The exit status that mirrors ``result``: ``EXIT_LIMIT`` when a limit ended it,
    ``EXIT_SIGNAL_BASE + N`` when signal N killed it, else the program's own code."""
    if result.status in LIMIT_STATUSES:
        return EXIT_LIMIT
    if result.signal is not None:
        return EXIT_SIGNAL_BASE + result.signal
    assert result.returncode is not None, result
    return result.returncode


def _open(parser: Usage, option: str, path: str) -> File:
    """Host file ``path`` (``-``: our stdin) as a ``File`` that is executable when its
    owner may execute it (as the notebook's ``--files``); a usage error when unreadable."""
    if path == "-":
        return File(sys.stdin.buffer.read())
    try:
        with open(path, "rb") as stream:
            mode = os.fstat(stream.fileno()).st_mode
            return File(stream.read(), executable=bool(mode & stat.S_IXUSR))
    except OSError as exc:
        parser.error(f"argument {option}: cannot read {path}: {exc.strerror or exc}")


def _read(parser: Usage, option: str, path: str) -> bytes:
    """The bytes of host file ``path`` (``-``: our stdin); a usage error if unreadable."""
    return _open(parser, option, path).content


def input_files(parser: Usage, specs: Sequence[str]) -> dict[str, File]:
    """``--file NAME=PATH`` (or ``--file PATH``: its base name) as name to ``File``,
    with the host file's executable bit."""
    files: dict[str, File] = {}
    for spec in specs:
        name, equals, path = spec.partition("=")
        if not equals:
            name, path = os.path.basename(spec), spec
        if not name or not path:
            parser.error(f"argument --file: expected NAME=PATH or a file's PATH, got {spec!r}")
        if name in files:
            parser.error(f"argument --file: {name!r} is given twice")
        files[name] = _open(parser, "--file", path)
    return files


def _one_reader_of_stdin(parser: Usage, options: argparse.Namespace) -> None:
    """A usage error when more than one option would read our stdin (``-``): the first
    would take it all."""
    readers = ["--stdin"] if options.stdin == "-" else []
    readers += ["--file"] * sum(spec == "-" or spec.endswith("=-") for spec in options.files)
    program = _program(options)
    if options.command == "python" and options.code is None and program[:1] == ["-"]:
        readers.append("FILE.py")
    if len(readers) > 1:
        parser.error(f"only one of {', '.join(readers)} can read our stdin ('-')")


def _inputs(parser: Usage, options: argparse.Namespace) -> _Inputs:
    """Read and check what the shared options ask for, then make the output directory
    ready; each problem is a usage error, before anything runs."""
    inputs = _Inputs(
        limits=limits_from(options),
        stdin=None if options.stdin is None else _read(parser, "--stdin", options.stdin),
        files=input_files(parser, options.files),
        env=pairs(parser, "--env", options.env),
        readable=[os.path.abspath(path) for path in options.readable],
        files_include=_patterns(parser, "--files-include", options.files_include),
        files_exclude=_patterns(parser, "--files-exclude", options.files_exclude),
        passthrough=None if options.json else _Passthrough(),
        output_dir=_output_dir(parser, options.output_dir),
    )
    return inputs


def _patterns(parser: Usage, option: str, given: list[str]) -> list[str] | None:
    """``--files-include`` or ``--files-exclude``'s patterns, checked (a usage error
    naming the option otherwise); None when not given."""
    if not given:
        return None
    from .._model.file_patterns import check_patterns  # only with a pattern

    try:
        check_patterns(given, option)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    return given


def _output_dir(parser: Usage, path: str | None) -> OutputDir | None:
    """``--output-dir`` made ready (created, or checked empty) and open; a usage error
    naming it otherwise."""
    if path is None:
        return None
    from .output_dir import OutputDirError, prepare  # only with --output-dir

    try:
        return prepare(path)
    except OutputDirError as exc:
        parser.error(f"argument --output-dir: {exc}")


def _program(options: argparse.Namespace) -> list[str]:
    """What follows the options, without the ``--`` that may separate them."""
    argv: list[str] = options.argv
    return argv[1:] if argv[:1] == ["--"] else argv


def _write_output(result: Result, inputs: _Inputs, options: argparse.Namespace) -> list[str]:
    """Write the output files into ``--output-dir``; our lines about what was refused or
    failed (empty when every file was written as it was)."""
    from .output_dir import OutputDirError, write_files

    assert inputs.output_dir is not None
    lines = []
    with inputs.output_dir as directory:
        try:
            written = write_files(
                directory,
                result.files,
                result.executables,
                dotfiles=options.dotfiles,
                keep_modes=options.keep_modes,
            )
        except OutputDirError as exc:
            return [f"pysandbox: error: {exc}"]
    for name, reason in written.refused:
        lines.append(f"pysandbox: error: refused the output file {name!r}: {reason}")
    for name in written.modes_dropped:
        lines.append(
            f"pysandbox: wrote {name!r} without its executable bit (--keep-modes keeps it)"
        )
    return lines


def _report(result: Result, inputs: _Inputs, options: argparse.Namespace) -> int:
    """Write the output files, then the JSON object or the verdict line (the output has
    passed through already); return the exit status: ``EXIT_SANDBOX_ERROR`` when an
    output file was refused or could not be written."""
    status = exit_status(result)
    lines = [] if inputs.output_dir is None else _write_output(result, inputs, options)
    if any(line.startswith("pysandbox: error: ") for line in lines):
        status = EXIT_SANDBOX_ERROR
    if inputs.passthrough is not None:
        inputs.passthrough.finish()
        if not options.quiet:
            lines.append(f"pysandbox: {describe(result, inputs.limits)}")
        if result.displays and not options.quiet:
            kinds = ", ".join(next(iter(bundle)) for bundle in result.displays)
            lines.append(f"pysandbox: {len(result.displays)} displays ({kinds}): see --json")
        if lines and not inputs.passthrough.ends_line:
            sys.stderr.write("\n")  # our lines start lines of their own
    for line in lines:
        say(line)
    if inputs.passthrough is None:
        import json  # only for --json

        print(json.dumps(result.to_dict()))
    return status


def _launch(
    parser: Usage,
    options: argparse.Namespace,
    start: Callable[[_Inputs], Result],
) -> int:
    """Run what ``start`` starts with the inputs the options ask for, and report it."""
    inputs = _inputs(parser, options)
    try:
        result = start(inputs)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    return _report(result, inputs, options)


def run_command(parser: Usage, options: argparse.Namespace) -> int:
    argv = _program(options)
    if not argv:
        parser.error("no program given: pysandbox run [options] -- PROGRAM [ARGS...]")
    _one_reader_of_stdin(parser, options)

    def start(inputs: _Inputs) -> Result:
        from .._api.run import run  # the launch and the C core: not for --help

        return run(
            argv,
            stdin=inputs.stdin,
            limits=inputs.limits,
            files=inputs.files,
            readable=inputs.readable,
            env=inputs.env,
            on_stdout=inputs.on_stdout,
            on_stderr=inputs.on_stderr,
            files_include=inputs.files_include,
            files_exclude=inputs.files_exclude,
        )

    return _launch(parser, options, start)


def _python_code(parser: Usage, options: argparse.Namespace) -> tuple[str, list[str]]:
    """The code to run (``-c CODE``, or a host file) and its arguments."""
    argv = _program(options)
    if options.code is not None:
        return options.code, argv
    if not argv:
        parser.error("no code given: pysandbox python [options] FILE.py | -c CODE [ARGS...]")
    source = _read(parser, "FILE.py", argv[0])
    try:
        return source.decode("utf-8"), argv[1:]
    except UnicodeDecodeError:
        parser.error(f"{argv[0]} is not UTF-8 text")


def python_command(parser: Usage, options: argparse.Namespace) -> int:
    _one_reader_of_stdin(parser, options)
    code, args = _python_code(parser, options)

    def start(inputs: _Inputs) -> Result:
        from .._api.run import run_python  # the launch and the C core: not for --help

        return run_python(
            code,
            args=args,
            stdin=inputs.stdin,
            limits=inputs.limits,
            files=inputs.files,
            readable=inputs.readable,
            env=inputs.env,
            on_stdout=inputs.on_stdout,
            on_stderr=inputs.on_stderr,
            files_include=inputs.files_include,
            files_exclude=inputs.files_exclude,
            displays=options.capture_displays,
        )

    return _launch(parser, options, start)


def add_run_options(command: argparse.ArgumentParser) -> None:
    """The options ``run`` and ``python`` share: limits, inputs, outputs, environment
    (``RUN_OPTIONS``)."""
    add_limit_options(command)
    io = command.add_argument_group("input and output")
    for option in RUN_OPTIONS:
        add_option(io, option)


def add_option(group: argparse._ArgumentGroup | argparse.ArgumentParser, option: RunOption) -> None:
    """Add ``option`` of ``run_args`` to argparse's ``group``."""
    shown = option.help.format(sandbox_error=EXIT_SANDBOX_ERROR)
    if option.kind == FLAG:
        group.add_argument(*option.flags, dest=option.dest, action="store_true", help=shown)
    elif option.kind == MANY:
        group.add_argument(
            *option.flags,
            dest=option.dest,
            action="append",
            default=[],
            metavar=option.metavar,
            help=shown,
        )
    else:
        group.add_argument(*option.flags, dest=option.dest, metavar=option.metavar, help=shown)
