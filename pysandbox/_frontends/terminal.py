# SPDX-License-Identifier: MIT
"""What the command line says to people: its exit statuses, and its own lines on stderr,
which no output of the program can conceal or pass for."""

from __future__ import annotations

import os
import sys

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _signal
    from typing import TextIO
else:
    import _signal  # what signal wraps, without the enums it builds at import

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_LIMIT",
    "EXIT_READER_GONE",
    "EXIT_SANDBOX_ERROR",
    "EXIT_SELFTEST_FAILED",
    "EXIT_SIGNAL_BASE",
    "EXIT_STATUS_HELP",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "ReaderGone",
    "Terminated",
    "on_terminal",
    "say",
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


#: Added to the number of the signal that killed the program (139 for SIGSEGV).
EXIT_SIGNAL_BASE = 128


#: Ctrl-C (SIGINT) interrupted the command; the sandbox was killed and reaped.
EXIT_INTERRUPTED = EXIT_SIGNAL_BASE + _signal.SIGINT


#: SIGTERM (``timeout``, ``kill``, a service manager) ended the command; the sandbox was
#: killed and reaped.
EXIT_TERMINATED = EXIT_SIGNAL_BASE + _signal.SIGTERM


#: The reader of our stdout or stderr went away (``pysandbox run ... | head -1``), as a
#: program killed by SIGPIPE; the sandbox was killed and reaped.
EXIT_READER_GONE = EXIT_SIGNAL_BASE + _signal.SIGPIPE


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
  notebook exits 0 when every code cell ran and raised nothing, 1 otherwise (a cell
  raised, was rolled back, lost the session or did not run); 2 for bad options or a
  notebook that cannot be read.
  batch exits 0 once every job has its line in RESULTS, whatever the verdicts; 130 or 143
  when interrupted (rerun it to resume), 125 when this host (with --scheduler: the
  scheduler, or a worker) cannot run a sandbox or RESULTS cannot be written, 2 for bad
  options or an unusable JOBS or RESULTS.
With --json, stdout holds exactly one JSON object: Result.to_dict() of the run, or
{{"error": MESSAGE, "kind": "sandbox_error" | "interrupted" | "terminated"}} when there
was no result."""


class ReaderGone(Exception):
    """The reader of our stdout or stderr went away (``pysandbox run ... | head``).

    Raised from an output callback, it unwinds through ``run`` (which kills the sandbox)
    and says which of our descriptors lost its reader.
    """

    def __init__(self, fd: int) -> None:
        super().__init__(fd)
        #: Our descriptor whose reader is gone.
        self.fd = fd


def on_terminal(stream: TextIO) -> bool:
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


def say(message: str) -> None:
    """Write one of our own lines (``pysandbox: ...``) to stderr; on a terminal after a
    reset and in bold, so no output of the program can conceal it or pass for it (not
    on a ``TERM=dumb`` terminal, which shows escapes as they are)."""
    if on_terminal(sys.stderr) and os.environ.get("TERM") != "dumb":
        message = f"{_OWN_LINE_START}{message}{_OWN_LINE_END}"
    print(message, file=sys.stderr, flush=True)


class Terminated(Exception):
    """SIGTERM arrived: raised from the signal handler, so a run in progress kills and
    reaps its sandbox (the C core checks for signals while it waits) and unwinds."""
