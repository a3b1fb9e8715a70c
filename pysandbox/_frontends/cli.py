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
import codecs
import contextlib
import dataclasses
import importlib.util
import json
import os
import signal
import stat
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO, Callable, NoReturn, TextIO

from .._api.run import run, run_python
from .._api.selftest import selftest
from .._model.errors import SandboxError
from .._model.escape import escape_controls
from .._model.file import File
from .._model.limits import Limits
from .._model.result import Result
from .._model.units import refuse_long
from .._model.untrusted import bounded_lines
from .._model.verdict import LIMIT_STATUSES, describe
from .._runner.results_file import ResultsFileError
from .._version import __version__
from .demo import demo
from .options import add_limit_options, argparse_type, limits_from
from .output_dir import OutputDir, OutputDirError, prepare, write_files

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_LIMIT",
    "EXIT_READER_GONE",
    "EXIT_SANDBOX_ERROR",
    "EXIT_SELFTEST_FAILED",
    "EXIT_SIGNAL_BASE",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "build_parser",
    "exit_status",
    "main",
]

#: ``selftest``: some protection does not hold on this host.
EXIT_SELFTEST_FAILED = 1
#: Bad options or arguments (argparse's own code): nothing ran.
EXIT_USAGE = 2
#: A limit ended the run (any ``Status`` that is a limit), as ``timeout(1)`` says 124.
EXIT_LIMIT = 124
#: pysandbox itself failed: the sandbox could not start the program (``SandboxError``:
#: no bwrap, no such program...), or an ``--output-dir`` file was refused (a name with
#: a dot part, without ``--dotfiles``) or could not be written; as
#: ``env(1)`` and ``docker run`` say 125.
EXIT_SANDBOX_ERROR = 125
#: The largest ``--max-concurrent`` and ``--warm``: far more than any host runs.
MAX_WHOLE_NUMBER = 1_000_000
#: Seconds ``batch --scheduler`` tries to reach the scheduler before it gives up (125).
SCHEDULER_TIMEOUT = 10.0
#: Added to the number of the signal that killed the program (139 for SIGSEGV).
EXIT_SIGNAL_BASE = 128
#: Ctrl-C (SIGINT) interrupted the command; the sandbox was killed and reaped.
EXIT_INTERRUPTED = EXIT_SIGNAL_BASE + signal.SIGINT
#: SIGTERM (``timeout``, ``kill``, a service manager) ended the command; the sandbox was
#: killed and reaped.
EXIT_TERMINATED = EXIT_SIGNAL_BASE + signal.SIGTERM
#: The reader of our stdout or stderr went away (``pysandbox run ... | head -1``), as a
#: program killed by SIGPIPE; the sandbox was killed and reaped.
EXIT_READER_GONE = EXIT_SIGNAL_BASE + signal.SIGPIPE

EXIT_STATUS_HELP = f"""\
exit status:
  N       the program's own exit status
  128+N   signal N killed the program and no limit explains it (139: SIGSEGV)
  {EXIT_LIMIT}     a limit ended the run: CPU or wall time, memory, output, ...
  {EXIT_SANDBOX_ERROR}     the sandbox could not start the program (no bwrap, no such program...),
          or an --output-dir file was refused (a dot name) or could not be written
  {EXIT_USAGE}       bad options or arguments; nothing ran
  {EXIT_INTERRUPTED}     interrupted (Ctrl-C); the sandbox was killed
  {EXIT_TERMINATED}     terminated (SIGTERM); the sandbox was killed
  {EXIT_READER_GONE}     the reader of our output went away (SIGPIPE); the sandbox was killed
  selftest exits 0 when every protection holds, {EXIT_SELFTEST_FAILED} otherwise.
  batch exits 0 once every job has its line in RESULTS, whatever the verdicts; 130 or 143
  when interrupted (rerun it to resume), 125 when this host (with --scheduler: the
  scheduler, or a worker) cannot run a sandbox or RESULTS cannot be written, 2 for bad
  options or an unusable JOBS or RESULTS.
With --json, stdout holds exactly one JSON object: Result.to_dict() of the run, or
{{"error": MESSAGE, "kind": "sandbox_error" | "interrupted" | "terminated"}} when there
was no result."""


class _ReaderGone(Exception):
    """The reader of our stdout or stderr went away (``pysandbox run ... | head``).

    Raised from an output callback, it unwinds through ``run`` (which kills the sandbox)
    and says which of our descriptors lost its reader.
    """

    def __init__(self, fd: int) -> None:
        super().__init__(fd)
        #: Our descriptor whose reader is gone.
        self.fd = fd


def _on_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal (whatever ``TERM`` says: a program's escapes are
    escaped on any)."""
    try:
        return stream.isatty()
    except ValueError:  # closed
        return False


#: Before and after each of our own lines on a terminal: reset every attribute, then
#: bold, which the program's escaped output can never set.
_OWN_LINE_START = "\x1b[0m\x1b[1m"
_OWN_LINE_END = "\x1b[0m"


def _say(message: str) -> None:
    """Write one of our own lines (``pysandbox: ...``) to stderr; on a terminal after a
    reset and in bold, so no output of the program can conceal it or pass for it (not
    on a ``TERM=dumb`` terminal, which shows escapes as they are)."""
    if _on_terminal(sys.stderr) and os.environ.get("TERM") != "dumb":
        message = f"{_OWN_LINE_START}{message}{_OWN_LINE_END}"
    print(message, file=sys.stderr, flush=True)


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
            if _on_terminal(getattr(sys, name))
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
                raise _ReaderGone(stream.fileno()) from None
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


@dataclasses.dataclass(frozen=True)
class _Inputs:
    """What the options shared by ``run`` and ``python`` ask for, read and checked."""

    limits: Limits
    stdin: bytes | None
    files: dict[str, File]
    env: dict[str, str]
    readable: list[str]
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


def _pairs(parser: argparse.ArgumentParser, option: str, specs: Sequence[str]) -> dict[str, str]:
    """``NAME=VALUE`` strings as a dict; a usage error naming ``option`` otherwise."""
    pairs: dict[str, str] = {}
    for spec in specs:
        name, equals, value = spec.partition("=")
        if not equals or not name:
            parser.error(f"argument {option}: expected NAME=VALUE, got {spec!r}")
        pairs[name] = value
    return pairs


def _open(parser: argparse.ArgumentParser, option: str, path: str) -> File:
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


def _read(parser: argparse.ArgumentParser, option: str, path: str) -> bytes:
    """The bytes of host file ``path`` (``-``: our stdin); a usage error if unreadable."""
    return _open(parser, option, path).content


def _input_files(parser: argparse.ArgumentParser, specs: Sequence[str]) -> dict[str, File]:
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


def _one_reader_of_stdin(parser: argparse.ArgumentParser, options: argparse.Namespace) -> None:
    """A usage error when more than one option would read our stdin (``-``): the first
    would take it all."""
    readers = ["--stdin"] if options.stdin == "-" else []
    readers += ["--file"] * sum(spec == "-" or spec.endswith("=-") for spec in options.files)
    program = _program(options)
    if options.command == "python" and options.code is None and program[:1] == ["-"]:
        readers.append("FILE.py")
    if len(readers) > 1:
        parser.error(f"only one of {', '.join(readers)} can read our stdin ('-')")


def _inputs(parser: argparse.ArgumentParser, options: argparse.Namespace) -> _Inputs:
    """Read and check what the shared options ask for, then make the output directory
    ready; each problem is a usage error, before anything runs."""
    inputs = _Inputs(
        limits=limits_from(options),
        stdin=None if options.stdin is None else _read(parser, "--stdin", options.stdin),
        files=_input_files(parser, options.files),
        env=_pairs(parser, "--env", options.env),
        readable=[os.path.abspath(path) for path in options.readable],
        passthrough=None if options.json else _Passthrough(),
        output_dir=_output_dir(parser, options.output_dir),
    )
    return inputs


def _output_dir(parser: argparse.ArgumentParser, path: str | None) -> OutputDir | None:
    """``--output-dir`` made ready (created, or checked empty) and open; a usage error
    naming it otherwise."""
    if path is None:
        return None
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
        if lines and not inputs.passthrough.ends_line:
            sys.stderr.write("\n")  # our lines start lines of their own
    for line in lines:
        _say(line)
    if inputs.passthrough is None:
        print(json.dumps(result.to_dict()))
    return status


def _launch(
    parser: argparse.ArgumentParser,
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


def _run_command(parser: argparse.ArgumentParser, options: argparse.Namespace) -> int:
    argv = _program(options)
    if not argv:
        parser.error("no program given: pysandbox run [options] -- PROGRAM [ARGS...]")
    _one_reader_of_stdin(parser, options)

    def start(inputs: _Inputs) -> Result:
        return run(
            argv,
            stdin=inputs.stdin,
            limits=inputs.limits,
            files=inputs.files,
            readable=inputs.readable,
            env=inputs.env,
            on_stdout=inputs.on_stdout,
            on_stderr=inputs.on_stderr,
        )

    return _launch(parser, options, start)


def _python_code(
    parser: argparse.ArgumentParser, options: argparse.Namespace
) -> tuple[str, list[str]]:
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


def _python_command(parser: argparse.ArgumentParser, options: argparse.Namespace) -> int:
    _one_reader_of_stdin(parser, options)
    code, args = _python_code(parser, options)

    def start(inputs: _Inputs) -> Result:
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
        )

    return _launch(parser, options, start)


def _selftest_command(parser: argparse.ArgumentParser, options: argparse.Namespace) -> int:
    report = selftest()
    if options.json:
        checks = [dataclasses.asdict(check) for check in report.checks]
        print(json.dumps({"ok": bool(report), "checks": checks}))
    else:
        print(report)
    return 0 if report else EXIT_SELFTEST_FAILED


def _demo_command(parser: argparse.ArgumentParser, options: argparse.Namespace) -> int:
    return demo()


def _whole_number(least: int) -> Callable[[str], int]:
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
    if path == "-" or not os.path.isfile(path):
        return None
    with open(path, "rb") as stream:  # a line of any length costs 64 KiB
        return sum(1 for line in bounded_lines(stream, 1 << 16) if line.strip())


def _batch_command(parser: argparse.ArgumentParser, options: argparse.Namespace) -> int:
    from .._runner.batch import BatchReport, job_lines, open_results, run_batch  # imports asyncio

    if options.progress and importlib.util.find_spec("tqdm") is None:
        parser.error("--progress needs tqdm: pip install pysandbox[progress]")
    env = _pairs(parser, "--env", options.env)
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
    except (KeyboardInterrupt, _Terminated) as stop:
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


def _add_batch_options(command: argparse.ArgumentParser) -> None:
    """``batch``'s arguments: JOBS, --out, the concurrency, order, progress, the
    environment and readable paths of every job, and the limits of a job without any."""
    command.add_argument(
        "jobs",
        metavar="JOBS.jsonl",
        help="one JSON job per line (the README's schema); '-': our stdin",
    )
    command.add_argument(
        "--out",
        required=True,
        metavar="RESULTS.jsonl",
        help="append one JSON outcome per job here; the jobs whose ids it has are skipped",
    )
    command.add_argument(
        "--max-concurrent",
        type=_whole_number(1),
        metavar="N",
        help="the most sandboxes running at once (default: the number of CPUs)",
    )
    command.add_argument(
        "--warm",
        type=_whole_number(0),
        default=0,
        metavar="K",
        help="keep K sandboxes started ahead of the jobs (README: Warm sandboxes), in each "
        "worker process with --scheduler (default: 0, none)",
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


def _add_run_options(command: argparse.ArgumentParser) -> None:
    """The options ``run`` and ``python`` share: limits, inputs, outputs, environment."""
    add_limit_options(command)
    io = command.add_argument_group("input and output")
    io.add_argument(
        "--stdin",
        metavar="FILE",
        help="feed FILE to the program's stdin ('-': ours); default: a closed stdin",
    )
    io.add_argument(
        "--file",
        dest="files",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="copy host file PATH into /sandbox as NAME (PATH alone: its base name); repeatable",
    )
    io.add_argument(
        "--output-dir",
        metavar="DIR",
        help="write the files left in /sandbox into DIR, which must be missing (it is made) "
        "or empty; a name with a part starting with a dot is refused, executable bits are "
        "dropped (see --dotfiles, --keep-modes); a refused file is named on stderr and the "
        f"exit status is {EXIT_SANDBOX_ERROR}",
    )
    io.add_argument(
        "--dotfiles",
        action="store_true",
        help="with --output-dir: also write names with a part starting with a dot",
    )
    io.add_argument(
        "--keep-modes",
        action="store_true",
        help="with --output-dir: keep the executable bit of the files the program made executable",
    )
    io.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (Result.to_dict()) on stdout instead of the output "
        "and the verdict",
    )
    io.add_argument("-q", "--quiet", action="store_true", help="no verdict line on stderr")
    io.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set an environment variable (besides PATH and HOME); repeatable",
    )
    io.add_argument(
        "--readable",
        action="append",
        default=[],
        metavar="PATH",
        help="let the program read host PATH, read-only at the same path; repeatable",
    )


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
    _add_run_options(run_parser)
    run_parser.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS...]")
    run_parser.set_defaults(handler=_run_command, parser=run_parser)
    python_parser = _add_command(
        commands,
        "python",
        "run Python code with this interpreter in a sandbox",
        "Run FILE.py (a host file; '-': our stdin) or CODE with this Python, as "
        "python -u /sandbox/main.py ARGS inside a fresh sandbox.",
    )
    _add_run_options(python_parser)
    python_parser.add_argument("-c", dest="code", metavar="CODE", help="the code to run")
    python_parser.add_argument("argv", nargs=argparse.REMAINDER, metavar="FILE.py [ARGS...]")
    python_parser.set_defaults(handler=_python_command, parser=python_parser)
    batch_parser = _add_command(
        commands,
        "batch",
        "run one sandbox per line of a JSON-lines file, resumable",
        "Run each job of JOBS.jsonl (one JSON object per line) in its own sandbox and\n"
        "append its outcome (the job's id and Result.to_dict(), or an error) to\n"
        "RESULTS.jsonl as one line; rerun the same command to resume an interrupted\n"
        "batch.  The limit options apply to the jobs that give no limits of their own.",
    )
    _add_batch_options(batch_parser)
    batch_parser.set_defaults(handler=_batch_command, parser=batch_parser)
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
    _say(f"pysandbox: {kind.replace('_', ' ')}: {message}")
    if options is not None and getattr(options, "json", False):
        print(json.dumps({"error": message, "kind": kind}))
    return status


class _Terminated(Exception):
    """SIGTERM arrived: raised from the signal handler, so a run in progress kills and
    reaps its sandbox (the C core checks for signals while it waits) and unwinds."""


def _raise_terminated(signum: int, frame: object) -> NoReturn:
    raise _Terminated


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """Make SIGTERM raise ``_Terminated`` for the duration, in the main thread, unless
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
            return demo()
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
    except _Terminated:
        return _fail(options, "terminated", "the sandbox was killed", EXIT_TERMINATED)
    except _ReaderGone as gone:
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
