# SPDX-License-Identifier: MIT
"""The grader's machinery: which submission to grade, how many points each test is
worth, and a Gradescope-style results.json at the end of the session.

    pytest --submission submissions/partial --results results.json --junitxml junit.xml
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

# The plugin's --submission (default: pytest.ini's sandbox_submission) and its fixture.
from pysandbox.pytest_plugin import Submission as Submission
from pysandbox.pytest_plugin import sandbox_report


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--results",
        default="results.json",
        help="where to write the Gradescope-style results (default: results.json)",
    )


@dataclasses.dataclass
class Grade:
    """One test's grade, from the reports of its setup, call and teardown."""

    name: str
    max_score: float
    passed: bool = False
    failed: bool = False
    output: str = ""

    @property
    def score(self) -> float:
        return self.max_score if self.passed and not self.failed else 0.0


def _feedback(report: pytest.TestReport) -> str:
    """What the student sees for a failed test: why it failed, then what each sandboxed
    run of it did (verdict, times, the end of its output)."""
    crash = getattr(report.longrepr, "reprcrash", None)
    reason = crash.message if crash is not None else str(report.longrepr)
    return f"{report.when}: {reason.splitlines()[0]}\n{sandbox_report(report)}"


class Gradebook:
    """A plugin that scores every test from its reports and writes results.json."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.grades: dict[str, Grade] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.nodeid not in self.grades:
            points = dict(report.user_properties).get("max_score", 1)
            self.grades[report.nodeid] = Grade(report.nodeid, float(points))
        grade = self.grades[report.nodeid]
        if report.failed:
            grade.failed = True
            grade.output += _feedback(report)
        elif report.skipped:
            grade.failed = True
            grade.output += "skipped\n"
        elif report.when == "call":
            grade.passed = True

    def pytest_sessionfinish(self) -> None:
        tests = [
            {"name": g.name, "score": g.score, "max_score": g.max_score, "output": g.output}
            for g in self.grades.values()
        ]
        results = {"score": sum(g.score for g in self.grades.values()), "tests": tests}
        self.path.write_text(json.dumps(results, indent=2) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller of pytest-xdist, or no xdist
        config.pluginmanager.register(Gradebook(Path(config.getoption("results"))), "gradebook")
