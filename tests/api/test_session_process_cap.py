# SPDX-License-Identifier: MIT
"""``CellResult.processes_exceeded`` and ``CallResult.processes_exceeded``: a session's
call that reached ``Limits.processes`` says so, in its result and its verdict line; the
next call, under the cap, does not; a bomb's processes do not outlive its call.

Seen where a pids cgroup caps the session (root on the hosts CI runs on: the count of
``pids.events`` grows while the call runs); without one the tests are skipped, as the
field then stays False (``docs/security.rst``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.timing import cpu, slow

from pysandbox import Limits, Session, Status
from pysandbox._cgroups.probe import probe
from pysandbox._model.cell_verdict import describe_cell

pytestmark = pytest.mark.skipif(not probe().pids, reason="no pids cgroup: the cap is not seen")

LIMITS = Limits(processes=8, cpu_time=cpu(5), wall_time=slow(20))

#: Forks until one is refused, the children sleeping; prints how many forks failed.
BOMB = """
import os, time
failed = 0
for _ in range(32):
    try:
        pid = os.fork()
    except OSError:
        failed += 1
        continue
    if pid == 0:
        time.sleep(30)
        os._exit(0)
failed
"""

#: The same as a function of the session, for ``call``.
DEFINE_BOMB = (
    "def bomb():\n"
    + "\n".join("    " + line for line in BOMB.strip().splitlines()[:-1])
    + "\n    return failed\n"
)


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with Session(limits=LIMITS) as live:
        assert live.run(DEFINE_BOMB)
        yield live


def _sandbox_processes(session: Session) -> int:
    """Processes of the session's sandbox now (its init, keeper and state included)."""
    cell = session.run("import os\nlen([p for p in os.listdir('/proc') if p.isdigit()])")
    assert cell.value is not None
    return int(cell.value)


def test_a_call_that_reaches_the_cap_says_so(session: Session) -> None:
    before = _sandbox_processes(session)
    cell = session.run(BOMB)
    assert cell.committed and cell.status is Status.OK, cell
    assert cell.value is not None and int(cell.value) > 0, cell
    assert cell.processes_exceeded, cell
    verdict = describe_cell(cell, LIMITS)
    assert verdict.startswith("ok, process limit reached (limit 8), committed"), verdict
    # The bomb's sleeping children are gone with its call.
    assert _sandbox_processes(session) == before


def test_a_call_under_the_cap_does_not(session: Session) -> None:
    session.run(BOMB)
    cell = session.run("import os\nos.getpid()")
    assert cell and not cell.processes_exceeded, cell


def test_a_function_call_that_reaches_the_cap_says_so(session: Session) -> None:
    result = session.call("bomb")
    assert result and isinstance(result.value, int) and result.value > 0, result
    assert result.processes_exceeded, result
    assert "process limit reached (limit 8)" in describe_cell(result, LIMITS)
    assert not session.call("builtins.len", "abc").processes_exceeded
