# SPDX-License-Identifier: MIT
"""The smallest ``processes`` and ``open_files`` that ``Limits`` accepts really start a
program, in the sandbox that needs the most of them: ``run_python`` with input files
(three passed descriptors) and output files, as root and as a non-root caller.

Below them (``tests/model/test_limits.py``), bwrap could not build the sandbox ("Too many open
files") or the init could not fork the program, and the caller was told to enable user
namespaces, or got exit code 127 as if the program had failed.
"""

from __future__ import annotations

import json
from pathlib import Path

from support.callers import run_unprivileged

from pysandbox import Limits, Status, run, run_python
from pysandbox._launch.plan import FdLayout
from pysandbox._model.limits import _HANDED_FDS, MIN_OPEN_FILES, MIN_PROCESSES

#: Tries to fork once; ``processes`` at its minimum leaves no room for that.
FORK_ONCE = """
import json, os, sys
try:
    pid = os.fork()
except OSError as exc:
    forked = exc.strerror
else:
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    forked = "done"
open("out.txt", "w").write(open("in/data.txt").read().upper())
print(json.dumps({"forked": forked, "fds": len(os.listdir("/proc/self/fd"))}))
"""
SMALLEST = {"processes": MIN_PROCESSES, "open_files": MIN_OPEN_FILES}
FILES = {"in/data.txt": b"input"}


def test_the_handed_descriptors_are_those_of_the_launch() -> None:
    """``_limits`` cannot import ``_launch`` (which imports it through ``_cgroup``): the
    count it derives
    ``MIN_OPEN_FILES`` from must follow the layout of ``run_python`` with files."""
    layout = FdLayout.of(payloads=1, captures=1, code=True)  # input files; output files
    assert max(*layout.payloads, layout.status, layout.report, *layout.captures) + 1 == (
        _HANDED_FDS
    )


def test_the_smallest_limits_run_a_program_with_files() -> None:
    result = run_python(FORK_ONCE, limits=Limits(**SMALLEST), files=FILES)  # type: ignore[arg-type]
    assert result.status is Status.OK, (result.status, result.stderr)
    report = json.loads(result.stdout)
    assert report["forked"] != "done"  # bwrap and the init took the other two
    assert report["fds"] < MIN_OPEN_FILES
    assert result.files["out.txt"] == b"INPUT"


def test_one_more_process_lets_the_program_fork() -> None:
    limits = Limits(processes=MIN_PROCESSES + 1, open_files=MIN_OPEN_FILES)
    result = run_python(FORK_ONCE, limits=limits, files=FILES)
    assert result.status is Status.OK, (result.status, result.stderr)
    assert json.loads(result.stdout)["forked"] == "done"


def test_the_smallest_limits_run_a_program_without_python() -> None:
    result = run(["/bin/true"], limits=Limits(**SMALLEST))  # type: ignore[arg-type]
    assert result.status is Status.OK, (result.status, result.stderr)


NON_ROOT_DRIVER = """
import json, sys
sys.path.insert(0, SHARED)
from pysandbox import Limits, run_python
from pysandbox._model.limits import MIN_OPEN_FILES, MIN_PROCESSES
limits = Limits(processes=MIN_PROCESSES, open_files=MIN_OPEN_FILES)
result = run_python(CODE, limits=limits, files={"in/data.txt": b"input"})
print(json.dumps({
    "status": result.status.name,
    "stdout": result.stdout.decode(errors="replace"),
    "stderr": result.stderr.decode(errors="replace")[-2000:],
    "out": result.files.get("out.txt", b"").decode(),
}))
"""


def test_the_smallest_limits_run_a_program_for_a_non_root_caller(
    unprivileged_pysandbox: tuple[str, Path],
) -> None:
    """bwrap's user namespace, and RLIMIT_NPROC over the caller's uid instead of a cgroup."""
    python, shared = unprivileged_pysandbox
    params = {"SHARED": str(shared), "CODE": FORK_ONCE}
    driver = "".join(f"{k} = {v!r}\n" for k, v in params.items()) + NON_ROOT_DRIVER
    out = run_unprivileged(python, driver)
    assert out.returncode == 0, out.stderr[-3000:]
    outcome = json.loads(out.stdout.strip().splitlines()[-1])
    assert outcome["status"] == "OK", outcome
    assert outcome["out"] == "INPUT", outcome
