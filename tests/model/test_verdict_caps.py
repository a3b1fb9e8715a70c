# SPDX-License-Identifier: MIT
"""What a result says about the process cap and about files a kill kept from being
collected: the verdict line, ``check()``'s message, the text and HTML forms, the JSON
round trip (a result without them writes what 0.1.0 wrote); and ``SandboxFailure`` as
pytest shows it, in a real pytest run."""

from __future__ import annotations

import pickle
import textwrap
from pathlib import Path

import pytest
from support.inner_pytest import run_pytest

import pysandbox
from pysandbox import Limits, Result, SandboxFailure, Status
from pysandbox._model.display import result_html, result_text, verdict_text
from pysandbox._model.result import SandboxFailure as DefinedFailure
from pysandbox._model.verdict import describe

LIMITS = Limits(processes=8, cpu_time=1)


def _result(status: Status = Status.OK, **fields: object) -> Result:
    """A result as a run with ``status`` ends: exit 0, or killed by SIGKILL."""
    killed = status is not Status.OK
    made: dict[str, object] = {
        "status": status,
        "returncode": None if killed else 0,
        "signal": 9 if killed else None,
        "stdout": b"",
        "stderr": b"",
        "stdout_truncated": False,
        "stderr_truncated": False,
        "wall_time": 0.5,
        "cpu_time": 1.01 if killed else 0.02,
        "max_rss": 2**23,
        "files": {},
        "files_truncated": killed,
    }
    made.update(fields)
    return Result(**made)  # type: ignore[arg-type]


@pytest.mark.no_bwrap
def test_an_ok_run_that_reached_the_cap_says_so_and_passes_check() -> None:
    result = _result(processes_exceeded=True)
    assert describe(result, LIMITS).startswith("ok, process limit reached (limit 8), exit 0, ")
    assert result.check() is result
    assert "OK, exit code 0, process limit reached" in result_text(result)
    assert "process limit reached" in result_html(result)


@pytest.mark.no_bwrap
def test_a_killed_run_that_reached_the_cap_names_both_and_check_says_it() -> None:
    result = _result(Status.CPU_TIME_EXCEEDED, processes_exceeded=True, files_not_collected=True)
    line = describe(result, LIMITS)
    assert line.startswith(
        "cpu_time_exceeded (limit 1 s), process limit reached (limit 8), killed by SIGKILL, "
    )
    assert line.endswith(", files not collected (the run was ended by the CPU time limit)")
    with pytest.raises(SandboxFailure, match=r"killed by SIGKILL \(9\); process limit reached;"):
        result.check()


@pytest.mark.no_bwrap
@pytest.mark.parametrize(
    ("status", "limit"),
    [
        (Status.CPU_TIME_EXCEEDED, "the CPU time limit"),
        (Status.WALL_TIME_EXCEEDED, "the wall time limit"),
        (Status.OUTPUT_EXCEEDED, "the output limit"),
        (Status.DISK_EXCEEDED, "the disk limit"),
    ],
)
def test_files_a_kill_kept_are_not_collected_rather_than_left_out(
    status: Status, limit: str
) -> None:
    result = _result(status, files_not_collected=True)
    said = f"files not collected (the run was ended by {limit})"
    assert said in describe(result, LIMITS)
    for shown in (verdict_text(result, LIMITS), result_text(result), result_html(result)):
        assert "left out" not in shown
    assert f"\n{said}\n" in result_text(result)
    assert verdict_text(result, LIMITS).count("not collected") == 1


@pytest.mark.no_bwrap
def test_files_over_their_cap_are_still_left_out() -> None:
    result = _result(files={"a": b"1"}, files_truncated=True)
    assert "files: a (1 bytes), some left out (files_truncated)" in result_text(result)


@pytest.mark.no_bwrap
def test_the_new_facts_travel_in_json_only_when_true() -> None:
    plain = _result(Status.MEMORY_EXCEEDED)
    assert "processes_exceeded" not in plain.to_dict()
    assert "files_not_collected" not in plain.to_dict()
    assert Result.from_dict(plain.to_dict()) == plain
    both = _result(Status.CPU_TIME_EXCEEDED, processes_exceeded=True, files_not_collected=True)
    described = both.to_dict()
    assert described["processes_exceeded"] is True and described["files_not_collected"] is True
    assert Result.from_dict(described) == both
    assert pickle.loads(pickle.dumps(both)) == both
    with pytest.raises(ValueError, match=r"^processes_exceeded: expected bool"):
        Result.from_dict({**described, "processes_exceeded": 1})


@pytest.mark.no_bwrap
def test_sandbox_failure_is_named_pysandbox_and_pickles() -> None:
    assert DefinedFailure is pysandbox.SandboxFailure
    assert DefinedFailure.__module__ == "pysandbox"
    failure = SandboxFailure("failed", _result(Status.CPU_TIME_EXCEEDED))
    back = pickle.loads(pickle.dumps(failure))
    assert type(back) is SandboxFailure and back.result == failure.result


def test_pytest_shows_pysandbox_sandbox_failure_without_pysandbox_frames(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_grader.py").write_text(
        textwrap.dedent(
            """
            from pysandbox import run_python

            def test_submission():
                run_python("import sys; sys.exit(3)").check()
            """
        )
    )
    out = run_pytest(tmp_path, "-q", "test_grader.py")
    assert out.returncode == 1, out.stdout + out.stderr
    shown = out.stdout
    said = "E       pysandbox.SandboxFailure: sandboxed program failed: NONZERO_EXIT"
    assert said in shown, shown
    assert "_model/result.py" not in shown and "def check(" not in shown, shown
    assert "pysandbox._" not in shown, shown


def test_a_session_calls_verdict_and_tails_escape_what_the_code_named() -> None:
    from pysandbox import CellError, CellResult
    from pysandbox._frontends.pytest_runs import cell_tails
    from pysandbox._model.cell_verdict import describe_cell

    error = CellError(type="\x1b[2J", message="m", traceback="::error::forged\n\x1b[31m")
    cell = CellResult(outcome="committed", status=Status.OK, error=error)
    verdict = describe_cell(cell, Limits())
    assert "\x1b" not in verdict and "raised \\x1b[2J" in verdict, verdict
    tails = cell_tails(cell)
    assert "\x1b" not in tails and "\n::error::" not in tails, tails
