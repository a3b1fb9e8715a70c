# SPDX-License-Identifier: MIT
"""``Result.processes_exceeded``: a run that reached ``Limits.processes`` says so, in the
result, its JSON and its verdict line, whether the bomb spun (and the CPU limit ended
it) or slept (and the program ended well); a run under the cap does not.

Through both callers (``conftest.caller``): root, whose sandboxes each have a pids
cgroup on the hosts CI runs on (exact: ``pids.events``), and a non-root caller, whose
cap is ``RLIMIT_NPROC`` (sampled by the C core's watcher every 50 ms; the bombs here
hold their children a good while, so a sample sees them).  After each call no process
of the sandbox is left (the non-root caller's fixture checks its uids too).
"""

from __future__ import annotations

from support.callers import Caller
from support.describe import describe
from support.processes import survivors, unique_marker
from support.timing import cpu, slow

from pysandbox import Limits, Result, Status
from pysandbox._model.verdict import describe as verdict

#: Forks until one is refused; each child sleeps (or spins), the program holds them a
#: while (so a 50 ms sample sees them), prints how many forks failed and exits 0.
BOMB = """
import os, sys, time
failed = 0
for _ in range(64):
    try:
        pid = os.fork()
    except OSError:
        failed += 1
        continue
    if pid == 0:
        if SPIN:
            while True:
                pass
        time.sleep(5)
        os._exit(0)
time.sleep(0.5)
print("failed", failed, flush=True)
while SPIN:
    pass
"""

#: Three children, well under a cap of 16, held a while and waited for.
FEW = """
import os, sys, time
children = [os.fork() for _ in range(3) if os.getpid() == PARENT]
if os.getpid() != PARENT:
    time.sleep(0.5)
    os._exit(0)
for child in children:
    os.waitpid(child, 0)
print("done", flush=True)
"""


def _run(caller: Caller, code: str, limits: Limits) -> Result:
    """``code`` run with a marker argument; no process with the marker outlives it."""
    marker = unique_marker()
    result = caller.run_python(code, args=[marker], limits=limits)
    assert survivors(marker) == [], "processes of the sandbox outlived the call"
    return result


def test_sleeping_bomb_ends_ok_and_says_the_cap_was_reached(caller: Caller) -> None:
    limits = Limits(processes=8, cpu_time=cpu(5), wall_time=slow(20))
    result = _run(caller, BOMB.replace("SPIN", "False"), limits)
    assert result.status is Status.OK, describe(result)
    assert int(result.stdout.split()[1]) > 0, describe(result)
    assert result.processes_exceeded, describe(result)
    assert "process limit reached (limit 8)" in verdict(result, limits)
    assert result.to_dict()["processes_exceeded"] is True
    assert result.check() is result  # OK decides: reaching the cap is no failure


def test_spinning_bomb_is_cpu_time_exceeded_and_says_the_cap_was_reached(
    caller: Caller,
) -> None:
    limits = Limits(processes=8, cpu_time=cpu(1), wall_time=slow(20))
    result = _run(caller, BOMB.replace("SPIN", "True"), limits)
    assert result.status is Status.CPU_TIME_EXCEEDED, describe(result)
    assert result.processes_exceeded, describe(result)
    line = verdict(result, limits)
    assert line.startswith("cpu_time_exceeded (limit ") and "process limit reached" in line
    # Killed before the program ended: nothing was collected, nothing over a cap.
    assert result.files_not_collected and result.files == {}, describe(result)
    assert "files not collected (the run was ended by the CPU time limit)" in line
    assert "left out" not in line


def test_a_run_under_the_cap_has_not_reached_it(caller: Caller) -> None:
    limits = Limits(processes=16, cpu_time=cpu(5), wall_time=slow(20))
    result = _run(caller, "import os\nPARENT = os.getpid()\n" + FEW, limits)
    assert result.status is Status.OK and result.stdout == b"done\n", describe(result)
    assert not result.processes_exceeded, describe(result)
    assert not result.files_not_collected
    assert "process limit" not in verdict(result, limits)
    assert "processes_exceeded" not in result.to_dict()


def test_files_cut_at_their_cap_are_still_left_out_not_uncollected(caller: Caller) -> None:
    limits = Limits(files_out_count=2, cpu_time=cpu(5), wall_time=slow(20))
    code = "for i in range(4):\n    open(f'f{i}', 'w').write('x')\n"
    result = _run(caller, code, limits)
    assert result.status is Status.OK, describe(result)
    assert result.files_truncated and not result.files_not_collected, describe(result)
    assert "output files left out (limit 2 files)" in verdict(result, limits)
