# SPDX-License-Identifier: MIT
"""The JSON schema of ``Result.to_dict`` and ``Outcome.to_dict``, as ``TypedDict``\\ s.

Only type checkers and users who annotate with them import this module (the records
import it under ``TYPE_CHECKING``): a typed service reads ``result.to_dict()["cpu_time"]``
as a ``float`` without a cast, and a misspelled key is an error.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict, Union

__all__ = [
    "Encoding",
    "FileDict",
    "OutcomeDict",
    "OutcomeErrorDict",
    "OutcomeResultDict",
    "ResultDict",
]

#: How a byte string travels in JSON: its text when valid UTF-8, else base64.
Encoding = Literal["utf-8", "base64"]


class FileDict(TypedDict):
    """One file of ``ResultDict["files"]``."""

    data: str
    encoding: Encoding
    executable: bool


class _ResultOptionalDict(TypedDict, total=False):
    """The keys of ``Result.to_dict()`` present only for a run with displays, or only
    when they are true."""

    #: ``Bundle.to_json()`` of each display (``run_python(..., displays=True)``).
    displays: list[dict[str, Any]]
    displays_truncated: bool
    #: Present (and true) only for a run that hit ``Limits.processes``.
    processes_exceeded: bool
    #: Present (and true) only for a run a limit ended before its files were collected.
    files_not_collected: bool


class ResultDict(_ResultOptionalDict):
    """``Result.to_dict()``: every key always present, but ``displays`` and
    ``displays_truncated``, present only for a run that has displays, and
    ``processes_exceeded`` and ``files_not_collected``, present only when true."""

    status: str
    returncode: int | None
    signal: int | None
    stdout: str
    stdout_encoding: Encoding
    stdout_truncated: bool
    stderr: str
    stderr_encoding: Encoding
    stderr_truncated: bool
    wall_time: float
    cpu_time: float
    max_rss: int
    files: dict[str, FileDict]
    files_truncated: bool
    queued_time: float


class OutcomeResultDict(ResultDict):
    """``Outcome.to_dict()`` of a job that ran: its id and its result's keys."""

    id: str | int | None


class OutcomeErrorDict(TypedDict):
    """``Outcome.to_dict()`` of a job that could not run."""

    id: str | int | None
    error: str
    error_type: str


#: Either shape of ``Outcome.to_dict()``; ``"error" in outcome`` tells them apart.
OutcomeDict = Union[OutcomeResultDict, OutcomeErrorDict]
