# SPDX-License-Identifier: MIT
"""examples/grader, run as a teacher runs it: plain pytest in a copy of the directory,
once for the correct submission and once for a partly wrong and partly hostile one,
checked through what the kit writes: Gradescope's results.json and JUnit XML."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from support.inner_pytest import run_pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "grader"

#: Every test of the grader and its points, by its name in results.json.
MAX_SCORES = {
    "test_echo_upper[one-line]": 2,
    "test_echo_upper[two-lines]": 2,
    "test_echo_upper[empty]": 2,
    "test_function[add(2, 3)]": 1,
    "test_function[add(-7, 7)]": 1,
    "test_function[is_prime(2)]": 1,
    "test_function[is_prime(91)]": 1,
    "test_function[is_prime(97)]": 1,
    "test_function[is_prime(1)]": 1,
    "test_function[reverse_words('hello world')]": 1,
    "test_function[reverse_words('  to be   or not ')]": 1,
    "test_every_cell_runs": 1,
    "test_mean": 2,
    "test_warmest": 3,
    "test_sum[small]": 2,
    "test_sum[two-lines]": 2,
    "test_sum[large]": 2,
}

#: The tests the partial submission fails: the score each still gets, and what its
#: feedback must say.
PARTIAL_FAILURES = {
    # The fork bomb: the process cap holds it, the CPU limit ends it.
    "test_echo_upper[one-line]": (0, "CPU_TIME_EXCEEDED, killed by SIGKILL (9); process limit"),
    "test_echo_upper[two-lines]": (0, "CPU_TIME_EXCEEDED, killed by SIGKILL (9); process limit"),
    "test_echo_upper[empty]": (0, "CPU_TIME_EXCEEDED, killed by SIGKILL (9); process limit"),
    # is_prime(1) never returns: the call is rolled back, the next case goes on.
    "test_function[is_prime(1)]": (
        0,
        "solution.is_prime(1) did not finish: CPU time limit of 0.5 s reached",
    ),
    # Wrong answers from calls that ended well.
    "test_function[reverse_words('hello world')]": (0, "'dlrow olleh' == 'world hello'"),
    "test_function[reverse_words('  to be   or not ')]": (0, "ok, committed"),
    # The notebook: a cell that prints forever, a wrong mean, a warmest right 2 times of 3.
    "test_every_cell_runs": (0, "[3] rolled_back: the call's output passed its cap"),
    "test_mean": (0, "assert 4.0 == 3.0"),
    "test_warmest": (2, "partial credit: 2 of 3 points"),
    # int overflows.
    "test_sum[large]": (0, "-1589934592"),
}


def grade(tmp_path: Path, *args: str) -> tuple[dict[str, Any], ET.Element]:
    """Run the grader in a copy of examples/grader; its results.json and JUnit XML."""
    grader = tmp_path / "grader"
    shutil.copytree(EXAMPLE, grader)
    process = run_pytest(grader, "--junitxml", "junit.xml", *args)
    assert process.returncode in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), (
        process.stdout + process.stderr
    )
    results = json.loads((grader / "results.json").read_text())
    return results, ET.parse(grader / "junit.xml").getroot()


def junit_properties(junit: ET.Element) -> dict[str, dict[str, str]]:
    """Each test case's properties, by the test's name."""
    return {
        case.get("name", ""): {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        for case in junit.iter("testcase")
    }


def test_the_example_conftest_is_at_most_15_lines() -> None:
    assert len((EXAMPLE / "conftest.py").read_text().splitlines()) <= 15


def test_the_correct_submission_scores_everything(tmp_path: Path) -> None:
    results, junit = grade(tmp_path)
    tests = {test["name"]: test for test in results["tests"]}
    assert {name: test["max_score"] for name, test in tests.items()} == MAX_SCORES
    assert all(test["score"] == test["max_score"] for test in tests.values()), tests
    assert all(test["status"] == "passed" for test in tests.values()), tests
    assert results["score"] == sum(MAX_SCORES.values())
    assert junit.find("testsuite").get("failures") == "0"
    properties = junit_properties(junit)
    assert set(properties) == set(MAX_SCORES)
    for name, points in MAX_SCORES.items():
        assert float(properties[name]["max_score"]) == float(properties[name]["score"]) == points
    # Each module loads the submission once: gcc runs in the first C test only.
    assert properties["test_sum[small]"]["pysandbox run 1"].endswith(
        ": setup: ['gcc', '-O2', '-Wall', '-o', 'sum', 'sum.c']"
    )
    assert properties["test_sum[large]"]["pysandbox run 1"].endswith(": ['./sum']")
    assert "notebook analysis.ipynb" in properties["test_every_cell_runs"]["pysandbox run 1"]


def test_the_partial_submission_scores_what_it_got_right(tmp_path: Path) -> None:
    results, junit = grade(tmp_path, "--submission", "submissions/partial")
    tests = {test["name"]: test for test in results["tests"]}
    assert set(tests) == set(MAX_SCORES)
    for name, test in tests.items():
        if name in PARTIAL_FAILURES:
            score, feedback = PARTIAL_FAILURES[name]
            assert (test["score"], test["status"]) == (score, "failed"), test
            assert feedback in test["output"], test
        else:
            assert test["score"] == test["max_score"] == MAX_SCORES[name], test
    lost = sum(MAX_SCORES[name] - score for name, (score, _) in PARTIAL_FAILURES.items())
    assert results["score"] == sum(MAX_SCORES.values()) - lost == 11
    assert junit.find("testsuite").get("failures") == str(len(PARTIAL_FAILURES))
    properties = junit_properties(junit)
    verdict = properties["test_function[is_prime(1)]"]["pysandbox run 1"]
    assert verdict.startswith("cpu_time_exceeded (limit 0.5 s), rolled back"), verdict
    assert properties["test_warmest"]["score"] == "2"
    bomb = properties["test_echo_upper[empty]"]["pysandbox run 1"]
    assert bomb.startswith("cpu_time_exceeded (limit 0.5 s), process limit reached (limit 16)")
    assert "files not collected (the run was ended by the CPU time limit)" in bomb, bomb
