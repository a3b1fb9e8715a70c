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

from pysandbox.pytest_plugin import sandbox_report

HERE = Path(__file__).resolve().parent


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--submission",
        default=str(HERE / "submissions" / "good"),
        help="the directory of the submission to grade (default: submissions/good)",
    )
    parser.addoption(
        "--results",
        default="results.json",
        help="where to write the Gradescope-style results (default: results.json)",
    )


class Submission:
    """The student's files; a missing one fails the test that needs it, not the grader."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def read(self, name: str) -> bytes:
        path = self.directory / name
        if not path.is_file():
            pytest.fail(f"the submission has no {name}", pytrace=False)
        return path.read_bytes()


@pytest.fixture(scope="session")
def submission(pytestconfig: pytest.Config) -> Submission:
    return Submission(Path(pytestconfig.getoption("submission")))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Record each test's points as a user property: JUnit XML carries them, and so does
    every report, even from a pytest-xdist worker."""
    for item in items:
        marker = item.get_closest_marker("points")
        item.user_properties.append(("max_score", marker.args[0] if marker else 1))


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
