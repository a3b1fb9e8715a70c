# SPDX-License-Identifier: MIT
"""``NotebookResult``: what a notebook's run in a session did, cell by cell, as data,
and its bounded JSON form."""

from __future__ import annotations

from .limits import Limits
from .record import record
from .rich import Bundle
from .session_result import CellResult

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "CELL_STATES",
    "DEFAULT_TEXT_CAP",
    "NotebookCellResult",
    "NotebookResult",
]

#: What became of a code cell (``NotebookCellResult.state``): it ran and raised nothing;
#: it raised; a limit ended it and it was rolled back; the session was lost in it; it
#: was IPython's (a ``%%`` cell magic) and did not run; it did not run, as an earlier
#: cell stopped the notebook (``stop_on_error``, a lost session).
CELL_STATES = ("ok", "error", "rolled_back", "lost", "skipped", "not_run")
#: ``to_dict()``'s default cap on the characters of each output text of a cell.
DEFAULT_TEXT_CAP = 64 * 1024


@record(unhashed=("result",))
class NotebookCellResult:
    """One code cell of a notebook, and what its run did."""

    #: Its place in the notebook's ``cells``, counting from 0 (markdown and raw cells
    #: included, as ``nbformat`` counts).
    index: int
    #: Its text as the notebook has it.
    source: str
    #: What ran: ``source`` with its IPython-only lines made Python; None when the cell
    #: was skipped whole (a ``%%`` cell magic).
    code: str | None
    #: What was changed to make it Python, a line of words each
    #: (``line 1: '%matplotlib inline' is IPython's: skipped``).
    notes: tuple[str, ...] = ()
    #: The session call's result; None when the cell did not run.
    result: CellResult | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "notes", tuple(self.notes))

    @property
    def state(self) -> str:
        """One of ``CELL_STATES``: what became of the cell."""
        result = self.result
        if result is None:
            return "skipped" if self.code is None else "not_run"
        if result.lost:
            return "lost"
        if result.rolled_back:
            return "rolled_back"
        return "ok" if result else "error"

    def __bool__(self) -> bool:
        """It ran and raised nothing, or it was skipped as IPython's."""
        return self.state in ("ok", "skipped")

    def to_dict(
        self, *, displays: bool = False, text_cap: int = DEFAULT_TEXT_CAP
    ) -> dict[str, Any]:
        """The cell as JSON types (see ``NotebookResult.to_dict``)."""
        shown: dict[str, Any] = {
            "index": self.index,
            "state": self.state,
            "source": self.source,
            "notes": list(self.notes),
        }
        if self.result is not None:
            shown.update(_result_dict(self.result, displays, text_cap))
        return shown


def _text(data: bytes | str | None, cap: int, name: str) -> dict[str, Any]:
    """``{name: text}``: ``data`` as text (bytes as UTF-8, bad bytes replaced), cut to its
    last ``cap`` characters, with ``{name}_cut`` the characters left out when any were."""
    if data is None:
        return {name: None}
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    if len(text) <= cap:
        return {name: text}
    return {name: text[len(text) - cap :], f"{name}_cut": len(text) - cap}


def _display(bundle: Bundle, whole: bool) -> dict[str, Any]:
    """A display as its MIME types and their sizes, or whole (``Bundle.to_json()``)."""
    if whole:
        return {"data": bundle.to_json()}
    return {"sizes": {mime: len(bundle[mime]) for mime in bundle}}


def _result_dict(result: CellResult, displays: bool, cap: int) -> dict[str, Any]:
    error = result.error
    return {
        "outcome": result.outcome,
        "status": result.status.value,
        "reason": result.reason,
        "wall_time": result.wall_time,
        "cpu_time": result.cpu_time,
        "max_rss": result.max_rss,
        **_text(result.stdout, cap, "stdout"),
        **_text(result.stderr, cap, "stderr"),
        "stdout_truncated": result.stdout_truncated,
        "stderr_truncated": result.stderr_truncated,
        **_text(result.value, cap, "value"),
        "error": None
        if error is None
        else {
            "type": error.type,
            **_text(error.message, cap, "message"),
            **_text(error.traceback, cap, "traceback"),
        },
        "displays": [_display(bundle, displays) for bundle in result.displays],
        "displays_truncated": result.displays_truncated,
        "files": {name: len(content) for name, content in sorted(result.files.items())},
    }


@record(unhashed=("cells",))
class NotebookResult:
    """What ``run_notebook`` did: each code cell's record, in the notebook's order.

    Truthy exactly when every code cell ran and raised nothing (cells skipped as
    IPython's count as fine).
    """

    #: The code cells (markdown and raw cells are not run, and not listed).
    cells: tuple[NotebookCellResult, ...]
    #: The limits each cell ran under: the session's, with the cells' wall and CPU time.
    limits: Limits
    #: Seconds the whole run took, a session's start included when one was made.
    wall_time: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "cells", tuple(self.cells))

    def __bool__(self) -> bool:
        return all(self.cells)

    @property
    def ok(self) -> bool:
        """Every code cell ran and raised nothing (or was skipped as IPython's)."""
        return bool(self)

    @property
    def counts(self) -> dict[str, int]:
        """How many cells ended in each of ``CELL_STATES`` (every state listed)."""
        counted = dict.fromkeys(CELL_STATES, 0)
        for cell in self.cells:
            counted[cell.state] += 1
        return counted

    def to_dict(
        self, *, displays: bool = False, text_cap: int = DEFAULT_TEXT_CAP
    ) -> dict[str, Any]:
        """The run as JSON types: ``ok``, ``counts``, ``wall_time``, the cells' ``limits``
        (``cpu_time``, ``wall_time``) and ``cells``, each with its ``index``, ``state``,
        ``source`` and ``notes``, and when it ran its outcome, status, reason, times,
        ``stdout``, ``stderr``, ``value`` and ``error`` as text (each cut to its last
        ``text_cap`` characters, ``<name>_cut`` counting what was left out), its
        displays as their MIME types' sizes in bytes (``displays=True``: whole, as
        ``Bundle.to_json()``, images in base64) and its files' sizes by name."""
        return {
            "ok": self.ok,
            "counts": self.counts,
            "wall_time": self.wall_time,
            "limits": {"cpu_time": self.limits.cpu_time, "wall_time": self.limits.wall_time},
            "cells": [cell.to_dict(displays=displays, text_cap=text_cap) for cell in self.cells],
        }
