# SPDX-License-Identifier: MIT
"""The plugin's ``sandbox_session`` fixture, as graders use it: one inner pytest run
whose modules each load a submission once into a live session and whose tests loop
forever, crash, run out of memory and still cost only their own points."""

from __future__ import annotations

import json
import os
import random
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.inner_pytest import run_pytest
from support.processes import survivors

INNER_INI = """\
[pytest]
addopts = --strict-markers --strict-config
sandbox_wall_time = 30
sandbox_memory = 256M
sandbox_processes = 32
"""

# The load counts itself in a file of the sandbox: a second load (a new sandbox per
# test) would show in every later test as a second line.
STATEFUL = """\
import pytest

pytestmark = pytest.mark.sandbox_session(
    setup="with open('loads', 'a') as f: f.write('x')\\ncounter = []\\n"
    "def bump():\\n    counter.append(1)\\n    return len(counter)"
)


def test_1_state_kept(sandbox_session):
    assert sandbox_session.run_python("bump()").value == "1"


@pytest.mark.sandbox(cpu_time="300ms")
def test_2_loops_forever(sandbox_session):
    cell = sandbox_session.run_python("bump()\\nwhile True: pass")
    assert cell, "the loop was ended"


def test_3_state_from_before_the_loop(sandbox_session):
    assert sandbox_session.run_python("bump()").value == "2"


def test_4_crashes_the_interpreter(sandbox_session):
    cell = sandbox_session.run_python("bump()\\nimport os, signal\\nos.kill(os.getpid(), 11)")
    assert cell


def test_5_eats_memory(sandbox_session):
    cell = sandbox_session.run_python("bump()\\nx = bytearray(400 * 2**20)")
    assert cell


def test_6_still_state_from_before(sandbox_session):
    assert sandbox_session.run_python("bump()").value == "3"
    assert sandbox_session.run_python("open('loads').read()").value == "'x'"
"""

PROGRAMS = '''\
import pytest

SOURCE = r"""
#include <stdio.h>
int main(void) {
    long a, b;
    while (scanf("%ld %ld", &a, &b) == 2) printf("%ld\\n", a + b);
    return 0;
}
"""

pytestmark = [
    pytest.mark.sandbox_session(
        setup=f"open('sum.c', 'w').write({SOURCE!r})\\n"
        "import subprocess\\n"
        "subprocess.run(['gcc', '-O2', '-o', 'sum', 'sum.c'], check=True)",
        setup_cpu_time=20,
    ),
]


@pytest.mark.parametrize(
    ("given", "expected"), [("1 2\\n", "3\\n"), ("5 5\\n1 1\\n", "10\\n2\\n")], ids=["one", "two"]
)
def test_sum(sandbox_session, given, expected):
    assert sandbox_session.run(["./sum"], stdin=given).check().stdout_text() == expected


def test_exit_code(sandbox_session):
    result = sandbox_session.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (result.returncode, result.stdout, result.stderr) == (3, b"out\\n", b"err\\n")
    assert sandbox_session.run(["./missing"]).returncode == 127


def test_failing_check(sandbox_session):
    sandbox_session.run(["sh", "-c", "echo shown $((1+1)) once; exit 4"]).check()
'''

BROKEN = """\
import pytest

pytestmark = pytest.mark.sandbox_session(setup=["sh", "-c", "echo cannot build >&2; exit 2"])


def test_a(sandbox_session):
    pass


def test_b(sandbox_session):
    pass
"""

SOLUTION = """\
def add(a, b):
    print("adding")
    return a + b


def divide(a, b):
    return a / b


def numbers():
    return (n for n in range(3))


def spin():
    while True:
        pass
"""

CELLS = [
    "x = 21",
    "while True: pass",
    "def double(v):\n    return 2 * v",
    "raise ValueError('oops')",
    "y = double(x)",
]

CALLS = """\
import pytest

pytestmark = pytest.mark.sandbox_session(setup="import solution")


def test_value(sandbox_session):
    assert sandbox_session.call("solution.add", 2, 3) == 5
    whole = sandbox_session.call_result("solution.add", (1,), (2,))
    assert (whole.value, whole.stdout) == ((1, 2), b"adding\\n")


def test_raises(sandbox_session):
    sandbox_session.call("solution.divide", 1, 0)


def test_cannot_cross(sandbox_session):
    sandbox_session.call("solution.numbers")


@pytest.mark.points(4)
@pytest.mark.sandbox(cpu_time="300ms")
def test_partial(sandbox_session):
    sandbox_session.award(1)
    sandbox_session.call("solution.spin")


def test_fresh(sandbox):
    assert sandbox.call("solution.add", "a", "b") == "ab"
"""

NOTEBOOK = """\
import pytest

pytestmark = pytest.mark.sandbox_session(notebook="analysis.ipynb", setup_cpu_time=0.5)


def test_cells(sandbox_session):
    states = [cell.state for cell in sandbox_session.notebook.cells]
    assert states == ["ok", "rolled_back", "ok", "error", "ok"]


def test_state(sandbox_session):
    assert sandbox_session.call("double", 4) == 8
    assert sandbox_session.pull("y") == {"y": 42}
"""

LOST = """\
import pytest

pytestmark = pytest.mark.sandbox_session(notebook="lost.ipynb")


def test_after_a_lost_load(sandbox_session):
    pass
"""

# Runs after the other modules (files run in name order): their sessions, each closed at
# its module's end, have no sandbox left.  bwrap's command line holds the disk size.
AFTER = """\
import os


def test_no_session_outlives_its_module():
    marker = os.environ["SESSION_TEST_DISK"].encode()
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if marker in cmdline.read():
                    left.append(pid)
        except OSError:
            pass
    assert left == []
"""

SHARED = """\
import pytest

pytestmark = pytest.mark.sandbox_session(setup="import os\\npid = os.getpid()")


def test_shared_{n}(sandbox_session):
    sandbox_session.run_python("import os\\nprint(os.getpid())")
"""


class Inner:
    """One inner pytest run: its output and JUnit XML."""

    def __init__(self, directory: Path, *args: str, disk: int = 0) -> None:
        self.disk = disk
        env = {"SESSION_TEST_DISK": str(disk)}
        self.process = run_pytest(directory, "--junitxml", "junit.xml", "-rA", *args, env=env)
        self.junit = ET.parse(directory / "junit.xml").getroot()
        gradescope = directory / "results.json"
        self.grades = json.loads(gradescope.read_text()) if gradescope.exists() else {}

    def case(self, name: str) -> ET.Element:
        (found,) = (case for case in self.junit.iter("testcase") if case.get("name") == name)
        return found

    def outcome(self, name: str) -> str:
        case = self.case(name)
        for kind in ("failure", "error", "skipped"):
            if case.find(kind) is not None:
                return kind
        return "passed"

    def properties(self, name: str) -> dict[str, str]:
        return {p.get("name", ""): p.get("value", "") for p in self.case(name).iter("property")}

    def why(self) -> str:
        return self.process.stdout + self.process.stderr

    def grade(self, name: str) -> dict[str, object]:
        (found,) = (test for test in self.grades["tests"] if test["name"].endswith(name))
        return found


@pytest.fixture(scope="module")
def inner(tmp_path_factory: pytest.TempPathFactory) -> Inner:
    directory = tmp_path_factory.mktemp("sessions")
    disk = 64 * 2**20 + 4096 * random.randrange(1, 2**16)
    (directory / "pytest.ini").write_text(INNER_INI + f"sandbox_disk = {disk}\n")
    (directory / "test_stateful.py").write_text(STATEFUL)
    (directory / "test_programs.py").write_text(PROGRAMS)
    (directory / "test_broken.py").write_text(BROKEN)
    (directory / "test_calls.py").write_text(CALLS)
    (directory / "test_notebook.py").write_text(NOTEBOOK)
    (directory / "test_zz_after.py").write_text(AFTER)
    submission = directory / "sub"
    submission.mkdir()
    (submission / "solution.py").write_text(SOLUTION)
    cells = [{"cell_type": "code", "source": cell, "metadata": {}, "outputs": []} for cell in CELLS]
    notebook = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}
    (submission / "analysis.ipynb").write_text(json.dumps(notebook))
    killer = "import os, signal\nos.kill(-1, signal.SIGKILL)"  # the keeper too
    cells = [{"cell_type": "code", "source": source} for source in ("x = 1", killer)]
    (submission / "lost.ipynb").write_text(json.dumps({"nbformat": 4, "cells": cells}))
    (directory / "test_lost.py").write_text(LOST)
    args = ("--submission", "sub", "--sandbox-gradescope", "results.json")
    return Inner(directory, *args, disk=disk)


def test_a_call_a_limit_ends_costs_only_its_test(inner: Inner) -> None:
    outcomes = {name: inner.outcome(name) for name in ("test_1_state_kept", "test_2_loops_forever")}
    assert outcomes == {"test_1_state_kept": "passed", "test_2_loops_forever": "failure"}, (
        inner.why()
    )
    verdict = inner.properties("test_2_loops_forever")["pysandbox run 1"]
    assert verdict.startswith("cpu_time_exceeded (limit 0.3 s), rolled back"), verdict


def test_the_next_test_runs_in_the_state_from_before(inner: Inner) -> None:
    assert inner.outcome("test_3_state_from_before_the_loop") == "passed", inner.why()
    assert inner.outcome("test_6_still_state_from_before") == "passed", inner.why()


def test_a_crash_and_memory_exhaustion_are_rolled_back(inner: Inner) -> None:
    crash = inner.properties("test_4_crashes_the_interpreter")["pysandbox run 1"]
    assert crash.startswith("signaled, rolled back, killed by SIGSEGV"), crash
    memory = inner.properties("test_5_eats_memory")["pysandbox run 1"]
    assert memory.startswith("memory_exceeded (limit 256 MiB), rolled back"), memory


def test_the_submission_is_loaded_once_per_module(inner: Inner) -> None:
    first = inner.properties("test_1_state_kept")
    assert first["pysandbox run 1"].startswith("ok, committed"), first
    assert first["pysandbox run 1"].endswith(": setup: with open('loads', 'a') as f: f.write('x')")
    later = inner.properties("test_3_state_from_before_the_loop")
    runs = [name for name in later if name.startswith("pysandbox run")]
    assert runs == ["pysandbox run 1"] and "setup" not in later["pysandbox run 1"], later


def test_a_program_compiled_once_runs_in_each_test(inner: Inner) -> None:
    for name in ("test_sum[one]", "test_sum[two]", "test_exit_code"):
        assert inner.outcome(name) == "passed", inner.why()


def test_a_failing_check_shows_its_verdict_once(inner: Inner) -> None:
    assert inner.outcome("test_failing_check") == "failure", inner.why()
    report = inner.process.stdout.split("_ test_failing_check _")[1].split("\n___")[0]
    assert report.count("shown 2 once") == 1, report
    assert "pysandbox run 1: ['sh'" not in report, report


def test_a_load_that_fails_errors_each_test_with_its_output(inner: Inner) -> None:
    assert inner.outcome("test_a") == inner.outcome("test_b") == "error", inner.why()
    output = inner.process.stdout
    assert output.count("the submission could not be loaded (setup: ['sh', '-c',") >= 2, output
    assert "cannot build" in output, output


def test_a_students_function_gives_its_value_apart_from_its_prints(inner: Inner) -> None:
    assert inner.outcome("test_value") == "passed", inner.why()
    verdict = inner.properties("test_value")["pysandbox run 2"]
    assert verdict.startswith("ok, committed, cpu "), verdict
    assert verdict.endswith(": call solution.add(2, 3)"), verdict


def test_a_students_exception_is_told_once_as_its_author_reads_it(inner: Inner) -> None:
    assert inner.outcome("test_raises") == "failure", inner.why()
    output = inner.grade("test_raises")["output"]
    assert isinstance(output, str)
    assert output.count("solution.divide(1, 0) raised ZeroDivisionError: division by zero") == 1
    assert 'File "/sandbox/solution.py", line 7, in divide' in output, output
    report = inner.process.stdout.split("_ test_raises _")[1].split("\n___")[0]
    assert re.search(r"^E +pysandbox.SandboxFailure: solution.divide\(1, 0\) raised", report, re.M)
    assert "pysandbox/" not in report and "pysandbox run 1" not in report, report


def test_a_value_that_cannot_cross_fails_its_test_only(inner: Inner) -> None:
    assert inner.outcome("test_cannot_cross") == "failure", inner.why()
    output = inner.grade("test_cannot_cross")["output"]
    assert "the return value of solution.numbers() cannot cross" in str(output), output


def test_partial_credit_from_the_session_fixture(inner: Inner) -> None:
    grade = inner.grade("test_partial")
    assert (grade["score"], grade["max_score"], grade["status"]) == (1, 4, "failed"), grade
    assert "solution.spin() did not finish: CPU time limit of 0.3 s reached" in str(grade["output"])


def test_the_fresh_fixture_calls_a_function_of_the_submission(inner: Inner) -> None:
    assert inner.outcome("test_fresh") == "passed", inner.why()


def test_a_notebook_loads_cell_by_cell_and_its_state_is_graded(inner: Inner) -> None:
    assert inner.outcome("test_cells") == "passed", inner.why()
    assert inner.outcome("test_state") == "passed", inner.why()
    load = inner.properties("test_cells")["pysandbox run 1"]
    assert load.startswith("5 cells: 3 ok, 1 error, 1 rolled_back"), load
    assert load.endswith(": notebook analysis.ipynb"), load


def test_a_notebook_that_loses_the_session_fails_its_load(inner: Inner) -> None:
    assert inner.outcome("test_after_a_lost_load") == "error", inner.why()
    assert "could not be loaded (notebook lost.ipynb): a cell lost the session" in inner.why()


def test_a_file_the_sandbox_refuses_errors_the_tests_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / os.fsdecode(b"\xff.txt")).write_bytes(b"x")
    (tmp_path / "test_it.py").write_text(
        "import pytest\npytestmark = pytest.mark.sandbox_session(setup='x = 1')\n"
        "def test_it(sandbox_session):\n    pass\n"
    )
    process = run_pytest(tmp_path, "--submission", "sub")
    output = process.stdout + process.stderr
    assert process.returncode == 1, output
    assert "E   the submission could not be loaded: " in output or (
        "the submission could not be loaded: " in output and "Traceback" not in output
    ), output
    assert "pysandbox/" not in output, output


def test_under_xdist_each_worker_loads_a_module_once(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text(INNER_INI)
    (tmp_path / "test_stateful.py").write_text(STATEFUL)
    (tmp_path / "test_programs.py").write_text(PROGRAMS)
    process = run_pytest(
        tmp_path, "-n", "2", "--dist", "loadscope", "--junitxml", "junit.xml", xdist=True
    )
    junit = ET.parse(tmp_path / "junit.xml").getroot()
    failed = sorted(
        case.get("name", "")
        for case in junit.iter("testcase")
        if case.find("failure") is not None or case.find("error") is not None
    )
    expected = ["test_2_loops_forever", "test_4_crashes_the_interpreter", "test_5_eats_memory"]
    assert failed == sorted([*expected, "test_failing_check"]), process.stdout
    loads = [
        p.get("value", "")
        for p in junit.iter("property")
        if "setup:" in p.get("value", "") and p.get("name", "").startswith("pysandbox run")
    ]
    assert len(loads) == 2, loads  # one per module


def test_each_modules_session_is_closed_at_its_end(inner: Inner) -> None:
    assert inner.outcome("test_no_session_outlives_its_module") == "passed", inner.why()
    # bwrap's command line holds the disk size: no other test's sandbox has this one.
    assert survivors(str(inner.disk), within=0) == []


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("sandbox_session('x')", "takes the keywords"),
        ("sandbox_session(setup=1)", "setup is Python code (str) or a program"),
        ("sandbox_session(setup='x', notebook='n.ipynb')", "give setup or notebook, not both"),
        ("sandbox_session(setup_cpu_time=0)", "must be seconds > 0"),
    ],
)
def test_a_bad_marker_is_a_usage_error(tmp_path: Path, marker: str, message: str) -> None:
    (tmp_path / "test_usage.py").write_text(
        f"import pytest\npytestmark = pytest.mark.{marker}\n"
        "def test_it(sandbox_session):\n    pass\n"
    )
    process = run_pytest(tmp_path)
    assert process.returncode == 4, process.stdout + process.stderr
    assert message in process.stdout + process.stderr


def test_a_marker_on_a_test_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "test_usage.py").write_text(
        "import pytest\n@pytest.mark.sandbox_session(setup='x = 1')\n"
        "def test_it(sandbox_session):\n    pass\n"
    )
    process = run_pytest(tmp_path)
    assert process.returncode == 4, process.stdout + process.stderr
    assert "marks a module (pytestmark = ...)" in process.stdout + process.stderr


def test_the_session_scope_shares_one_sandbox_across_modules(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text(INNER_INI + "sandbox_session_scope = session\n")
    for n in (1, 2):
        (tmp_path / f"test_shared_{n}.py").write_text(SHARED.replace("{n}", str(n)))
    run = Inner(tmp_path)
    assert run.process.returncode == 0, run.why()
    loads = [
        name
        for n in (1, 2)
        for name, value in run.properties(f"test_shared_{n}").items()
        if "setup:" in value
    ]
    assert loads == ["pysandbox run 1"], run.why()
