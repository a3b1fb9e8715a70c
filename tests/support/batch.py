# SPDX-License-Identifier: MIT
"""Jobs files and results files of ``pysandbox batch`` in tests."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

__all__ = [
    "by_id",
    "outcomes",
    "summary",
    "write_jobs",
]


def write_jobs(path: Path, *jobs: object) -> Path:
    """``jobs`` as JSON lines (a str is written as it is: a malformed or blank line)."""
    with path.open("w") as stream:
        for job in jobs:
            stream.write((job if isinstance(job, str) else json.dumps(job)) + "\n")
    return path


def outcomes(path: Path) -> list[dict[str, object]]:
    """The lines of a results file (none before it exists), each of which must be whole
    JSON."""
    text = path.read_text() if path.exists() else ""
    assert text == "" or text.endswith("\n"), "a partial last line"
    return [json.loads(line) for line in text.splitlines()]


def by_id(path: Path) -> dict[object, dict[str, object]]:
    """The results by id; each id must be there exactly once."""
    lines = outcomes(path)
    found = {line["id"]: line for line in lines}
    assert len(found) == len(lines), [line["id"] for line in lines]
    return found


def summary(done: subprocess.CompletedProcess[bytes]) -> str:
    last = done.stderr.decode().splitlines()[-1]
    assert last.startswith("pysandbox: batch done: "), done.stderr
    return last
