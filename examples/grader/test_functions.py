# SPDX-License-Identifier: MIT
"""solution.py, case by case: the module is imported once in the module's session, and
each case calls one of the student's functions and compares the value it returned
(prints never mix with it).  A case that loops forever is rolled back and costs only its
own point."""

from __future__ import annotations

import pytest

from pysandbox.pytest_plugin import SessionSandbox

pytestmark = pytest.mark.sandbox_session(setup="import solution")

CASES = [
    ("add", [2, 3], 5),
    ("add", [-7, 7], 0),
    ("is_prime", [2], True),
    ("is_prime", [91], False),
    ("is_prime", [97], True),
    ("is_prime", [1], False),
    ("reverse_words", ["hello world"], "world hello"),
    ("reverse_words", ["  to be   or not "], "not or be to"),
]


@pytest.mark.sandbox(cpu_time=0.5)  # each call is tiny: an endless loop ends sooner
@pytest.mark.points(1)
@pytest.mark.parametrize(
    ("function", "args", "expected"),
    CASES,
    ids=[f"{function}({', '.join(map(repr, args))})" for function, args, _ in CASES],
)
def test_function(
    sandbox_session: SessionSandbox, function: str, args: list[object], expected: object
) -> None:
    assert sandbox_session.call(f"solution.{function}", *args) == expected
