# SPDX-License-Identifier: MIT
"""``run_notebook``: a notebook's code cells run in order in one real session, each under
limits of its own; a cell a limit ends is rolled back and the others still run; a
malformed notebook is refused before anything runs.

Most tests share one session (each uses names of its own, so none spoils another);
those that need a session of their own (a new one made and closed, a lost one) say so.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.processes import children_of
from support.timing import cpu, slow

from pysandbox import (
    Limits,
    NotebookCellResult,
    NotebookResult,
    Session,
    Status,
    run_notebook,
)
from pysandbox._model.notebook_file import MAX_NOTEBOOK_BYTES

LIMITS = Limits(wall_time=slow(5), cpu_time=cpu(1))


def notebook(*sources: str, markdown: str | None = None) -> bytes:
    """An nbformat 4 notebook of code cells ``sources``, after a markdown cell when
    ``markdown`` is given."""
    cells = [] if markdown is None else [{"cell_type": "markdown", "source": markdown}]
    cells += [
        {"cell_type": "code", "source": source.splitlines(keepends=True), "outputs": []}
        for source in sources
    ]
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}).encode()


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with Session(limits=LIMITS) as shared:
        yield shared


def test_cells_build_state_and_the_session_keeps_the_final_state(session: Session) -> None:
    ran = run_notebook(
        notebook(
            "import math\nsquares = []",
            "squares += [n * n for n in range(4)]",
            "sum(squares)",
            markdown="# Intro",
        ),
        session=session,
    )
    assert isinstance(ran, NotebookResult) and ran.ok and ran
    assert [cell.index for cell in ran.cells] == [1, 2, 3]  # the markdown cell is index 0
    assert ran.cells[2].result is not None and ran.cells[2].result.value == "14"
    assert ran.counts["ok"] == 3 and ran.limits == LIMITS
    assert session.run("squares, math.floor(2.5)").value == "([0, 1, 4, 9], 2)"


def test_one_infinite_loop_among_thirty_cells_costs_only_its_own_cell(session: Session) -> None:
    sources = ["loop_log = []"] + [f"loop_log.append({n})" for n in range(1, 29)] + ["loop_log"]
    sources[14] = "loop_log.append('looping')\nwhile True:\n    pass"
    ran = run_notebook(notebook(*sources), session=session, cell_cpu_time=cpu(0.5))
    assert len(ran.cells) == 30 and not ran
    assert ran.counts == {
        "ok": 29,
        "error": 0,
        "rolled_back": 1,
        "lost": 0,
        "skipped": 0,
        "not_run": 0,
    }
    looped = ran.cells[14].result
    assert looped is not None and looped.rolled_back and looped.status is Status.CPU_TIME_EXCEEDED
    last = ran.cells[29].result
    assert last is not None and last.value == repr([n for n in range(1, 29) if n != 14])
    assert ran.limits.cpu_time == cpu(0.5) and ran.limits.wall_time == LIMITS.wall_time


def test_a_cell_that_raises_is_recorded_and_the_next_runs_in_the_state_it_left(
    session: Session,
) -> None:
    ran = run_notebook(notebook("raised = 1", "raised = 2\n1 / 0", "raised"), session=session)
    states = [cell.state for cell in ran.cells]
    assert states == ["ok", "error", "ok"] and not ran
    raised = ran.cells[1].result
    error = raised.error if raised is not None else None
    assert error is not None and error.type == "ZeroDivisionError" and "<cell-" in error.traceback
    assert ran.cells[2].result is not None and ran.cells[2].result.value == "2"


def test_stop_on_error_runs_no_more_cells(session: Session) -> None:
    ran = run_notebook(
        notebook("stopped = 1", "1 / 0", "stopped = 2"), session=session, stop_on_error=True
    )
    assert [cell.state for cell in ran.cells] == ["ok", "error", "not_run"]
    assert ran.cells[2].result is None and session.run("stopped").value == "1"


def test_a_memory_hungry_cell_is_rolled_back_and_the_next_runs(session: Session) -> None:
    ran = run_notebook(
        notebook("hungry = 'before'", "hungry = 'during'\nhog = bytearray(512 * 2**20)", "hungry"),
        session=session,
    )
    assert [cell.state for cell in ran.cells] == ["ok", "rolled_back", "ok"]
    hog = ran.cells[1].result
    assert hog is not None and hog.status is Status.MEMORY_EXCEEDED, hog
    assert ran.cells[2].result is not None and ran.cells[2].result.value == "'before'"


def test_ipython_lines_are_skipped_or_run_in_the_shell_as_documented(session: Session) -> None:
    ran = run_notebook(
        notebook(
            "%matplotlib inline\nmagic = 1\nprint('py')\n!echo from-sh $((6 * 7))\nlen?",
            "%%bash\necho never",
            "listed = !printf 'a\\nb\\n'\nlisted",
            'doc = """\n%kept\nreally?\n"""\ndoc',
        ),
        session=session,
    )
    first, bash, listed, doc = ran.cells
    assert first.result is not None and first.result.stdout == b"py\nfrom-sh 42\n"
    assert first.result.value is None  # a shell line is never the cell's value
    assert [note.split(":")[0] for note in first.notes] == ["line 1", "line 4", "line 5"]
    assert bash.state == "skipped" and bash.result is None and "%%bash" in bash.notes[0]
    assert listed.result is not None and listed.result.value == "['a', 'b']"
    assert doc.result is not None and doc.result.value == repr("\n%kept\nreally?\n")
    assert ran.ok and ran.counts["skipped"] == 1


def test_the_json_form_names_displays_by_type_and_size(session: Session) -> None:
    cell = "class Shown:\n    def _repr_html_(self):\n        return '<b>hi</b>'\ndisplay(Shown())"
    ran = run_notebook(notebook(cell), session=session)
    (shown,) = ran.to_dict()["cells"][0]["displays"]
    assert shown["sizes"]["text/html"] == len("<b>hi</b>") and "text/plain" in shown["sizes"]
    (whole,) = ran.to_dict(displays=True)["cells"][0]["displays"]
    assert whole["data"]["text/html"] == "<b>hi</b>"
    json.dumps(ran.to_dict(displays=True), allow_nan=False)


def test_on_cell_sees_each_code_cell_as_it_ends_and_can_stop_the_run(session: Session) -> None:
    seen: list[NotebookCellResult] = []
    run_notebook(
        notebook("seen = 1", "%%time\nx", "seen += 1"), session=session, on_cell=seen.append
    )
    assert [cell.state for cell in seen] == ["ok", "skipped", "ok"]

    def stop(cell: NotebookCellResult) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_notebook(notebook("stop = 1", "stop = 2"), session=session, on_cell=stop)
    assert session.run("stop").value == "1"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{not json", "not JSON"),
        (b'{"cells": ' + b"[" * 64 + b"]" * 64 + b"}", "nested 65 levels deep"),
        (b" " * (MAX_NOTEBOOK_BYTES + 1), "larger than"),
        (json.dumps({"nbformat": 3, "worksheets": []}).encode(), "nbformat 4"),
        (
            json.dumps({"nbformat": 4, "cells": [{"cell_type": "code", "source": 1}]}).encode(),
            "cell 0: source must be a str or a list of str",
        ),
    ],
    ids=["not-json", "nesting-bomb", "oversized", "nbformat-3", "source-type"],
)
def test_a_malformed_notebook_is_refused_before_anything_runs(
    session: Session, data: bytes, message: str
) -> None:
    """The valid cells before the malformed part do not run either."""
    good = notebook("refused_but_ran = True")[:-2]  # its cells list left open
    with pytest.raises(ValueError, match=message):
        run_notebook(data, session=session)
    with pytest.raises(ValueError, match="cell 1: source must be"):
        run_notebook(good + b', {"cell_type": "code", "source": null}]}', session=session)
    assert session.run("'refused_but_ran' in globals()").value == "False"


def test_a_path_is_read_and_a_new_session_is_made_with_files_and_closed(tmp_path: Path) -> None:
    path = tmp_path / "student.ipynb"
    path.write_bytes(notebook("open('data.txt').read()"))
    before = set(children_of(os.getpid()))
    ran = run_notebook(path, limits=LIMITS, files={"data.txt": b"42"})
    assert ran.cells[0].result is not None and ran.cells[0].result.value == "'42'"
    assert set(children_of(os.getpid())) <= before  # its sandbox is gone
    (without,) = run_notebook(str(path)).cells  # a new session: no data.txt
    assert without.result is not None and without.result.error is not None
    assert without.result.error.type == "FileNotFoundError"


def test_a_lost_session_runs_no_more_cells() -> None:
    with Session(limits=LIMITS, cpu_budget=cpu(1)) as own:
        ran = run_notebook(
            notebook("x = 1", "while True:\n    pass", "x"),
            session=own,
            cell_cpu_time=30,
            cell_wall_time=slow(30),
        )
    assert [cell.state for cell in ran.cells] == ["ok", "lost", "not_run"]


def test_bad_arguments_are_refused_naming_them(session: Session, tmp_path: Path) -> None:
    data = notebook("x = 1")
    with pytest.raises(ValueError, match="give them to your Session"):
        run_notebook(data, session=session, limits=LIMITS)
    with pytest.raises(ValueError, match="give them to your Session"):
        run_notebook(data, session=session, files={"a": b""})
    with pytest.raises(TypeError, match="notebook must be a path"):
        run_notebook(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="session must be a Session"):
        run_notebook(data, session="s")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cell_cpu_time must be"):
        run_notebook(data, session=session, cell_cpu_time=0)
    with pytest.raises(TypeError, match="cell_wall_time must be"):
        run_notebook(data, session=session, cell_wall_time="1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="on_cell must be callable"):
        run_notebook(data, session=session, on_cell=1)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        run_notebook(tmp_path / "missing.ipynb", session=session)
