# SPDX-License-Identifier: MIT
"""analysis.ipynb, a notebook: run cell by cell once in the module's session (each cell
under the CPU limit of ``setup_cpu_time``: one that loops forever is rolled back and
the next runs), then graded in the state it left: its functions called, its variables
read, its cells' outcomes checked."""

from __future__ import annotations

import pytest

from pysandbox.pytest_plugin import SessionSandbox

pytestmark = pytest.mark.sandbox_session(notebook="analysis.ipynb", setup_cpu_time=1)


@pytest.mark.points(1)
def test_every_cell_runs(sandbox_session: SessionSandbox) -> None:
    notebook = sandbox_session.notebook
    assert notebook is not None
    failed = [f"[{cell.index}] {cell.state}" for cell in notebook.cells if not cell]
    assert not failed, f"cells that did not run cleanly: {', '.join(failed)}"


@pytest.mark.points(2)
def test_mean(sandbox_session: SessionSandbox) -> None:
    assert sandbox_session.call("mean", [1, 2, 3, 6]) == pytest.approx(3.0)
    assert sandbox_session.pull("average") == {"average": pytest.approx(13.7)}


@pytest.mark.points(3)
def test_warmest(sandbox_session: SessionSandbox) -> None:
    """A point per case: partial credit."""
    cases = [(([1, 5, 3], 1), [5]), (([1, 5, 3], 2), [5, 3]), (([2, 2, 1], 2), [2, 2])]
    right = sum(sandbox_session.call("warmest", *args) == expected for args, expected in cases)
    sandbox_session.award(right)
    assert right == len(cases), f"{right} of {len(cases)} cases right"
