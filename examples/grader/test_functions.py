# SPDX-License-Identifier: MIT
"""solution.py, case by case: each case calls one of the student's functions in a fresh
sandbox and compares what it returned."""

from __future__ import annotations

import json

import pytest
from conftest import Submission

from pysandbox.pytest_plugin import Sandbox

# The harness imports the student's module, calls one function and writes what it
# returned to a file, so that whatever the student prints does not get in the way.
HARNESS = """
import json, sys
import solution
answer = getattr(solution, sys.argv[1])(*json.loads(sys.argv[2]))
with open("answer.json", "w") as out:
    json.dump(answer, out)
"""

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
    sandbox: Sandbox, submission: Submission, function: str, args: list[object], expected: object
) -> None:
    result = sandbox.run_python(
        HARNESS,
        args=[function, json.dumps(args)],
        files={"solution.py": submission.read("solution.py")},
    )
    result.check()  # fails the test with the verdict and the output if it did not end OK
    assert json.loads(result.files["answer.json"]) == expected
