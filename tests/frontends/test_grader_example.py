# SPDX-License-Identifier: MIT
"""examples/grader, run as a teacher runs it: plain pytest in a copy of the directory,
once for the correct submission and once for a partly wrong and partly hostile one."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from support.inner_pytest import run_pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "grader"

#: Every test of the grader and its points.
MAX_SCORES = {
    "test_echo_upper.py::test_echo_upper[one-line]": 2.0,
    "test_echo_upper.py::test_echo_upper[two-lines]": 2.0,
    "test_echo_upper.py::test_echo_upper[empty]": 2.0,
    "test_functions.py::test_function[add(2, 3)]": 1.0,
    "test_functions.py::test_function[add(-7, 7)]": 1.0,
    "test_functions.py::test_function[is_prime(2)]": 1.0,
    "test_functions.py::test_function[is_prime(91)]": 1.0,
    "test_functions.py::test_function[is_prime(97)]": 1.0,
    "test_functions.py::test_function[is_prime(1)]": 1.0,
    "test_functions.py::test_function[reverse_words('hello world')]": 1.0,
    "test_functions.py::test_function[reverse_words('  to be   or not ')]": 1.0,
    "test_sum_c.py::test_sum[small]": 2.0,
    "test_sum_c.py::test_sum[two-lines]": 2.0,
    "test_sum_c.py::test_sum[large]": 2.0,
}

#: The tests the partial submission fails, and a verdict its feedback must show.
PARTIAL_FAILURES = {
    # The fork bomb: the process cap holds it, the CPU limit ends it.
    "test_echo_upper.py::test_echo_upper[one-line]": "cpu_time_exceeded",
    "test_echo_upper.py::test_echo_upper[two-lines]": "cpu_time_exceeded",
    "test_echo_upper.py::test_echo_upper[empty]": "cpu_time_exceeded",
    # is_prime(1) never returns.
    "test_functions.py::test_function[is_prime(1)]": "cpu_time_exceeded",
    # Wrong answers from runs that ended well.
    "test_functions.py::test_function[reverse_words('hello world')]": "ok, exit 0",
    "test_functions.py::test_function[reverse_words('  to be   or not ')]": "ok, exit 0",
    "test_sum_c.py::test_sum[large]": "-1589934592",
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
    """Each test case's properties, by the test's node id."""
    cases = {}
    for case in junit.iter("testcase"):
        module = case.get("classname", "").replace(".", "/") + ".py"
        cases[f"{module}::{case.get('name')}"] = {
            p.get("name", ""): p.get("value", "") for p in case.iter("property")
        }
    return cases


def test_the_correct_submission_scores_everything(tmp_path: Path) -> None:
    results, junit = grade(tmp_path)
    tests = {test["name"]: test for test in results["tests"]}
    assert {name: test["max_score"] for name, test in tests.items()} == MAX_SCORES
    assert all(test["score"] == test["max_score"] for test in tests.values()), tests
    assert all(test["output"] == "" for test in tests.values()), tests
    assert results["score"] == sum(MAX_SCORES.values())
    assert junit.find("testsuite").get("failures") == "0"
    properties = junit_properties(junit)
    assert set(properties) == set(MAX_SCORES)
    for name, points in MAX_SCORES.items():
        assert float(properties[name]["max_score"]) == points
        assert properties[name]["pysandbox run 1"].startswith("ok, exit 0"), name
    # The C tests compile, then run: two runs each.
    assert properties["test_sum_c.py::test_sum[large]"]["pysandbox run 2"].endswith(": ['./sum']")


def test_the_partial_submission_scores_what_it_got_right(tmp_path: Path) -> None:
    results, junit = grade(tmp_path, "--submission", "submissions/partial")
    tests = {test["name"]: test for test in results["tests"]}
    assert set(tests) == set(MAX_SCORES)
    for name, test in tests.items():
        if name in PARTIAL_FAILURES:
            assert test["score"] == 0, test
            assert "pysandbox run 1: " in test["output"], test
            assert PARTIAL_FAILURES[name] in test["output"], test
        else:
            assert test["score"] == test["max_score"] == MAX_SCORES[name], test
    expected = sum(MAX_SCORES.values()) - sum(MAX_SCORES[name] for name in PARTIAL_FAILURES)
    assert results["score"] == expected == 9
    assert junit.find("testsuite").get("failures") == str(len(PARTIAL_FAILURES))
    verdict = junit_properties(junit)["test_functions.py::test_function[is_prime(1)]"]
    assert verdict["pysandbox run 1"].startswith("cpu_time_exceeded"), verdict
