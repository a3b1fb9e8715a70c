# SPDX-License-Identifier: MIT
"""sum.c: compiled once by gcc in the module's session, then run against several
inputs, each run a call of that session.

gcc gets limits of its own (``setup_cpu_time``, ``setup_wall_time``): it runs cc1, as
and ld.  A compile error errors every test of the module with gcc's messages.
"""

from __future__ import annotations

import pytest

from pysandbox.pytest_plugin import SessionSandbox

pytestmark = pytest.mark.sandbox_session(
    setup=["gcc", "-O2", "-Wall", "-o", "sum", "sum.c"], setup_cpu_time=10, setup_wall_time=30
)


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
def test_sum(sandbox_session: SessionSandbox, given: str, expected: str) -> None:
    result = sandbox_session.run(["./sum"], stdin=given).check()
    assert result.stdout_text() == expected
