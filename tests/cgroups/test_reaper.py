# SPDX-License-Identifier: MIT
"""``pysandbox._cgroups.reaper.Reaper``: the background clean-up the cgroup layer hands its
finished groups to (its use there is tested in ``test_cgroup.py``, ``test_launch.py`` and
``security/test_caller_death.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from support.timing import PROMPTLY

from pysandbox._cgroups.reaper import Reaper


class _Log:
    """What a reaper's callbacks did, and in which thread."""

    def __init__(self) -> None:
        self.removed: list[object] = []
        self.forgotten: list[object] = []
        self.sweeps = 0
        self.exits = 0
        self.threads: set[int] = set()
        self.gate = threading.Event()
        self.gate.set()
        #: Set once a removal has begun (and waits for ``gate``).
        self.began = threading.Event()

    def remove(self, item: object) -> None:
        self.began.set()
        self.gate.wait(PROMPTLY)
        self.threads.add(threading.get_ident())
        if item == "raise":
            raise OSError("a removal that fails")
        self.removed.append(item)

    def sweep(self) -> None:
        self.sweeps += 1

    def at_exit(self) -> None:
        self.exits += 1

    def reaper(self) -> Reaper[object]:
        return Reaper(
            name="test-reaper",
            remove=self.remove,
            forget=self.forgotten.append,
            sweep=self.sweep,
            at_exit=self.at_exit,
            exit_seconds=PROMPTLY,
        )


def test_items_are_removed_in_order_in_another_thread() -> None:
    log = _Log()
    reaper = log.reaper()
    for item in range(5):
        reaper.remove(item)
    assert reaper.drain(PROMPTLY)
    assert log.removed == [0, 1, 2, 3, 4]
    assert threading.get_ident() not in log.threads and len(log.threads) == 1


def test_sweeps_asked_for_while_the_thread_is_busy_run_once() -> None:
    log = _Log()
    reaper = log.reaper()
    log.gate.clear()
    reaper.remove("slow")
    for _ in range(10):
        reaper.sweep()
    assert not reaper.drain(0.05), "drain returned while a job was held"
    log.gate.set()
    assert reaper.drain(PROMPTLY)
    assert log.removed == ["slow"] and log.sweeps == 1


def test_a_job_that_raises_does_not_stop_the_next() -> None:
    log = _Log()
    reaper = log.reaper()
    reaper.remove("raise")
    reaper.remove("after")
    reaper.sweep()
    assert reaper.drain(PROMPTLY)
    assert log.removed == ["after"] and log.sweeps == 1


def test_a_forked_child_forgets_the_parents_jobs_and_runs_its_own() -> None:
    log = _Log()
    reaper = log.reaper()
    log.gate.clear()
    reaper.remove("held")
    assert log.began.wait(PROMPTLY)  # the thread has taken it: the parent's, in flight
    reaper.remove("parent's")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own thread, none of the parent's jobs
        status = 1
        try:
            log.gate.set()
            reaper.remove("child's")
            drained = reaper.drain(PROMPTLY)
            report = f"{drained} {log.removed} {log.forgotten}"
            os.write(write_end, report.encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end) as stream:
        report = stream.read()
    _, status = os.waitpid(pid, 0)
    log.gate.set()
    assert reaper.drain(PROMPTLY)
    assert os.waitstatus_to_exitcode(status) == 0
    assert report == 'True ["child\'s"] ["parent\'s"]'
    assert log.removed == ["held", "parent's"]


def test_at_exit_the_jobs_left_run_then_the_exit_hook(tmp_path: Path) -> None:
    out = tmp_path / "log"
    program = textwrap.dedent(
        f"""
        from pysandbox._cgroups.reaper import Reaper
        log = open({str(out)!r}, "w")
        reaper = Reaper(
            name="exit-test",
            remove=lambda item: log.write(f"removed {{item}}\\n"),
            forget=lambda item: None,
            sweep=lambda: log.write("swept\\n"),
            at_exit=lambda: log.write("exit hook\\n") and log.flush(),
            exit_seconds=5,
        )
        for item in range(3):
            reaper.remove(item)
        reaper.sweep()
        """
    )
    subprocess.run([sys.executable, "-c", program], check=True, timeout=PROMPTLY * 4)
    lines = out.read_text().splitlines()
    assert lines == ["removed 0", "removed 1", "removed 2", "swept", "exit hook"]
