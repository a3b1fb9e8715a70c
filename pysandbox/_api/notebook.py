# SPDX-License-Identifier: MIT
"""``run_notebook``: a Jupyter notebook run cell by cell in one ``Session``, as a grader
runs a student's, each cell under limits of its own.

The file is read and checked whole (``_model/notebook_file.py``) and every code cell
translated to plain Python (``_model/ipython_lines.py``) before the first cell runs, so
a malformed notebook is refused before anything starts.  A cell that a limit ends is
rolled back by the session and the next cell runs in the state from before it; a cell
that raises is recorded, and the next runs in the state it left, as in Jupyter.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

from .._model.file import File
from .._model.ipython_lines import Translated, translate_cell
from .._model.limits import Limits
from .._model.notebook_file import MAX_NOTEBOOK_BYTES, NotebookCell, parse_notebook
from .._model.notebook_result import NotebookCellResult, NotebookResult
from .._model.record import replace
from .session import Session
from .session_args import positive_seconds

__all__ = ["run_notebook"]


def _notebook_bytes(notebook: object) -> bytes:
    """The notebook file's bytes: ``notebook`` itself, or the file at that path (read
    up to one byte past the cap, so a larger file is refused without reading it all)."""
    if isinstance(notebook, (bytes, bytearray, memoryview)):
        return bytes(notebook)
    if isinstance(notebook, (str, os.PathLike)):
        with open(notebook, "rb") as stream:
            return stream.read(MAX_NOTEBOOK_BYTES + 1)
    raise TypeError(
        f"notebook must be a path (str or os.PathLike) or the file's bytes, not "
        f"{type(notebook).__name__}"
    )


def _cell_limits(
    session: Session | None,
    limits: Limits | None,
    files: Mapping[str, bytes | File] | None,
    cell_wall_time: float | None,
    cell_cpu_time: float | None,
) -> Limits:
    """The limits every cell runs under; a ``TypeError``/``ValueError`` naming the
    argument that is wrong."""
    if session is not None:
        if not isinstance(session, Session):
            raise TypeError(f"session must be a Session or None, not {type(session).__name__}")
        if limits is not None or files is not None:
            raise ValueError(
                "limits and files are for the session run_notebook makes: give them to "
                "your Session instead"
            )
        limits = session.limits
    elif limits is not None and not isinstance(limits, Limits):
        raise TypeError(f"limits must be a Limits or None, not {type(limits).__name__}")
    base = limits if limits is not None else Limits()
    return replace(
        base,
        wall_time=base.wall_time
        if cell_wall_time is None
        else positive_seconds(cell_wall_time, "cell_wall_time"),
        cpu_time=base.cpu_time
        if cell_cpu_time is None
        else positive_seconds(cell_cpu_time, "cell_cpu_time"),
    )


def _run_cells(
    session: Session,
    cells: list[tuple[NotebookCell, Translated]],
    limits: Limits,
    stop_on_error: bool,
    on_cell: Callable[[NotebookCellResult], object] | None,
) -> list[NotebookCellResult]:
    """Each code cell run in ``session`` in order (``run_notebook``'s loop)."""
    done: list[NotebookCellResult] = []
    stopped = False
    for cell, translated in cells:
        record = NotebookCellResult(cell.index, cell.source, translated.code, translated.notes)
        if translated.code is not None and not stopped:
            result = session.run(
                translated.code, wall_time=limits.wall_time, cpu_time=limits.cpu_time
            )
            record = replace(record, result=result)
            stopped = result.lost or (stop_on_error and not result)
        done.append(record)
        if on_cell is not None:
            on_cell(record)
    return done


def run_notebook(
    notebook: str | os.PathLike[str] | bytes,
    *,
    session: Session | None = None,
    limits: Limits | None = None,
    files: Mapping[str, bytes | File] | None = None,
    cell_wall_time: float | None = None,
    cell_cpu_time: float | None = None,
    stop_on_error: bool = False,
    on_cell: Callable[[NotebookCellResult], object] | None = None,
) -> NotebookResult:
    """Run a Jupyter notebook's code cells in order in one session, each under limits of
    its own, and say what each did.

    Markdown and raw cells are not run.  IPython-only lines are made Python first: a
    ``%%`` cell magic skips its cell, ``%magic`` and help lines (``name?``) are skipped,
    ``!command`` runs with ``/bin/sh`` in the sandbox (each change is a note in the
    cell's record).  A cell that a limit ends (or that crashes the interpreter) is rolled
    back, and the next cell runs in the state from before it; a cell that raises is
    recorded, and the run goes on; once the session is lost, the cells left do not run.

    :param notebook: the ``.ipynb`` file's path, or its bytes.  Its text is the
        student's: it is read as hostile input (at most 16 MiB, bounded JSON).
    :param session: the session to run the cells in, left open and in the notebook's
        final state (for a grader's tests); its ``limits`` are the cells' defaults.
        None: a new ``Session(limits=limits, files=files)`` is made and closed before
        ``run_notebook`` returns.
    :param limits: the new session's limits (not with ``session``).
    :param files: files put in the new session's ``/sandbox`` first (not with
        ``session``).
    :param cell_wall_time: seconds each cell may take; default the session's
        ``limits.wall_time``.
    :param cell_cpu_time: CPU seconds each cell may use; default the session's
        ``limits.cpu_time``.
    :param stop_on_error: after the first cell that raises or is rolled back, run no
        more (their records say ``not_run``).
    :param on_cell: called with each code cell's ``NotebookCellResult`` as it ends (a
        progress report); what it raises propagates, and no more cells run.
    :raises TypeError, ValueError: a bad argument, or a notebook that is not a readable
        nbformat 4 notebook (the message names the cell), before anything runs.
    :raises OSError: the notebook's path cannot be read.
    :raises SandboxError: the session could not start, or had ended before a cell.
    """
    started = time.monotonic()
    cell_limits = _cell_limits(session, limits, files, cell_wall_time, cell_cpu_time)
    if on_cell is not None and not callable(on_cell):
        raise TypeError(f"on_cell must be callable or None, not {type(on_cell).__name__}")
    cells = parse_notebook(_notebook_bytes(notebook))
    code = [(cell, translate_cell(cell.source)) for cell in cells if cell.cell_type == "code"]
    if session is not None:
        done = _run_cells(session, code, cell_limits, stop_on_error, on_cell)
    else:
        with Session(limits=limits, files=files) as made:
            done = _run_cells(made, code, cell_limits, stop_on_error, on_cell)
    return NotebookResult(tuple(done), cell_limits, time.monotonic() - started)
