# SPDX-License-Identifier: MIT
"""A program run as one call of a session (``run_program``): ``./sum`` compiled by an
earlier call, fed ``stdin``, with the call's limits, and its end as a ``Result``, as
``run`` would give for the same program in a sandbox of its own.

The call spawns the program with ``os.posix_spawnp`` from the interpreter's own ``os``
module (already loaded: a file named ``subprocess.py`` in the working directory cannot
stand in for it), gives it ``stdin`` on a pipe, leaves it the call's stdout and stderr,
and waits: the call's value is the program's exit code (``-N`` for signal ``N``).  The
call's limits cover the program, as every process a call starts; a limit that ends it
rolls the call back, as any call's.  The code runs in a namespace of its own: the
session's variables are untouched, but for ``_``, the call's value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._model.result import Result
from .._model.session_result import CellResult
from .._model.status import Status
from .._model.verdict import LIMIT_STATUSES

if TYPE_CHECKING:
    from .session import Session

__all__ = ["program_result", "run_program"]

#: Runs ``argv`` with ``data`` on its stdin; sets ``returncode``.  127 and 126 are the
#: shell's codes for a program not found and one that cannot be run.  The program gets
#: the default actions of the signals Python ignores (``SIGPIPE``, ``SIGXFSZ``), as a
#: program ``run`` starts does; only it holds the pipe's read end, so one that stops
#: reading ends the write (``EPIPE``: the call ignores ``SIGPIPE`` while it writes).
_SPAWN = """\
import os, signal, sys
sys.stdout.flush()
sys.stderr.flush()
read_end, write_end = os.pipe()
try:
    pid = os.posix_spawnp(
        argv[0], argv, os.environ,
        file_actions=[(os.POSIX_SPAWN_DUP2, read_end, 0), (os.POSIX_SPAWN_CLOSE, write_end)],
        setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
    )
except OSError as error:
    os.close(read_end)
    os.close(write_end)
    os.write(2, f"{argv[0]}: {error.strerror}\\n".encode())
    returncode = 126 if isinstance(error, PermissionError) else 127
else:
    os.close(read_end)
    left = memoryview(data)
    kept = signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        while left:
            left = left[os.write(write_end, left):]
    except BrokenPipeError:
        pass
    finally:
        os.close(write_end)
        signal.signal(signal.SIGPIPE, kept)
    returncode = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
"""
#: The most characters the exit code's ``repr`` may have: ``-64`` to ``255``.
_CODE_WIDTH = 4
#: SIGKILL: how the session's keeper ends a call a limit ended.
_SIGKILL = 9


def run_program(
    session: Session,
    argv: Sequence[str],
    *,
    stdin: bytes = b"",
    wall_time: float | None = None,
    cpu_time: float | None = None,
    stdout: int | None = None,
    stderr: int | None = None,
    truncate_output: bool | None = None,
) -> tuple[Result, CellResult]:
    """Run ``argv`` in ``session`` with ``stdin`` under the call's limits (each None:
    the session's): the program's end as a ``Result``, and the session's call that ran
    it.

    :raises TypeError, ValueError: ``argv`` is not a non-empty sequence of str without
        NUL bytes, or ``stdin`` is not bytes.
    :raises SandboxError: the session has ended.
    """
    if isinstance(argv, (str, bytes)) or not isinstance(argv, Sequence):
        raise TypeError(f"argv must be a sequence of str, not {type(argv).__name__}")
    if not argv:
        raise ValueError("argv must name a program")
    for index, word in enumerate(argv):
        if not isinstance(word, str):
            raise TypeError(f"argv[{index}] must be str, not {type(word).__name__}")
        if "\0" in word:
            raise ValueError(f"argv[{index}] holds a NUL character")
    if not isinstance(stdin, (bytes, bytearray)):
        raise TypeError(f"stdin must be bytes, not {type(stdin).__name__}")
    names = {"argv": list(argv), "data": bytes(stdin)}
    code = f"(lambda names: (exec({_SPAWN!r}, names), names['returncode'])[1])({names!r})"
    cell = session.run(
        code,
        wall_time=wall_time,
        cpu_time=cpu_time,
        stdout=stdout,
        stderr=stderr,
        truncate_output=truncate_output,
    )
    return program_result(cell), cell


def _exit_code(cell: CellResult) -> int | None:
    """The program's exit code, from the call's value; None when it is no such number."""
    text = cell.value
    if cell.error is not None or text is None or len(text) > _CODE_WIDTH:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def program_result(cell: CellResult) -> Result:
    """The ``Result`` of the program ``cell`` ran: a limit that ended the call is the
    program's (killed by ``SIGKILL``), as is a lost session's end; an exit code is the
    program's; a call that gave no exit code (the spawning code failed) is a
    ``NONZERO_EXIT`` with code 1, its exception at the end of stderr."""
    stderr = cell.stderr
    status, returncode, signal = Status.OK, None, None
    code = _exit_code(cell)
    if cell.status in LIMIT_STATUSES or cell.lost or cell.status is Status.SIGNALED:
        status, signal = cell.status, cell.signal or _SIGKILL
        if status is Status.OK:
            status = Status.SIGNALED
    elif code is None:
        status, returncode = Status.NONZERO_EXIT, 1
        if cell.error is not None:
            stderr += f"{cell.error.traceback}".encode()
    elif code < 0:
        status, signal = Status.SIGNALED, -code
    else:
        returncode = code
        status = Status.OK if code == 0 else Status.NONZERO_EXIT
    return Result(
        status=status,
        returncode=returncode,
        signal=signal,
        stdout=cell.stdout,
        stderr=stderr,
        stdout_truncated=cell.stdout_truncated,
        stderr_truncated=cell.stderr_truncated,
        wall_time=cell.wall_time,
        cpu_time=cell.cpu_time,
        max_rss=cell.max_rss,
        files=cell.files,
        files_truncated=cell.files_truncated,
    )
