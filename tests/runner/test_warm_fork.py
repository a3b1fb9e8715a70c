# SPDX-License-Identifier: MIT
"""A process forked from one whose Runner keeps warm sandboxes (a pre-fork server's
worker, ``multiprocessing``) leaves the parent's sandboxes alone: the parent's next call
still takes its warm sandbox."""

from __future__ import annotations

import os

from support.warm import wait_ready

from pysandbox import Runner


def test_a_fork_leaves_the_parents_warm_sandbox_waiting() -> None:
    with Runner(warm=1) as runner:
        wait_ready(runner)
        child = os.fork()
        if child == 0:
            os._exit(0)  # its copy of the pool is dropped at the fork (KeptPool._forked)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert runner.warm_ready == 1
        result = runner.run_python("print(1)")
        assert runner._pool is not None and runner._pool.taken == 1
    assert result.stdout == b"1\n"
