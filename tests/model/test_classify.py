# SPDX-License-Identifier: MIT
"""classify: plain facts about a finished run to (status, returncode, signal)."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
import os
import pickle
import signal

import pytest

from pysandbox._model.classify import RSS_NEAR_LIMIT, classify, exit_info, is_memory_error
from pysandbox._model.result import Result
from pysandbox._model.status import Status

pytestmark = pytest.mark.no_bwrap

MIB = 2**20
MEMORY = 256 * MIB
SIGKILL = int(signal.SIGKILL)
SIGXCPU = int(signal.SIGXCPU)
SIGSEGV = int(signal.SIGSEGV)
SIGABRT = int(signal.SIGABRT)
TRACEBACK_MEMORY_ERROR = b'Traceback (most recent call last):\n  File "x", line 1\nMemoryError\n'


def exited(code: int) -> int:
    """A raw wait status: exited with ``code``."""
    return code << 8


def killed(sig: int, core: bool = False) -> int:
    """A raw wait status: killed by ``sig``."""
    return sig | (0x80 if core else 0)


def run(**facts: object) -> tuple[Status, int | None, int | None]:
    """classify with the facts of a clean, quick exit 0, overridden by ``facts``."""
    arguments: dict[str, object] = {
        "timed_out": False,
        "killed_on_cap": False,
        "cpu_exceeded": False,
        "report_wait_status": exited(0),
        "bwrap_wait_status": exited(0),
        "cpu_time": 0.1,
        "cpu_limit": 1.0,
        "stderr": b"",
        "max_rss": 10 * MIB,
        "memory_limit": MEMORY,
    }
    arguments.update(facts)
    return classify(**arguments)  # type: ignore[arg-type]


def test_wait_status_helpers_agree_with_os() -> None:
    assert os.WIFEXITED(exited(3)) and os.WEXITSTATUS(exited(3)) == 3
    assert os.WIFSIGNALED(killed(SIGSEGV, core=True)) and os.WTERMSIG(killed(9, True)) == 9


# --- what the program did by itself -------------------------------------------------


def test_exit_zero_is_ok() -> None:
    assert run() == (Status.OK, 0, None)


@pytest.mark.parametrize("code", [1, 2, 42, 127, 128, 255])
def test_nonzero_exit(code: int) -> None:
    status = exited(code)
    assert run(report_wait_status=status, bwrap_wait_status=status) == (
        Status.NONZERO_EXIT,
        code,
        None,
    )


@pytest.mark.parametrize("sig", [SIGSEGV, SIGABRT, int(signal.SIGTERM), int(signal.SIGPIPE), 64])
@pytest.mark.parametrize("core", [False, True])
def test_signal_is_signaled(sig: int, core: bool) -> None:
    result = run(report_wait_status=killed(sig, core), bwrap_wait_status=exited(128 + sig))
    assert result == (Status.SIGNALED, None, sig)


def test_sigkill_under_the_cpu_limit_is_signaled() -> None:
    assert run(report_wait_status=killed(SIGKILL), cpu_time=0.99) == (
        Status.SIGNALED,
        None,
        SIGKILL,
    )


# --- limits, in order ----------------------------------------------------------------


def test_timeout_wins_over_everything() -> None:
    result = run(
        timed_out=True,
        killed_on_cap=True,
        cpu_exceeded=True,
        report_wait_status=exited(1),
        stderr=TRACEBACK_MEMORY_ERROR,
        max_rss=MEMORY,
    )
    assert result == (Status.WALL_TIME_EXCEEDED, 1, None)


def test_timeout_keeps_the_reported_exit_even_zero() -> None:
    assert run(timed_out=True) == (Status.WALL_TIME_EXCEEDED, 0, None)


def test_output_cap_wins_over_cpu_and_memory() -> None:
    result = run(
        killed_on_cap=True,
        cpu_exceeded=True,
        report_wait_status=None,
        bwrap_wait_status=killed(SIGKILL),
        stderr=TRACEBACK_MEMORY_ERROR,
    )
    assert result == (Status.OUTPUT_EXCEEDED, None, SIGKILL)


def test_cpu_watcher_wins_over_memory() -> None:
    result = run(
        cpu_exceeded=True,
        report_wait_status=exited(1),
        stderr=TRACEBACK_MEMORY_ERROR,
    )
    assert result == (Status.CPU_TIME_EXCEEDED, 1, None)


def test_sigxcpu_is_cpu_time_even_without_the_watcher() -> None:
    assert run(report_wait_status=killed(SIGXCPU), cpu_time=0.0) == (
        Status.CPU_TIME_EXCEEDED,
        None,
        SIGXCPU,
    )


@pytest.mark.parametrize("cpu_time", [1.0, 1.01, 3.0])
def test_sigkill_at_or_past_the_cpu_limit_is_cpu_time(cpu_time: float) -> None:
    assert run(report_wait_status=killed(SIGKILL), cpu_time=cpu_time) == (
        Status.CPU_TIME_EXCEEDED,
        None,
        SIGKILL,
    )


def test_cpu_over_the_limit_but_a_clean_exit_is_ok() -> None:
    # The watcher did not fire (between two samples): the limit was not enforced.
    assert run(cpu_time=1.04) == (Status.OK, 0, None)


# --- memory --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stderr",
    [
        TRACEBACK_MEMORY_ERROR,
        b"MemoryError",
        b"MemoryError: cannot allocate 10 GiB\n",
        b"MemoryError:\r\n",
        b"noise\nMemoryError\n\n   \n\t\r\n",
        b"\xff\xfe not utf-8\nMemoryError",
    ],
)
@pytest.mark.parametrize("how", [exited(1), exited(120), killed(SIGABRT)])
def test_memory_error_on_failure_is_memory_exceeded(stderr: bytes, how: int) -> None:
    status, _, _ = run(report_wait_status=how, stderr=stderr)
    assert status is Status.MEMORY_EXCEEDED


@pytest.mark.parametrize(
    "stderr",
    [
        b"",
        b"MemoryErrorish\n",
        b"  MemoryError\n",
        b"memoryerror\n",
        b"RecursionError\n",
        b"MemoryError\nbut then something else\n",
        b"ValueError: MemoryError\n",
        b"MemoryError\x00\n",
    ],
)
def test_other_stderr_is_not_a_memory_error(stderr: bytes) -> None:
    assert not is_memory_error(stderr)
    assert run(report_wait_status=exited(1), stderr=stderr) == (Status.NONZERO_EXIT, 1, None)


def test_memory_error_needs_a_failure() -> None:
    assert run(stderr=TRACEBACK_MEMORY_ERROR) == (Status.OK, 0, None)


def test_rss_near_the_limit_on_failure_is_memory_exceeded() -> None:
    threshold = math.ceil(MEMORY * RSS_NEAR_LIMIT)
    assert run(report_wait_status=exited(1), max_rss=threshold) == (
        Status.MEMORY_EXCEEDED,
        1,
        None,
    )
    assert run(report_wait_status=killed(SIGSEGV), max_rss=MEMORY) == (
        Status.MEMORY_EXCEEDED,
        None,
        SIGSEGV,
    )
    assert run(report_wait_status=exited(1), max_rss=threshold - 1) == (
        Status.NONZERO_EXIT,
        1,
        None,
    )


def test_rss_near_the_limit_without_failure_is_ok() -> None:
    assert run(max_rss=MEMORY) == (Status.OK, 0, None)


def test_memory_error_check_is_linear_on_a_huge_stderr() -> None:
    assert not is_memory_error(b"x" * (64 * MIB))
    assert is_memory_error(b"\n" * (64 * MIB) + b"MemoryError" + b" " * (64 * MIB))


# --- where the exit information comes from ------------------------------------------


def test_the_report_wins_over_bwrap() -> None:
    assert exit_info(exited(3), exited(137)) == (3, None)
    assert exit_info(killed(SIGSEGV), exited(0)) == (None, SIGSEGV)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (0, (0, None)),
        (1, (1, None)),
        (128, (128, None)),
        (129, (None, 1)),
        (137, (None, 9)),
        (139, (None, 11)),
        (152, (None, SIGXCPU)),
        (192, (None, 64)),
        (193, (193, None)),
        (255, (255, None)),
    ],
)
def test_without_a_report_bwrap_exit_code_128_plus_n_is_signal_n(
    code: int, expected: tuple[int | None, int | None]
) -> None:
    assert exit_info(None, exited(code)) == expected


def test_without_a_report_a_killed_bwrap_gives_its_signal() -> None:
    assert exit_info(None, killed(SIGKILL)) == (None, SIGKILL)
    assert run(timed_out=True, report_wait_status=None, bwrap_wait_status=killed(SIGKILL)) == (
        Status.WALL_TIME_EXCEEDED,
        None,
        SIGKILL,
    )


def test_no_report_and_bwrap_exit_152_is_cpu_time() -> None:
    assert run(report_wait_status=None, bwrap_wait_status=exited(152)) == (
        Status.CPU_TIME_EXCEEDED,
        None,
        SIGXCPU,
    )


@pytest.mark.parametrize("bogus", [0x137F, 0xFFFF, -1, 0x10000, 2**40, -(2**40)])
def test_a_report_that_is_no_exit_falls_back_to_bwrap(bogus: int) -> None:
    # stopped (0x137f), continued (0xffff) and out-of-range statuses tell nothing
    assert exit_info(bogus, exited(4)) == (4, None)
    assert exit_info(bogus, None) is None
    assert exit_info(None, bogus) is None


def test_no_exit_information() -> None:
    assert exit_info(None, None) is None
    with pytest.raises(ValueError, match="no wait status"):
        run(report_wait_status=None, bwrap_wait_status=None)


@pytest.mark.parametrize(
    ("fact", "status"),
    [
        ("timed_out", Status.WALL_TIME_EXCEEDED),
        ("killed_on_cap", Status.OUTPUT_EXCEEDED),
        ("cpu_exceeded", Status.CPU_TIME_EXCEEDED),
        ("disk_exceeded", Status.DISK_EXCEEDED),
    ],
)
def test_killed_on_a_limit_without_any_status_died_of_sigkill(fact: str, status: Status) -> None:
    facts = {fact: True, "report_wait_status": None, "bwrap_wait_status": None}
    assert run(**facts) == (status, None, SIGKILL)


# --- invariants over many combinations -----------------------------------------------


def test_exactly_one_of_returncode_and_signal_and_ok_means_clean() -> None:
    statuses = [exited(0), exited(1), exited(137), killed(SIGKILL), killed(SIGXCPU), None]
    flags = list(itertools.product([False, True], repeat=3))
    for report, outer, (timed_out, capped, cpu), stderr, rss in itertools.product(
        statuses,
        statuses,
        flags,
        [b"", TRACEBACK_MEMORY_ERROR],
        [0, MEMORY],
    ):
        if report is None and outer is None and not (timed_out or capped or cpu):
            continue
        status, returncode, sig = run(
            timed_out=timed_out,
            killed_on_cap=capped,
            cpu_exceeded=cpu,
            report_wait_status=report,
            bwrap_wait_status=outer,
            stderr=stderr,
            max_rss=rss,
            cpu_time=2.0,
        )
        assert (returncode is None) != (sig is None)
        limited = timed_out or capped or cpu
        assert (status is Status.OK) == (returncode == 0 and not limited)
        if sig is not None and not limited and status is not Status.CPU_TIME_EXCEEDED:
            assert sig not in (SIGXCPU, SIGKILL)


# --- the records classify feeds: Status and Result -----------------------------------


def _result(**overrides: object) -> Result:
    fields: dict[str, object] = {
        "status": Status.OK,
        "returncode": 0,
        "signal": None,
        "stdout": "žluť\n".encode(),
        "stderr": b"bad \xff byte",
        "stdout_truncated": False,
        "stderr_truncated": False,
        "wall_time": 0.05,
        "cpu_time": 0.02,
        "max_rss": 9 * MIB,
        "files": {"out.txt": b"1"},
        "files_truncated": False,
    }
    fields.update(overrides)
    return Result(**fields)  # type: ignore[arg-type]


def test_status_values_are_the_spec() -> None:
    assert {s.name: s.value for s in Status} == {
        "OK": "ok",
        "NONZERO_EXIT": "nonzero_exit",
        "SIGNALED": "signaled",
        "CPU_TIME_EXCEEDED": "cpu_time_exceeded",
        "WALL_TIME_EXCEEDED": "wall_time_exceeded",
        "MEMORY_EXCEEDED": "memory_exceeded",
        "OUTPUT_EXCEEDED": "output_exceeded",
        "DISK_EXCEEDED": "disk_exceeded",
    }


def test_result_fields_are_the_spec() -> None:
    assert [f.name for f in dataclasses.fields(Result)] == [
        "status",
        "returncode",
        "signal",
        "stdout",
        "stderr",
        "stdout_truncated",
        "stderr_truncated",
        "wall_time",
        "cpu_time",
        "max_rss",
        "files",
        "files_truncated",
        "executables",
        "queued_time",
        "displays",
        "displays_truncated",
        "processes_exceeded",
        "files_not_collected",
    ]


@pytest.mark.parametrize("status", list(Status))
def test_result_is_true_exactly_when_ok(status: Status) -> None:
    assert bool(_result(status=status)) is (status is Status.OK)


def test_result_text_is_decoded_utf8() -> None:
    result = _result()
    assert result.stdout_text() == "žluť\n"
    assert result.stderr_text() == "bad \ufffd byte"
    assert result.stderr_text("ignore") == "bad  byte"
    with pytest.raises(UnicodeDecodeError):
        result.stderr_text("strict")


def test_result_and_its_files_are_immutable_copies() -> None:
    given = {"out.txt": b"1"}
    result = _result(files=given)
    given["sneaky"] = b"2"
    assert dict(result.files) == {"out.txt": b"1"}
    with pytest.raises(TypeError):
        result.files["x"] = b"3"  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.status = Status.SIGNALED  # type: ignore[misc]


def test_result_compares_hashes_pickles_and_copies() -> None:
    result = _result()
    assert result == _result() and hash(result) == hash(_result())
    assert result != _result(files={"other": b""})
    for again in (pickle.loads(pickle.dumps(result)), copy.copy(result), copy.deepcopy(result)):
        assert again == result
        with pytest.raises(TypeError):
            again.files["x"] = b"3"  # type: ignore[index]
