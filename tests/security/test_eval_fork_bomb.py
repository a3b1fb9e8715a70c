"""eval_in_sandbox caps processes too: the reference let a fork bomb exhaust the host."""

from __future__ import annotations

import subprocess
import threading
import time
import uuid

from conftest import pids_with_marker

from pysandbox import eval_in_sandbox

BOMB = """
import os, sys, time
forked = 0
try:
    while forked < 1000:
        if os.fork() == 0:
            time.sleep(30)  # {marker}
            os._exit(0)
        forked += 1
except OSError:
    pass
print(forked)
"""


def test_fork_bomb_is_refused_and_the_host_can_still_fork() -> None:
    marker = f"bomb-{uuid.uuid4().hex}"
    host_failures: list[BaseException] = []
    stop = threading.Event()

    def host_forks() -> None:
        while not stop.is_set():
            try:
                subprocess.run(["/bin/true"], check=True, timeout=10)
            except BaseException as exc:  # recorded: the host must never fail to fork
                host_failures.append(exc)

    forker = threading.Thread(target=host_forks)
    forker.start()
    try:
        result = eval_in_sandbox(BOMB.replace("{marker}", marker), timeout_max_time_sec=10)
    finally:
        stop.set()
        forker.join()
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) < 64
    assert host_failures == []
    assert pids_with_marker(marker) == []


def test_the_program_cannot_change_the_inits_limits() -> None:
    """Same uid as the init, but prlimit on another process is refused by the filter:
    otherwise the program could starve the init and lose its own report."""
    from pysandbox import run_python

    code = (
        "import resource\n"
        "try:\n"
        "    resource.prlimit(1, resource.RLIMIT_NOFILE, (3, 3)); print('changed')\n"
        "except OSError as exc:\n"
        "    print(exc.errno)\n"
    )
    result = run_python(code, files={"kept.txt": b"x"})
    assert result.stdout == b"1\n"
    assert dict(result.files) == {"kept.txt": b"x"} and not result.files_truncated


def test_a_bomb_at_its_cap_does_not_starve_other_sandboxes() -> None:
    """Each sandbox counts its own processes: while one holds all 64, others still run
    (with one uid shared by every sandbox, their init could not fork)."""
    holder = BOMB.replace("print(forked)", "print(forked); time.sleep(3)")
    held: list[str] = []
    bomb = threading.Thread(
        target=lambda: held.append(eval_in_sandbox(holder.replace("{marker}", "x")).stdout)
    )
    bomb.start()
    try:
        time.sleep(1.0)  # the bomb has reached its cap by now
        others = [eval_in_sandbox(f"print({i})").stdout for i in range(5)]
    finally:
        bomb.join()
    assert others == [str(i) for i in range(5)]
    assert held and int(held[0]) > 50
