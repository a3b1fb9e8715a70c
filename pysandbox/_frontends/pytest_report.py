# SPDX-License-Identifier: MIT
"""What a grader's reports tell a student: the sections of the sandboxed runs attached to
a test's report, and Gradescope's ``results.json`` written from the reports alone.

The report writer runs where the reports arrive: in the one pytest process, or in
pytest-xdist's controller, which never runs a test.  So everything it reads travels with
a report (its outcome, its longrepr, its sections, its ``user_properties``: the test's
``max_score`` and ``score``, and the ``name``, ``number`` and ``visibility`` its
``points`` marker gave), never the item's stash.  Imports pytest: the plugin's alone.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "OUTPUT_CAP",
    "SECTION_PREFIX",
    "VISIBILITIES",
    "Gradebook",
    "number",
    "sandbox_report",
    "write_atomically",
]

#: The title of each run's report section starts with it: ``"pysandbox run 1: ['./prog']"``.
SECTION_PREFIX = "pysandbox run"
#: Gradescope's visibility values: never shown, after the due date, once published, always.
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
#: The most characters of one test's ``output``: a hostile submission's message is cut.
OUTPUT_CAP = 32_768
_CUT = "\n... (cut: more than {} characters)\n"


def sandbox_report(report: pytest.TestReport) -> str:
    """The sections of every sandboxed run attached to ``report``, as pytest shows them
    (each under its title), or ``""`` when the test made none: for a grader's feedback."""
    return "".join(
        f"{title}\n{text}" for title, text in report.sections if title.startswith(SECTION_PREFIX)
    )


def number(value: float) -> float:
    """``value`` as JSON shows points: ``2`` for ``2.0``, ``0.5`` as it is, rounded to
    six decimals so that sums of fractions read as written."""
    rounded = round(float(value), 6)
    return int(rounded) if rounded.is_integer() else rounded


def _why(report: pytest.TestReport) -> str:
    """One line or a few on why a phase failed or skipped, for a student."""
    if report.skipped:
        if hasattr(report, "wasxfail"):
            return f"expected to fail (xfail) {report.wasxfail}".rstrip() + "\n"
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, Sequence) and len(longrepr) == 3 else longrepr
        return f"skipped: {str(reason).removeprefix('Skipped: ')}\n"
    crash = getattr(report.longrepr, "reprcrash", None)
    message = str(crash.message if crash is not None else report.longrepr).rstrip()
    if report.when == "call":
        return f"{message}\n"
    return f"error in {report.when}: {message}\n"


@dataclasses.dataclass
class _Grade:
    """One test as its reports tell it: whether any phase failed or skipped, whether its
    call passed, its properties and what to tell the student."""

    nodeid: str
    order: int
    failed: bool = False
    passed: bool = False
    properties: dict[str, Any] = dataclasses.field(default_factory=dict)
    whys: list[str] = dataclasses.field(default_factory=list)
    sections: str = ""
    verdicts: str = ""

    def add(self, report: pytest.TestReport) -> None:
        """Take in one phase's report: its outcome, its properties (later wins) and its
        runs (each phase's report holds every run of the test so far)."""
        self.properties.update(report.user_properties)
        if report.failed or report.skipped:
            self.failed = True
            self.whys.append(_why(report))
        elif report.when == "call":
            self.passed = True
        self.sections = sandbox_report(report) or self.sections
        lines = [
            f"{key}: {value}\n"
            for key, value in report.user_properties
            if str(key).startswith(SECTION_PREFIX)
        ]
        self.verdicts = "".join(lines) or self.verdicts

    def entry(self, default_points: float) -> dict[str, Any]:
        """The test's entry of ``tests`` in ``results.json``."""
        max_score = float(self.properties.get("max_score", default_points))
        ok = self.passed and not self.failed
        score = float(self.properties.get("score", max_score if ok else 0.0))
        output = "".join(self.whys) + self.sections if not ok else self.verdicts
        if 0 < score < max_score:
            output = f"partial credit: {number(score)} of {number(max_score)} points\n{output}"
        if len(output) > OUTPUT_CAP:
            output = output[:OUTPUT_CAP] + _CUT.format(OUTPUT_CAP)
        entry: dict[str, Any] = {
            "name": str(self.properties.get("name", self.nodeid.partition("::")[2])),
            "score": number(score),
            "max_score": number(max_score),
            "status": "passed" if ok else "failed",
            "output": output,
        }
        for key in ("number", "visibility"):
            if key in self.properties:
                entry[key] = str(self.properties[key])
        return entry


class Gradebook:
    """The plugin that writes Gradescope's ``results.json`` at the session's end, from
    the reports: registered in the one process that sees them all (no xdist, or its
    controller)."""

    def __init__(
        self,
        path: Path,
        *,
        default_points: float,
        visibility: str | None = None,
        stdout_visibility: str | None = None,
    ) -> None:
        self.path = path
        self._default_points = default_points
        self._visibility = visibility
        self._stdout_visibility = stdout_visibility
        self._grades: dict[str, _Grade] = {}
        self._start = time.monotonic()

    def _grade(self, nodeid: str, order: int) -> _Grade:
        return self._grades.setdefault(nodeid, _Grade(nodeid, order))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # pytest-xdist numbers each report by its test's place in the collection, which
        # every worker shares: the file lists the tests in that order with or without it.
        order = getattr(report, "item_index", len(self._grades))
        self._grade(report.nodeid, order).add(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A file that cannot be collected is an entry worth 0 that says why, so the
        student sees that tests are missing."""
        if report.failed:
            grade = self._grade(report.nodeid, -1)
            grade.properties.update(name=f"{report.nodeid} (not collected)", max_score=0)
            grade.failed = True
            grade.whys[:] = [f"error in collection: {report.longreprtext.strip()}\n"]

    def results(self) -> dict[str, Any]:
        """``results.json`` as a dict: each test in collection order, the total score,
        the time the session took, and the visibilities set."""
        grades = sorted(self._grades.values(), key=lambda grade: grade.order)
        tests = [grade.entry(self._default_points) for grade in grades]
        results: dict[str, Any] = {
            "score": number(sum(test["score"] for test in tests)),
            "execution_time": round(time.monotonic() - self._start, 2),
        }
        if self._visibility is not None:
            results["visibility"] = self._visibility
        if self._stdout_visibility is not None:
            results["stdout_visibility"] = self._stdout_visibility
        results["tests"] = tests
        return results

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        write_atomically(self.path, json.dumps(self.results(), indent=2) + "\n")


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to a new file beside ``path`` and rename it over ``path``: a reader
    sees the old file or the whole new one, never a part."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
