# SPDX-License-Identifier: MIT
"""Misspelled limit keywords, each through one entry point: ``tests/repo/test_typing_misspelled.py``
runs ``mypy --strict`` on this file against the installed package and wants an error on
exactly the lines that end with ``# E``.

Nothing here runs (the tests never import it): the functions only give mypy code to
check.
"""

from __future__ import annotations

import pysandbox
from pysandbox import Job, Limits, Runner
from pysandbox.pytest_plugin import Sandbox


def misspelled() -> None:
    Limits(wall_time=1.0, cpu_tme=0.5)  # E
    pysandbox.eval_in_sandbox("pass", mem_max_md=64)  # E
    pysandbox.run(["/bin/true"], limit=Limits())  # E
    pysandbox.run_python("pass", limits=Limits(memroy=2**20))  # E
    Runner(limts=Limits())  # E
    Job(code="pass", limits=Limits(procesess=4))  # E


def spelled_right() -> None:
    Limits(wall_time=1.0, cpu_time=0.5)
    pysandbox.eval_in_sandbox("pass", mem_max_mb=64)
    pysandbox.run(["/bin/true"], limits=Limits())
    pysandbox.run_python("pass", limits=Limits(memory=2**20))
    Runner(limits=Limits())
    Job(code="pass", limits=Limits(processes=4))


async def misspelled_in_a_grader(sandbox: Sandbox) -> None:
    sandbox.run(["/bin/true"], stdn=b"")  # E
    sandbox.run_python("pass", arg=["x"])  # E
    await sandbox.run_async(["/bin/true"], cancel=None)  # E
    await sandbox.run_python_async("pass", on_stdot=print)  # E


async def spelled_right_in_a_grader(sandbox: Sandbox) -> None:
    sandbox.run(["/bin/true"], stdin=b"", limits=Limits())
    sandbox.run_python("pass", args=["x"], env={"A": "1"})
    await sandbox.run_async(["/bin/true"], readable=["/etc"])
    await sandbox.run_python_async("pass", on_stdout=print)
