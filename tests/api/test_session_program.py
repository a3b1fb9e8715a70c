# SPDX-License-Identifier: MIT
"""A program run as one call of a session (``_api/session_program.run_program``): its
end as ``run`` would give it, its stdin fed whole or cut short by the program, the
signals Python ignores back at their defaults, and a limit that ends it rolled back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.timing import slow

from pysandbox import Limits, Session, Status
from pysandbox._api.session_program import run_program


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with Session(limits=Limits(wall_time=slow(10), cpu_time=2)) as live:
        yield live


def test_exit_codes_signals_and_output_come_back_as_a_result(session: Session) -> None:
    result, cell = run_program(session, ["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (result.status, result.returncode) == (Status.NONZERO_EXIT, 3), result
    assert (result.stdout, result.stderr) == (b"out\n", b"err\n")
    assert cell.committed
    crashed, _ = run_program(session, ["sh", "-c", "kill -SEGV $$"])
    assert (crashed.status, crashed.signal, crashed.returncode) == (Status.SIGNALED, 11, None)
    missing, _ = run_program(session, ["./no-such-program"])
    assert (missing.returncode, missing.stderr) == (
        127,
        b"./no-such-program: No such file or directory\n",
    )


def test_stdin_past_the_pipe_buffer_is_fed_whole(session: Session) -> None:
    data = bytes(range(256)) * 1024  # 256 KiB: four times a pipe's buffer
    result, _ = run_program(session, ["wc", "-c"], stdin=data)
    assert result and result.stdout.strip() == str(len(data)).encode(), result


def test_a_program_that_stops_reading_ends_the_write(session: Session) -> None:
    # head exits after one byte: the rest of the 1 MiB has no reader, and the call ends
    # at once instead of at its wall time.
    result, cell = run_program(session, ["head", "-c", "1"], stdin=b"x" * 2**20)
    assert result and result.stdout == b"x", result
    assert cell.wall_time < 5, cell


def test_sigpipe_is_back_at_its_default(session: Session) -> None:
    # yes writes until its reader goes: SIGPIPE ends it silently, as in a shell; with
    # the signal ignored (Python's setting) it would complain of EPIPE on stderr.
    result, _ = run_program(session, ["sh", "-c", "yes | head -n 1"])
    assert result and result.stdout == b"y\n" and result.stderr == b"", result


def test_a_limit_ends_the_program_and_rolls_the_call_back(session: Session) -> None:
    result, cell = run_program(session, ["sh", "-c", "while :; do :; done"], cpu_time=0.3)
    assert result.status is Status.CPU_TIME_EXCEEDED and result.signal == 9, result
    assert cell.rolled_back
    capped, _ = run_program(session, ["sh", "-c", "yes | head -c 100000"], stdout=1000)
    assert capped.stdout_truncated and len(capped.stdout) <= 1000, capped


@pytest.mark.parametrize(
    ("argv", "error"),
    [("ls", TypeError), ([], ValueError), (["ls", 1], TypeError), (["l\0s"], ValueError)],
)
def test_bad_arguments_are_refused_before_anything_runs(
    session: Session, argv: object, error: type[Exception]
) -> None:
    with pytest.raises(error, match="argv"):
        run_program(session, argv)  # type: ignore[arg-type]


def test_the_namespace_is_left_as_it_was(session: Session) -> None:
    before = session.run("sorted(k for k in globals() if k != '_')").value
    run_program(session, ["true"])
    assert session.run("sorted(k for k in globals() if k != '_')").value == before
