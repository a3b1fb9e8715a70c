# SPDX-License-Identifier: MIT
"""A Jupyter notebook file (nbformat 4) read as hostile input: its cells, checked.

A student's ``.ipynb`` is the student's own making, so it is parsed as anything else
that comes from untrusted code: at most ``MAX_NOTEBOOK_BYTES``, by the bounded JSON
parser (``untrusted.loads``: nesting, numbers, UTF-8), and then only the few fields a
run needs are read and checked (``nbformat``, ``cells``, each cell's ``cell_type`` and
``source``).  Every refusal is a ``ValueError`` whose message says what is wrong and
where (``cell 3: source must be ...``), raised before anything runs.  Outputs, metadata
and attachments already in the file are ignored: they are not run, and nothing of them
is kept.
"""

from __future__ import annotations

from .record import record
from .untrusted import loads, shown

__all__ = [
    "CELL_TYPES",
    "MAX_NOTEBOOK_BYTES",
    "NotebookCell",
    "parse_notebook",
]

#: The largest notebook file read: 16 MiB (a notebook with its figures' outputs may be a
#: few MiB; its code is far less).
MAX_NOTEBOOK_BYTES = 16 * 2**20
#: The kinds of cells nbformat 4 knows; only ``code`` cells run.
CELL_TYPES = ("code", "markdown", "raw")


@record
class NotebookCell:
    """One cell of a notebook file, as it was written."""

    #: Its place in the notebook's ``cells``, counting from 0 (as ``nbformat`` does).
    index: int
    #: ``"code"``, ``"markdown"`` or ``"raw"``.
    cell_type: str
    #: Its text (a list of lines in the file is joined).
    source: str


def _source(value: object, index: int) -> str:
    """A cell's ``source``: a str, or a list of str joined as nbformat joins it."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(line, str) for line in value):
        return "".join(value)
    raise ValueError(f"cell {index}: source must be a str or a list of str, not {shown(value)}")


def _cell(value: object, index: int) -> NotebookCell:
    """The cell at ``index``, checked."""
    if not isinstance(value, dict):
        raise ValueError(f"cell {index}: must be a JSON object, not {shown(value)}")
    cell_type = value.get("cell_type")
    if cell_type not in CELL_TYPES:
        raise ValueError(
            f"cell {index}: cell_type must be one of {CELL_TYPES}, not {shown(cell_type)}"
        )
    if "source" not in value:
        raise ValueError(f"cell {index}: has no source")
    source = _source(value["source"], index)
    if cell_type == "code":
        _check_code(source, index)
    return NotebookCell(index, cell_type, source)


def _check_code(source: str, index: int) -> None:
    """A code cell's text must be UTF-8 text without NUL, as a session's code is."""
    if "\0" in source:
        raise ValueError(f"cell {index}: source must not contain NUL characters")
    try:
        source.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"cell {index}: source is not UTF-8 text: {exc.reason}") from None


def parse_notebook(data: bytes) -> tuple[NotebookCell, ...]:
    """The cells of the notebook file ``data`` (an nbformat 4 ``.ipynb``), in order.

    :raises ValueError: ``data`` is larger than ``MAX_NOTEBOOK_BYTES``, is not bounded
        JSON (``untrusted.loads``), is not an nbformat 4 notebook, or a cell is not a
        JSON object with a known ``cell_type`` and a ``source`` that is a str or a list
        of str; the message names the cell by its index.
    """
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise ValueError(
            f"the notebook is {len(data)} bytes, larger than {MAX_NOTEBOOK_BYTES} bytes"
        )
    try:
        notebook = loads(data, max_bytes=None)
    except ValueError as exc:
        raise ValueError(f"the notebook is not JSON that can be read safely: {exc}") from None
    if not isinstance(notebook, dict):
        raise ValueError(f"the notebook must be a JSON object, not {shown(notebook)}")
    version = notebook.get("nbformat")
    if type(version) is not int or version != 4:
        raise ValueError(f"the notebook must be nbformat 4, not nbformat {shown(version)}")
    cells = notebook.get("cells")
    if not isinstance(cells, list):
        raise ValueError(f"the notebook's cells must be a list, not {shown(cells)}")
    return tuple(_cell(cell, index) for index, cell in enumerate(cells))
