# SPDX-License-Identifier: MIT
"""sum.c: compiled with gcc inside the sandbox, then run against several inputs.

gcc gets limits of its own (explicit limits win over the ini options); the program runs
under the ini's defaults.
"""

from __future__ import annotations

import pytest
from conftest import Submission

from pysandbox import Limits, Result
from pysandbox.pytest_plugin import Sandbox

# gcc runs cc1, as and ld: more memory, processes and time than the program needs.  (The
# sandbox has no /tmp: gcc keeps its temporary files in the working directory.)
COMPILER_LIMITS = Limits(cpu_time=10, wall_time=30, memory=1024 * 2**20, processes=32)


def compile_sum(sandbox: Sandbox, submission: Submission) -> Result:
    """sum.c compiled to ./sum; a compile error fails the test with gcc's messages."""
    return sandbox.run(
        ["gcc", "-O2", "-Wall", "-o", "sum", "sum.c"],
        files={"sum.c": submission.read("sum.c")},
        limits=COMPILER_LIMITS,
    ).check()


@pytest.mark.points(2)
@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("1 2\n", "3\n"),
        ("-5 5\n10 20\n", "0\n30\n"),
        ("3000000000 4000000000\n", "7000000000\n"),
    ],
    ids=["small", "two-lines", "large"],
)
def test_sum(sandbox: Sandbox, submission: Submission, given: str, expected: str) -> None:
    built = compile_sum(sandbox, submission)
    # files_with_modes() keeps the executable bit of ./sum for the next run.
    result = sandbox.run(["./sum"], files=built.files_with_modes(), stdin=given).check()
    assert result.stdout_text() == expected
