# SPDX-License-Identifier: MIT
"""Points, partial credit, Gradescope's results.json, JUnit XML and the submission, as a
grader gets them from the plugin: real pytest sessions in subprocesses (with and
without pytest-xdist), most of whose tests make no sandboxed run, since scoring is
bookkeeping; the few that do run real sandboxes."""

from __future__ import annotations

import json
import os
import re
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from support.docs import DOCS, code_blocks
from support.inner_pytest import run_pytest

from pysandbox._frontends.pytest_student import MAX_ENTRIES
from pysandbox.pytest_plugin import Submission

INNER_INI = """\
[pytest]
addopts = --strict-markers --strict-config
sandbox_default_points = 2
sandbox_gradescope_visibility = after_due_date
"""

INNER_TESTS = """\
import pytest

from pysandbox.pytest_plugin import award

pytestmark = pytest.mark.points(4, visibility="visible")


@pytest.mark.points(1.5)
def test_passes():
    pass


def test_module_points():
    pass


class TestNearest:
    pytestmark = pytest.mark.points(3, number="2.1")

    def test_class_points(self):
        pass

    @pytest.mark.points(5, name="the fifth")
    def test_own_points(self):
        pass


@pytest.mark.points(3, visibility="hidden")
def test_partial_then_pass(sandbox):
    sandbox.award(1)
    sandbox.award(0.5)


@pytest.mark.points(3)
def test_partial_then_fail(request):
    award(request, 2)
    assert 6 * 7 == 41, "the answer is wrong"


@pytest.mark.points(2)
def test_award_checks(request):
    with pytest.raises(ValueError, match=r"^points must be at least 0 .* at most its 2 points"):
        award(request, 3)
    award(request, 1.5)
    with pytest.raises(ValueError, match=r"\\(1.5 already awarded\\), got 1$"):
        award(request, 1)
    with pytest.raises(ValueError, match="got -1"):
        award(request, -1)
    with pytest.raises(TypeError, match="^points must be an int or a float, got str"):
        award(request, "1")
    with pytest.raises(TypeError, match="^item_or_request must be"):
        award(object(), 1)


@pytest.mark.skip(reason="not graded this term")
def test_skipped():
    pass


@pytest.mark.xfail(reason="known to fail", strict=True)
def test_xfailed():
    assert False


@pytest.fixture
def broken():
    raise RuntimeError("the fixture broke")


def test_setup_error(broken):
    pass


@pytest.mark.parametrize("case", ["a", "b"])
@pytest.mark.points(1, name="case")
def test_cases(case):
    assert case == "a"


@pytest.mark.sandbox(cpu_time=0.2)
def test_sandbox_fails(sandbox):
    sandbox.run_python("print('warming up')").check()
    sandbox.run_python("while True: pass").check()


def test_sandbox_passes(sandbox):
    assert sandbox.run_python("print(6 * 7)").stdout == b"42\\n"
"""


class Graded:
    """One inner session: its process, its results.json, its JUnit XML."""

    def __init__(self, directory: Path, *args: str, xdist: bool = False) -> None:
        self.process = run_pytest(
            directory,
            "--junitxml",
            "junit.xml",
            "--sandbox-gradescope",
            "results.json",
            *args,
            xdist=xdist,
        )
        self.raw = (directory / "results.json").read_text()
        self.results: dict[str, Any] = json.loads(self.raw)
        self.tests = {test["name"]: test for test in self.results["tests"]}
        self.junit = ET.parse(directory / "junit.xml").getroot()

    def why(self) -> str:
        return self.process.stdout + self.process.stderr

    def properties(self, name: str) -> list[tuple[str, str]]:
        (case,) = (case for case in self.junit.iter("testcase") if case.get("name") == name)
        return [(p.get("name", ""), p.get("value", "")) for p in case.iter("property")]


@pytest.fixture(scope="module")
def inner(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("grades")
    (directory / "pytest.ini").write_text(INNER_INI)
    (directory / "test_inner.py").write_text(INNER_TESTS)
    return directory


@pytest.fixture(scope="module")
def graded(inner: Path) -> Graded:
    return Graded(inner)


#: Each test's name in results.json: (score, max_score, status).
EXPECTED = {
    "test_passes": (1.5, 1.5, "passed"),
    "test_module_points": (4, 4, "passed"),
    "TestNearest::test_class_points": (3, 3, "passed"),
    "the fifth": (5, 5, "passed"),
    "test_partial_then_pass": (1.5, 3, "passed"),
    "test_partial_then_fail": (2, 3, "failed"),
    "test_award_checks": (1.5, 2, "passed"),
    "test_skipped": (0, 4, "failed"),
    "test_xfailed": (0, 4, "failed"),
    "test_setup_error": (0, 4, "failed"),
    "case [a]": (1, 1, "passed"),
    "case [b]": (0, 1, "failed"),
    "test_sandbox_fails": (0, 4, "failed"),
    "test_sandbox_passes": (4, 4, "passed"),
}


def test_each_test_scores_its_points_or_what_it_awarded(graded: Graded) -> None:
    assert graded.process.returncode == pytest.ExitCode.TESTS_FAILED, graded.why()
    scores = {
        name: (test["score"], test["max_score"], test["status"])
        for name, test in graded.tests.items()
    }
    assert scores == EXPECTED
    assert list(graded.tests) == list(EXPECTED), "the tests in collection order"
    assert graded.results["score"] == sum(score for score, _, _ in EXPECTED.values()) == 23.5


def test_results_json_has_gradescopes_format(graded: Graded) -> None:
    results = graded.results
    assert list(results) == ["score", "execution_time", "visibility", "tests"]
    assert results["visibility"] == "after_due_date"  # the ini option
    assert isinstance(results["execution_time"], float) and results["execution_time"] > 0
    for test in results["tests"]:
        assert set(test) <= {
            "name",
            "score",
            "max_score",
            "status",
            "output",
            "visibility",
            "number",
        }
        assert test["status"] in ("passed", "failed")
    assert graded.tests["test_passes"]["visibility"] == "visible"  # the module's marker
    assert graded.tests["test_partial_then_pass"]["visibility"] == "hidden"
    assert graded.tests["TestNearest::test_class_points"]["number"] == "2.1"
    assert "number" not in graded.tests["test_passes"]
    assert graded.raw.endswith("}\n")


def test_the_output_says_why_a_test_lost_points(graded: Graded) -> None:
    output = {name: test["output"] for name, test in graded.tests.items()}
    assert output["test_passes"] == ""
    assert output["test_partial_then_pass"] == "partial credit: 1.5 of 3 points\n"
    assert output["test_partial_then_fail"].startswith(
        "partial credit: 2 of 3 points\nAssertionError: the answer is wrong\n"
    ), output
    assert output["test_skipped"] == "skipped: not graded this term\n"
    assert output["test_xfailed"] == "expected to fail (xfail) known to fail\n"
    assert output["test_setup_error"] == "error in setup: RuntimeError: the fixture broke\n"
    assert output["case [b]"].startswith("AssertionError: assert 'b' == 'a'"), output


def test_the_output_shows_the_sandboxed_runs(graded: Graded) -> None:
    failed = graded.tests["test_sandbox_fails"]["output"]
    # The failing run shows once, by its failure's message: its section is left out.
    assert failed.startswith("pysandbox.SandboxFailure: sandboxed program failed: CPU_TIME"), failed
    assert "pysandbox run 1: run_python: print('warming up')\nok, exit 0" in failed, failed
    assert "pysandbox run 2" not in failed, failed
    assert "--- stdout ---\nwarming up\n" in failed, failed
    passed = graded.tests["test_sandbox_passes"]["output"]
    assert re.fullmatch(
        r"pysandbox run 1: ok, exit 0, cpu .*: run_python: print\(6 \* 7\)\n", passed
    )


def test_junit_xml_carries_the_points_and_each_runs_verdict(graded: Graded) -> None:
    properties = dict(graded.properties("test_partial_then_fail"))
    assert (properties["max_score"], properties["score"]) == ("3", "2")
    assert dict(graded.properties("test_passes"))["score"] == "1.5"
    assert dict(graded.properties("test_skipped"))["score"] == "0"
    sandboxed = graded.properties("test_sandbox_fails")
    assert [name for name, _ in sandboxed] == [
        "max_score",
        "visibility",
        "pysandbox run 1",
        "pysandbox run 2",
        "score",
    ], sandboxed
    assert dict(sandboxed)["pysandbox run 2"].startswith("cpu_time_exceeded (limit 0.2 s)")
    named = dict(graded.properties("test_own_points"))
    assert (named["name"], named["number"], named["max_score"]) == ("the fifth", "2.1", "5")


def _comparable(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The tests of results.json, times and sizes of the runs masked."""
    masked = re.sub(r"\d+(\.\d+)? (s|MiB)\b", "N", json.dumps(results["tests"]))
    return json.loads(masked)  # type: ignore[no-any-return]


def test_under_xdist_the_controller_writes_the_same_results(inner: Path, graded: Graded) -> None:
    parallel = Graded(inner, "-n", "2", xdist=True)
    assert "2 workers" in parallel.process.stdout, parallel.why()
    assert _comparable(parallel.results) == _comparable(graded.results)
    assert parallel.results["score"] == graded.results["score"]
    assert dict(parallel.properties("test_partial_then_fail"))["score"] == "2"
    assert not list(inner.glob(".results.json*")), "a temporary file left behind"


@pytest.mark.parametrize(
    ("ini", "marker", "message"),
    [
        ("", "points(0)", "test_usage.py::test_it: @pytest.mark.points takes one positive number"),
        ("", "points(-1.5)", "the test's points, got (-1.5,)"),
        ("", "points('2')", "got ('2',)"),
        ("", "points(True)", "got (True,)"),
        ("", "points(float('nan'))", "got (nan,)"),
        ("", "points()", "got ()"),
        ("", "points(1, 2)", "got (1, 2)"),
        (
            "",
            "points(1, visibility='public')",
            "points(visibility='public'): the visibility is one",
        ),
        ("", "points(1, name='')", "points(name=''): the name is a non-empty str"),
        ("", "points(1, number=1.1)", "points(number=1.1): the number is a non-empty str"),
        ("", "points(1, weight=2)", "@pytest.mark.points: unknown keyword 'weight'"),
        (
            "sandbox_default_points = 0",
            "points(1)",
            "ini option sandbox_default_points: a positive",
        ),
        ("sandbox_default_points = lots", "points(1)", "sandbox_default_points: a positive number"),
        ("sandbox_gradescope_visibility = soon", "points(1)", "ini option sandbox_gradescope_vis"),
        ("sandbox_gradescope = no/such/dir/r.json", "points(1)", "no/such/dir is not a directory"),
    ],
)
def test_a_bad_points_marker_or_option_is_a_usage_error(
    tmp_path: Path, ini: str, marker: str, message: str
) -> None:
    (tmp_path / "pytest.ini").write_text(f"[pytest]\n{ini}\n")
    (tmp_path / "test_usage.py").write_text(
        f"import pytest\n\n@pytest.mark.{marker}\ndef test_it():\n    open('ran', 'w').close()\n"
    )
    process = run_pytest(tmp_path)
    assert process.returncode == pytest.ExitCode.USAGE_ERROR, process.stdout + process.stderr
    assert process.stderr.startswith("ERROR: "), process.stderr
    assert message in process.stderr, process.stderr
    assert "Traceback" not in process.stderr, process.stderr
    assert not (tmp_path / "ran").exists()


SUBMISSION_TESTS = """\
import os

import pytest

from pysandbox.pytest_plugin import Submission


def test_reads_a_file(submission):
    assert isinstance(submission, Submission) and submission.directory.is_absolute()
    assert submission.read("solution.py") == b"def answer():\\n    return 42\\n"
    assert submission.exists("solution.py") and not submission.exists("missing.py")


def test_files_for_a_sandbox(submission, sandbox):
    files = submission.files("*.py", "data/*.txt")
    assert sorted(files) == ["data/input.txt", "solution.py"]
    result = sandbox.run_python(
        "import solution; print(solution.answer(), open('data/input.txt').read())", files=files
    )
    assert result.stdout == b"42 seven\\n"


def test_a_missing_file(submission):
    submission.read("missing.py")


def test_a_link_out(submission):
    submission.read("secrets")


def test_still_graded_after_them(submission):
    assert submission.files("solution.py")
"""


def _submission(directory: Path) -> Path:
    (directory / "data").mkdir(parents=True)
    (directory / "solution.py").write_text("def answer():\n    return 42\n")
    (directory / "data" / "input.txt").write_text("seven")
    (directory / "secrets").symlink_to("/etc/passwd")
    return directory


def test_the_submission_fixture_fails_only_the_tests_it_cannot_serve(tmp_path: Path) -> None:
    _submission(tmp_path / "student")
    (tmp_path / "grader").mkdir()
    (tmp_path / "grader" / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "grader" / "test_submission.py").write_text(SUBMISSION_TESTS)
    graded = Graded(tmp_path / "grader", "--submission", "../student")
    status = {name: test["status"] for name, test in graded.tests.items()}
    assert status == {
        "test_reads_a_file": "passed",
        "test_files_for_a_sandbox": "passed",
        "test_a_missing_file": "failed",
        "test_a_link_out": "failed",
        "test_still_graded_after_them": "passed",
    }, graded.why()
    output = {name: test["output"] for name, test in graded.tests.items()}
    assert output["test_a_missing_file"] == "Failed: the submission has no missing.py\n"
    assert output["test_a_link_out"] == (
        "Failed: the submission's secrets is a symbolic link out of the submission\n"
    )
    assert "\nthe submission has no missing.py\n" in graded.process.stdout  # no traceback
    assert "pytest_student.py" not in graded.process.stdout, graded.process.stdout


def test_without_a_submission_the_fixture_says_how_to_give_one(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_it.py").write_text(
        "def test_one(submission):\n    pass\n\ndef test_two(submission):\n    pass\n"
    )
    process = run_pytest(tmp_path, "-rE")
    assert process.returncode == pytest.ExitCode.TESTS_FAILED, process.stdout
    message = "\nno submission to grade: pass --submission DIR (or set the ini option "
    assert process.stdout.count(message) == 2, process.stdout


def test_the_ini_option_is_relative_to_the_ini_file(tmp_path: Path) -> None:
    _submission(tmp_path / "submissions" / "good")
    (tmp_path / "pytest.ini").write_text("[pytest]\nsandbox_submission = submissions/good\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_it.py").write_text(
        "def test_it(submission):\n    assert submission.read('data/input.txt') == b'seven'\n"
    )
    process = run_pytest(tmp_path / "tests")
    assert process.returncode == pytest.ExitCode.OK, process.stdout + process.stderr


def _refused(call: Any, *args: Any) -> str:
    """The message a Submission method fails the test with."""
    with pytest.raises(pytest.fail.Exception) as failed:
        call(*args)
    assert failed.value.pytrace is False
    return str(failed.value)


def test_a_hostile_submission_is_refused_file_by_file(tmp_path: Path) -> None:
    student = _submission(tmp_path / "student")
    os.mkfifo(student / "pipe")
    (student / "inside").symlink_to("solution.py")
    (student / "dangling").symlink_to("nowhere")
    (student / "outdir").symlink_to(tmp_path)  # a walk does not enter it
    (tmp_path / "outside.py").write_text("secret = 1\n")
    submission = Submission(student, max_bytes=40)
    assert submission.read("inside") == submission.read("solution.py")
    assert _refused(submission.read, "pipe") == "the submission's pipe is not a regular file"
    assert _refused(submission.read, "secrets").endswith("a symbolic link out of the submission")
    assert _refused(submission.read, "outdir/outside.py").endswith("link out of the submission")
    assert _refused(submission.read, "dangling") == "the submission has no dangling"
    assert _refused(submission.read, "data") == "the submission's data is not a regular file"
    assert not any(map(submission.exists, ["pipe", "secrets", "dangling", "data", "outdir"]))
    # One file within the cap, two past it together.
    assert len(submission.files("solution.py")) == 1
    assert _refused(submission.files, "solution.py", "inside").endswith(
        "more than the 40 bytes the grader reads at once"
    )
    # A pattern skips a link to nothing; it refuses the FIFO as a name would.
    assert _refused(submission.files, "*") == "the submission's pipe is not a regular file"


def test_files_patterns_and_the_walks_cap(tmp_path: Path) -> None:
    student = tmp_path / "student"
    (student / "src" / "deep").mkdir(parents=True)
    for name in ("a.py", "b.txt", "src/c.py", "src/deep/d.py"):
        (student / name).write_text(name)
    submission = Submission(student)
    assert list(submission.files("*.py")) == ["a.py"]  # * stays within one directory
    assert list(submission.files("**/*.py")) == ["a.py", "src/c.py", "src/deep/d.py"]
    assert list(submission.files("src/*")) == ["src/c.py"]
    assert list(submission.files()) == ["a.py", "b.txt", "src/c.py", "src/deep/d.py"]
    assert submission.files("*.c") == {}  # a pattern may match nothing
    assert _refused(submission.files, "a.py", "c.py") == "the submission has no c.py"
    for bad in ("", "/etc/passwd", "../x", "src/../../x"):
        with pytest.raises(ValueError, match=r"^patterns must be a relative path"):
            submission.files(bad)
        with pytest.raises(ValueError, match=r"^name must be a relative path"):
            submission.read(bad)
    with pytest.raises(TypeError, match=r"^name must be a str, got bytes"):
        submission.read(b"a.py")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^directory must be a directory"):
        Submission(student / "a.py")
    with pytest.raises(ValueError, match=r"^max_bytes must be greater than 0"):
        Submission(student, max_bytes=0)
    many = student / "many"
    many.mkdir()
    for n in range(MAX_ENTRIES):
        (many / str(n)).touch()
    assert _refused(submission.files, "*.py").startswith("the submission has more than")


def test_a_file_that_cannot_be_collected_is_in_the_results(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_broken.py").write_text("import solution  # the student's, not there\n")
    (tmp_path / "test_fine.py").write_text("def test_fine():\n    pass\n")
    (tmp_path / "results.json").write_text("an old file, replaced whole")
    graded = Graded(tmp_path, "--continue-on-collection-errors")
    assert graded.tests["test_fine"]["score"] == 1, graded.why()
    broken = graded.tests["test_broken.py (not collected)"]
    assert (broken["score"], broken["max_score"], broken["status"]) == (0, 0, "failed")
    assert broken["output"].startswith("error in collection: "), broken
    assert "No module named 'solution'" in broken["output"], broken


def test_the_documented_example_scores_what_the_page_says(tmp_path: Path) -> None:
    """docs/graders.rst's example of points, graded as the page says: 4 of 6."""
    (example,) = (b for b in code_blocks("python", DOCS / "graders.rst") if "mark.points" in b)
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = --strict-markers\n")
    (tmp_path / "test_example.py").write_text("import pytest\n" + textwrap.dedent(example))
    (tmp_path / "student").mkdir()
    (tmp_path / "student" / "solution.py").write_text("def add(a, b):\n    return a + b\n")
    graded = Graded(tmp_path, "--submission", "student")
    assert graded.results["score"] == 4, graded.why()
    assert [(t["name"], t["score"], t["max_score"]) for t in graded.results["tests"]] == [
        ("add", 4, 4),
        ("test_has_a_readme", 0, 2),
    ]
    assert graded.tests["add"]["visibility"] == "after_due_date"
    assert graded.tests["test_has_a_readme"]["output"].startswith("AssertionError: no README.md\n")
