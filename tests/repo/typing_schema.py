# SPDX-License-Identifier: MIT
"""The JSON dicts of ``Result.to_dict()`` and ``Outcome.to_dict()`` as a type checker sees
them: ``tests/repo/test_typing_misspelled.py`` runs ``mypy --strict`` on this file against
the installed package and wants an error on exactly the lines that end with ``# E``.

Nothing here runs (the tests never import it): the functions only give mypy code to
check.
"""

from __future__ import annotations

import pysandbox
from pysandbox import Outcome, Result


def misspelled(result: Result, outcome: Outcome) -> None:
    result.to_dict()["cpu_tme"]  # E
    result.to_dict()["files"]["a.txt"]["encodng"]  # E
    returncode: str = result.to_dict()["returncode"]  # E
    outcome.to_dict()["status"]  # E
    print(returncode)


def spelled_right(result: Result, outcome: Outcome) -> None:
    data = result.to_dict()
    cpu: float = data["cpu_time"]
    rss: int = data["max_rss"]
    code: int | None = data["returncode"]
    executable: bool = data["files"]["a.txt"]["executable"]
    job_id: str | int | None = outcome.to_dict()["id"]
    typed: pysandbox.ResultDict = data
    print(cpu, rss, code, executable, job_id, typed)
