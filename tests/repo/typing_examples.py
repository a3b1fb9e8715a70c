# SPDX-License-Identifier: MIT
"""The public API's types, as a user's type checker sees them: ``tests/test_habits.py``
runs ``mypy --strict`` on this file against the installed package and compares each
``reveal_type`` with the ``# R:`` comment on its line.

Nothing here runs (the tests never import it): the functions only give mypy code to
check.  The comments name each type by its public path, ``pysandbox.Result``.  mypy
reveals a class by the module that defines it (``pysandbox._types.Result`` today), and
the private modules are about to move, so the test reads ``pysandbox.<anything>.Name``
as ``pysandbox.Name``: only the final component must match, and only inside pysandbox.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pysandbox
from pysandbox import Job, Limits, Runner, run_async

if TYPE_CHECKING:
    from typing_extensions import reveal_type  # typing's own from Python 3.11 only


def calls() -> None:
    result = pysandbox.run(["/bin/true"])
    reveal_type(result)  # R: pysandbox.Result
    reveal_type(result.status)  # R: pysandbox.Status
    reveal_type(result.stdout)  # R: bytes
    reveal_type(pysandbox.run_python("print(1)"))  # R: pysandbox.Result
    filtered = pysandbox.run_python("pass", files_include=["out"], files_exclude=(".cache",))
    reveal_type(filtered.files)  # R: typing.Mapping[str, bytes]
    output = pysandbox.eval_in_sandbox("print(1)")
    reveal_type(output)  # R: pysandbox.ProcessOutput
    reveal_type(output.stdout)  # R: str
    reveal_type(Limits(cpu_time=0.5, memory=128 * 2**20))  # R: pysandbox.Limits
    reveal_type(pysandbox.selftest())  # R: pysandbox.SelftestReport
    reveal_type(pysandbox.selftest().ok)  # R: bool
    notebook = pysandbox.run_notebook("student.ipynb", cell_cpu_time=0.5)
    reveal_type(notebook)  # R: pysandbox.NotebookResult
    reveal_type(notebook.cells[0])  # R: pysandbox.NotebookCellResult
    reveal_type(notebook.cells[0].result)  # R: pysandbox.CellResult | None
    reveal_type(notebook.counts)  # R: dict[str, int]


def many() -> None:
    with Runner(max_concurrent=2) as runner:
        reveal_type(runner.run_python("pass"))  # R: pysandbox.Result
        job = Job(code="1", files_exclude=(".cache",))
        reveal_type(job.files_exclude)  # R: tuple[str, ...] | None
        for outcome in runner.map([Job(code="print(1)")]):
            reveal_type(outcome)  # R: pysandbox.Outcome
            reveal_type(outcome.result)  # R: pysandbox.Result | None
    with Runner(max_concurrent=3, short_slots=1, short_wall_time=2.5) as runner:
        reveal_type(runner.short_slots)  # R: int
        reveal_type(runner.short_wall_time)  # R: float | None


async def later() -> None:
    reveal_type(await run_async(["/bin/true"]))  # R: pysandbox.Result
    reveal_type(await pysandbox.run_python_async("pass"))  # R: pysandbox.Result


def rich() -> None:
    bundle = pysandbox.Bundle({"text/plain": "x"}, max_bytes=1 << 20)
    reveal_type(bundle)  # R: pysandbox.Bundle
    reveal_type(bundle["text/plain"])  # R: bytes | str
    reveal_type(bundle.dropped)  # R: tuple[str, ...]
    reveal_type(bundle.to_json())  # R: dict[str, Any]
