# SPDX-License-Identifier: MIT
"""The next call's group made ahead (``pysandbox._cgroups.ahead``), through real calls:
it is made off the calls' path, each call still gets exactly its own limits, and no
group made ahead outlives ``drain``, the process's exit or a fork."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pysandbox
from pysandbox import Limits, Status
from pysandbox._cgroups import ahead
from pysandbox._cgroups import group as group_module
from pysandbox._cgroups.ahead import drain
from pysandbox._cgroups.mounts import discover
from pysandbox._cgroups.node import PARENT
from pysandbox._cgroups.probe import probe

MiB = 2**20
#: The name of the thread that makes groups ahead.
AHEAD = "pysandbox-cgroup-ahead"


@pytest.fixture(autouse=True)
def _with_cgroups() -> Iterator[None]:
    """Skip where this caller gets no per-sandbox group; start and end with none made
    ahead, so that each test sees its own calls only."""
    support = probe()
    if not (support.pids and support.memory):
        pytest.skip(f"no per-sandbox cgroup here: {support.reason}")
    assert drain(30)
    yield
    assert drain(30)


def groups_of(pid: int) -> set[Path]:
    """The groups ``pid`` made, in every hierarchy."""
    found: set[Path] = set()
    for home in {hierarchy.home for hierarchy in discover().values()}:
        parent = Path(home, PARENT)
        if parent.is_dir():
            found |= {p for p in parent.iterdir() if p.name.startswith(f"pysandbox-{pid}-")}
    return found


@pytest.fixture
def made_by(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The threads that make each group from now on, in order."""
    threads: list[str] = []
    real = group_module.SandboxCgroup._create

    def create(self: group_module.SandboxCgroup, *args: Any) -> None:
        threads.append(threading.current_thread().name)
        real(self, *args)

    monkeypatch.setattr(group_module.SandboxCgroup, "_create", create)
    return threads


def _made(made_by: list[str], count: int) -> None:
    """Wait until ``count`` groups were made and, when the last was the thread's, it
    waits for the next call."""
    deadline = time.monotonic() + 30
    while len(made_by) < count or (made_by[-1] == AHEAD and ahead._ahead._waiting is None):
        assert time.monotonic() < deadline, made_by
        time.sleep(0.005)


def test_calls_with_the_same_controllers_find_their_group_made(made_by: list[str]) -> None:
    """The first two calls make their own groups; once two calls in a row limited the
    same controllers, each next call's group is made by the thread between calls,
    whichever API makes the call."""
    calls = [
        lambda: pysandbox.eval_in_sandbox("print(1)").stdout == "1",
        lambda: pysandbox.eval_in_sandbox("print(1)").stdout == "1",
        lambda: pysandbox.run_python("print(1)").stdout == b"1\n",
        lambda: pysandbox.run(["/bin/true"]).status is Status.OK,
        lambda: pysandbox.eval_in_sandbox("print(1)", mem_max_mb=200).stdout == "1",
    ]
    for number, call in enumerate(calls):
        assert call()
        _made(made_by, number + 1 + int(number >= 1))
    caller = threading.current_thread().name
    assert made_by[:2] == [caller, caller], made_by
    assert caller not in made_by[2:], made_by


#: Five processes of 30 MiB each, 150 MiB in all, none above the per-process cap of
#: 60 MiB: only the whole sandbox's memory cap (its cgroup's) can stop them.  Prints the
#: wait status of each.
FIVE_PROCESSES = """
import os, time
kids = []
for _ in range(5):
    pid = os.fork()
    if pid == 0:
        held = b"x" * (30 * 2**20)
        time.sleep(1)
        os._exit(0)
    kids.append(pid)
print(sorted(os.waitpid(kid, 0)[1] for kid in kids))
"""


def test_a_call_gets_its_own_limits_from_a_group_made_ahead(made_by: list[str]) -> None:
    """A group made ahead has no limits until a call takes it: after calls that allowed
    300 MiB, a call that allows 60 MiB takes the group made ahead and is held to its
    own cap (the kernel kills the processes beyond it)."""

    def five(memory: int) -> list[int]:
        # CPU time for five interpreters under emulation (the cgroup v2 lab's guest)
        limits = Limits(memory=memory, disk=MiB, processes=16, cpu_time=30, wall_time=120)
        result = pysandbox.run_python(FIVE_PROCESSES, limits=limits)
        assert result.status is Status.OK, result
        return [int(status) for status in result.stdout.decode().strip("[]\n").split(",")]

    for _ in range(2):
        assert five(300 * MiB) == [0] * 5
    _made(made_by, 3)
    tight = five(60 * MiB)
    assert tight.count(9) >= 2, tight
    assert made_by.count(threading.current_thread().name) == 2, made_by


def test_drain_leaves_no_group_and_no_descriptor_made_ahead(made_by: list[str]) -> None:
    """A group waits after calls; ``drain`` discards it with its directories and
    descriptors."""
    before_groups, before_fds = groups_of(os.getpid()), set(os.listdir("/proc/self/fd"))
    for _ in range(3):
        assert pysandbox.eval_in_sandbox("print(1)").stdout == "1"
    _made(made_by, 4)
    assert groups_of(os.getpid()) - before_groups, "no group waits: the test proves nothing"
    assert drain(30)
    assert groups_of(os.getpid()) <= before_groups
    assert set(os.listdir("/proc/self/fd")) <= before_fds


def test_a_bad_limit_while_a_group_waits_takes_nothing_and_leaks_nothing(
    made_by: list[str],
) -> None:
    """A call whose limits are refused raises before it takes the group made ahead, and
    ``drain`` still ends everything made ahead, promptly."""
    before_groups, before_fds = groups_of(os.getpid()), set(os.listdir("/proc/self/fd"))
    for _ in range(2):
        assert pysandbox.eval_in_sandbox("print(1)").stdout == "1"
    _made(made_by, 3)
    for _ in range(3):
        with pytest.raises(ValueError, match="memory"):
            pysandbox.run_python("pass", limits=Limits(memory=2**62))
    assert ahead._ahead._waiting is not None, "the refused calls took the group made ahead"
    assert drain(30)
    assert groups_of(os.getpid()) <= before_groups
    assert set(os.listdir("/proc/self/fd")) <= before_fds


def test_a_group_made_ahead_is_removed_at_exit() -> None:
    """A process that exits with a group waiting leaves no group behind (no later
    call's sweep needed)."""
    script = (
        "import os, time, pysandbox\n"
        "from pysandbox._cgroups import ahead\n"
        "for _ in range(3):\n"
        "    assert pysandbox.eval_in_sandbox('print(1)').stdout == '1'\n"
        "deadline = time.monotonic() + 30\n"
        "while ahead._ahead._waiting is None:\n"
        "    assert time.monotonic() < deadline, 'no group was made ahead'\n"
        "    time.sleep(0.01)\n"
        "print(os.getpid())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert groups_of(int(done.stdout)) == set(), done.stderr


def test_a_forked_child_makes_its_own_group_and_leaves_the_parents(
    made_by: list[str],
) -> None:
    """The child of a fork does not take the group its parent made ahead (it closes
    its descriptors of it and removes nothing: the child's call makes its own); the
    parent's next call takes it."""
    for _ in range(2):
        assert pysandbox.eval_in_sandbox("print(1)").stdout == "1"
    _made(made_by, 3)
    caller = threading.current_thread().name
    pid = os.fork()
    if pid == 0:
        ok = False
        try:
            made, waiting = len(made_by), ahead._ahead._waiting
            ok = pysandbox.eval_in_sandbox("print(2)").stdout == "2"
            ok = ok and waiting is None and made_by[made:] == [caller]
        finally:
            os._exit(0 if ok else 1)
    assert os.waitpid(pid, 0)[1] == 0
    assert pysandbox.eval_in_sandbox("print(3)").stdout == "3"
    assert made_by.count(caller) == 2, made_by
