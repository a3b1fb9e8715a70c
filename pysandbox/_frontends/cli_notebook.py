# SPDX-License-Identifier: MIT
"""``pysandbox notebook FILE.ipynb``: a notebook's code cells run in one session, each
under limits of its own, and what each did.

The report goes to stdout as the cells end: a line per cell (``[3] ok, wall 0.01 s``,
``[7] cpu_time_exceeded (limit 1 s), rolled back``), then its notes, its value, the
last lines of its stdout and stderr and its error's traceback, indented; one summary
line ends it on stderr.  With ``--json``, stdout holds exactly one JSON object,
``NotebookResult.to_dict()``.  Everything from the notebook or the sandbox is escaped
(``escape_report``) before it is printed.  The exit status is 0 when every code cell
ran and raised nothing, 1 otherwise (``EXIT_CELLS_FAILED``).
"""

from __future__ import annotations

import sys

from .._model.escape import escape_report
from .._model.record import replace
from .._model.units import parse_seconds
from .._model.verdict import LIMIT_STATUSES, limit_hit
from .cli_run import input_files
from .options import add_limit_options, argparse_type, limits_from
from .terminal import say

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from .._model.limits import Limits
    from .._model.notebook_result import NotebookCellResult, NotebookResult
    from .options import Usage

__all__ = ["EXIT_CELLS_FAILED", "add_notebook_options", "cell_report", "notebook_command"]

#: Some code cell raised, was rolled back, lost the session or did not run.
EXIT_CELLS_FAILED = 1
#: The last lines of a cell's stdout, stderr and traceback that the report shows.
TAIL_LINES = 10


def add_notebook_options(command: argparse.ArgumentParser) -> None:
    """``notebook``'s options: the notebook, the cells' limits, the report's form, and
    the session's limits and files."""
    command.add_argument("notebook", metavar="FILE.ipynb", help="the notebook ('-': our stdin)")
    command.add_argument(
        "--cell-wall-time",
        type=argparse_type(parse_seconds),
        metavar="SECONDS",
        help="wall time of each cell (default: --wall-time)",
    )
    command.add_argument(
        "--cell-cpu-time",
        type=argparse_type(parse_seconds),
        metavar="SECONDS",
        help="CPU time of each cell (default: --cpu-time)",
    )
    command.add_argument(
        "--stop-on-error",
        action="store_true",
        help="run no more cells after one that raised or was rolled back",
    )
    command.add_argument(
        "--file",
        dest="files",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="copy host file PATH into /sandbox as NAME before the first cell (PATH alone: "
        "its base name); repeatable",
    )
    command.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (NotebookResult.to_dict()) on stdout instead of the report",
    )
    command.add_argument(
        "--whole-displays",
        action="store_true",
        help="with --json: each display whole (images in base64), not only its types' sizes",
    )
    add_limit_options(command)


def _tail(label: str, text: str) -> list[str]:
    """The last ``TAIL_LINES`` lines of ``text``, each after ``label``."""
    lines = text.rstrip("\n").split("\n") if text.strip() else []
    shown = [f"    {label}: {line}" for line in lines[-TAIL_LINES:]]
    if len(lines) > TAIL_LINES:
        shown.insert(0, f"    {label}: ... ({len(lines) - TAIL_LINES} lines before)")
    return shown


def _headline(cell: NotebookCellResult, limits: Limits) -> str:
    """The cell's first line: its index, what became of it, and its wall time."""
    result = cell.result
    if result is None:
        return f"[{cell.index}] {cell.state.replace('_', ' ')}"
    if result.lost:
        return f"[{cell.index}] lost the session: {result.reason}"
    if result.rolled_back:
        hit = limit_hit(result, limits) if result.status in LIMIT_STATUSES else ""
        return f"[{cell.index}] {result.status.value}{hit}, rolled back"
    if result.error is not None:
        return f"[{cell.index}] raised {result.error.type}, wall {result.wall_time:.2f} s"
    return f"[{cell.index}] ok, wall {result.wall_time:.2f} s"


def cell_report(cell: NotebookCellResult, limits: Limits) -> str:
    """What the report shows of one code cell, escaped: its headline, then its notes,
    value, stdout, stderr and traceback (each cut to its last lines), indented."""
    lines = [_headline(cell, limits)]
    lines += [f"    note: {note}" for note in cell.notes]
    result = cell.result
    if result is not None:
        if result.value is not None:
            lines += _tail("value", result.value)
        lines += _tail("stdout", result.stdout.decode("utf-8", "replace"))
        lines += _tail("stderr", result.stderr.decode("utf-8", "replace"))
        if result.error is not None:
            lines += _tail("error", result.error.traceback)
    return escape_report("\n".join(lines))


def _summary(notebook: NotebookResult) -> str:
    """The last line: the cells counted by what became of them."""
    counts = [
        f"{count} {state.replace('_', ' ')}" for state, count in notebook.counts.items() if count
    ]
    shown = ", ".join(counts) or "no code cells"
    cells = len(notebook.cells)
    return f"pysandbox: notebook: {cells} code cells, wall {notebook.wall_time:.2f} s: {shown}"


def _notebook_input(parser: Usage, path: str) -> str | bytes:
    """The notebook: its path, or with ``-`` our stdin's bytes."""
    if path != "-":
        return path
    from .._model.notebook_file import MAX_NOTEBOOK_BYTES

    return sys.stdin.buffer.read(MAX_NOTEBOOK_BYTES + 1)


def notebook_command(parser: Usage, options: argparse.Namespace) -> int:
    """Run the notebook and report it; usage errors (2) for a bad option or notebook."""
    from .._api.notebook import run_notebook  # the launch and the C core: not for --help

    limits = limits_from(options)
    files = input_files(parser, options.files)
    cell_limits = replace(
        limits,
        wall_time=options.cell_wall_time or limits.wall_time,
        cpu_time=options.cell_cpu_time or limits.cpu_time,
    )

    def report(cell: NotebookCellResult) -> None:
        print(cell_report(cell, cell_limits), flush=True)

    try:
        notebook = run_notebook(
            _notebook_input(parser, options.notebook),
            limits=limits,
            files=files,
            cell_wall_time=options.cell_wall_time,
            cell_cpu_time=options.cell_cpu_time,
            stop_on_error=options.stop_on_error,
            on_cell=None if options.json else report,
        )
    except OSError as exc:
        parser.error(f"cannot read {options.notebook}: {exc.strerror or exc}")
    except (TypeError, ValueError) as exc:
        parser.error(f"{options.notebook}: {exc}")
    if options.json:
        import json  # only for --json

        print(json.dumps(notebook.to_dict(displays=options.whole_displays)))
    else:
        say(escape_report(_summary(notebook)))
    return 0 if notebook else EXIT_CELLS_FAILED
