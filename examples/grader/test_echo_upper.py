# SPDX-License-Identifier: MIT
"""echo_upper.py, a program that reads stdin: each input in a fresh sandbox of its own
(the ``sandbox`` fixture), as a program graded from the outside runs."""

from __future__ import annotations

import pytest

from pysandbox.pytest_plugin import Sandbox, Submission


@pytest.mark.sandbox(cpu_time="500ms")  # echoing a few lines takes a few milliseconds
@pytest.mark.points(2)
@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("hello\n", "HELLO\n"),
        ("two\nlines\n", "TWO\nLINES\n"),
        ("", ""),
    ],
    ids=["one-line", "two-lines", "empty"],
)
def test_echo_upper(sandbox: Sandbox, submission: Submission, given: str, expected: str) -> None:
    program = submission.read("echo_upper.py").decode()
    result = sandbox.run_python(program, stdin=given).check()
    assert result.stdout_text() == expected
