# SPDX-License-Identifier: MIT
"""The pytest plugin, as graders use it: real pytest sessions in subprocesses, loaded
by the entry point alone, whose tests make real sandboxed runs."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.docs import DOCS, README, code_blocks
from support.inner_pytest import run_pytest

INNER_INI = """\
[pytest]
addopts = --strict-markers --strict-config
sandbox_stdout = 1K
sandbox_wall_time = 30
"""

INNER_TESTS = """\
import asyncio

import pytest

from pysandbox import Limits, Status

pytestmark = pytest.mark.sandbox(processes=20, memory=300 * 2**20)

BUSY = "while True: pass"
ADDRESS_SPACE = "import resource; print(resource.getrlimit(resource.RLIMIT_AS)[0])"


@pytest.mark.sandbox(cpu_time="200ms")
def test_marker_cpu_time(sandbox):
    assert sandbox.limits.cpu_time == 0.2
    assert sandbox.run_python(BUSY).status is Status.CPU_TIME_EXCEEDED


def test_ini_stdout(sandbox):
    assert sandbox.limits.stdout == 1024
    assert sandbox.run_python("print('x' * 5000)").status is Status.OUTPUT_EXCEEDED


def test_explicit_limits_win(sandbox):
    result = sandbox.run_python("print('x' * 5000)", limits=Limits(stdout=10_000))
    assert result.status is Status.OK


def test_options_pass_through(sandbox):
    chunks = []
    result = sandbox.run(
        ["sh", "-c", "echo $GREETING"], env={"GREETING": "hi"}, on_stdout=chunks.append
    )
    assert b"".join(chunks) == result.stdout == b"hi\\n"


class TestNearestWins:
    pytestmark = pytest.mark.sandbox(cpu_time=2, memory=200 * 2**20)

    @pytest.mark.sandbox(memory="150M")
    def test_per_field(self, sandbox):
        limits = sandbox.limits
        assert (limits.memory, limits.cpu_time, limits.processes) == (150 * 2**20, 2, 20)
        assert (limits.stdout, limits.wall_time) == (1024, 30)
        assert sandbox.run_python(ADDRESS_SPACE).stdout == b"%d\\n" % (150 * 2**20)

    def test_class_over_module(self, sandbox):
        assert sandbox.limits.memory == 200 * 2**20


@pytest.mark.sandbox(cpu_time=0.2)
def test_async_forms(sandbox):
    async def both():
        return await asyncio.gather(
            sandbox.run_python_async(BUSY), sandbox.run_async(["echo", "async"])
        )

    busy, echo = asyncio.run(both())
    assert busy.status is Status.CPU_TIME_EXCEEDED
    assert echo.stdout == b"async\\n"
    assert len(sandbox.results) == 2


def test_failing_submission(sandbox):
    result = sandbox.run_python(
        "import sys\\n"
        "for n in range(1, 31):\\n"
        "    print(f'line {n} of the output')\\n"
        "print('what went wrong', file=sys.stderr)\\n"
        "sys.exit(3)\\n"
    )
    assert result.returncode == 0
"""


class Session:
    """One inner pytest session: its process, its output and its JUnit XML."""

    def __init__(self, process: subprocess.CompletedProcess[str], junit: Path) -> None:
        self.process = process
        self.junit = ET.parse(junit).getroot()

    def testcase(self, name: str) -> ET.Element:
        (case,) = (case for case in self.junit.iter("testcase") if case.get("name") == name)
        return case

    def passed(self, name: str) -> bool:
        case = self.testcase(name)
        return case.find("failure") is None and case.find("error") is None

    def properties(self, name: str) -> dict[str, str]:
        case = self.testcase(name)
        return {p.get("name", ""): p.get("value", "") for p in case.iter("property")}

    def why(self) -> str:
        return self.process.stdout + self.process.stderr


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    """The inner tests above, run once for the whole module."""
    directory = tmp_path_factory.mktemp("plugin")
    (directory / "pytest.ini").write_text(INNER_INI)
    (directory / "test_inner.py").write_text(INNER_TESTS)
    process = run_pytest(directory, "--junitxml", "junit.xml")
    return Session(process, directory / "junit.xml")


def test_the_entry_point_alone_loads_the_plugin(session: Session) -> None:
    header = re.search(r"^plugins: (.*)$", session.process.stdout, re.MULTILINE)
    assert header is not None and "pysandbox-" in header.group(1), session.why()
    assert session.process.returncode == 1, session.why()  # the one failing test


def test_a_marker_sets_the_limits_of_the_runs(session: Session) -> None:
    assert session.passed("test_marker_cpu_time"), session.why()


def test_an_ini_option_sets_the_default_limits(session: Session) -> None:
    assert session.passed("test_ini_stdout"), session.why()


def test_explicit_limits_win_over_markers_and_ini(session: Session) -> None:
    assert session.passed("test_explicit_limits_win"), session.why()


def test_the_other_options_go_through_unchanged(session: Session) -> None:
    assert session.passed("test_options_pass_through"), session.why()


def test_the_nearest_marker_wins_per_field(session: Session) -> None:
    assert session.passed("test_per_field"), session.why()
    assert session.passed("test_class_over_module"), session.why()


def test_async_runs_are_attached_too(session: Session) -> None:
    assert session.passed("test_async_forms"), session.why()
    properties = session.properties("test_async_forms")
    verdicts = sorted(properties[f"pysandbox run {n}"].split(",")[0] for n in (1, 2))
    assert verdicts == ["cpu_time_exceeded (limit 0.2 s)", "ok"], properties


def test_a_failing_test_shows_the_run_under_its_failure(session: Session) -> None:
    assert not session.passed("test_failing_submission"), session.why()
    output = session.process.stdout
    title = re.search(r"^-+ pysandbox run 1: run_python: import sys -+$", output, re.MULTILINE)
    assert title is not None, output
    section = output[title.end() :].split("\n===")[0]
    assert section.splitlines()[1].startswith("nonzero_exit, exit 3, cpu "), section
    assert "(last 10 of 30 lines)\nline 21 of the output\n" in section, section
    assert "line 20 of the output" not in section, section
    assert "line 30 of the output\n--- stderr ---\nwhat went wrong" in section, section


def test_junit_xml_carries_each_runs_verdict(session: Session) -> None:
    busy = session.properties("test_marker_cpu_time")["pysandbox run 1"]
    assert busy.startswith("cpu_time_exceeded (limit 0.2 s), killed by SIGKILL"), busy
    failing = session.properties("test_failing_submission")["pysandbox run 1"]
    assert failing.startswith("nonzero_exit, exit 3, cpu "), failing
    assert failing.endswith(": run_python: import sys"), failing


@pytest.mark.parametrize(
    ("ini", "marker", "message"),
    [
        ("", "sandbox(cpu=1)", "test_usage.py::test_it: @pytest.mark.sandbox: unknown limit 'cpu'"),
        ("", "sandbox(0.5)", "@pytest.mark.sandbox takes keyword arguments only"),
        ("", "sandbox(cpu_time=0)", "@pytest.mark.sandbox: Limits.cpu_time must be"),
        ("", "sandbox(memory=1.5)", "@pytest.mark.sandbox: Limits.memory must be an int"),
        ("", "sandbox(memory='lots')", "@pytest.mark.sandbox(memory='lots'): expected bytes"),
        ("", "sandbox(cpu_time='-1s')", "sandbox(cpu_time='-1s'): must be greater than 0"),
        ("sandbox_memory = lots", "sandbox()", "ini option sandbox_memory: expected bytes"),
        ("sandbox_processes = 1", "sandbox()", "ini option sandbox_processes: must be at least"),
        ("sandbox_truncate_output = maybe", "sandbox()", "ini option sandbox_truncate_output"),
    ],
)
def test_a_bad_limit_is_a_usage_error_before_any_test_runs(
    tmp_path: Path, ini: str, marker: str, message: str
) -> None:
    (tmp_path / "pytest.ini").write_text(f"[pytest]\n{ini}\n")
    (tmp_path / "test_usage.py").write_text(
        f"import pytest\n\n@pytest.mark.{marker}\ndef test_it(sandbox):\n"
        "    open('ran', 'w').close()\n"
    )
    process = run_pytest(tmp_path)
    assert process.returncode == pytest.ExitCode.USAGE_ERROR, process.stdout + process.stderr
    assert process.stderr.startswith("ERROR: "), process.stderr
    assert message in process.stderr, process.stderr
    assert "Traceback" not in process.stderr, process.stderr
    assert not (tmp_path / "ran").exists()


def test_the_plugin_can_be_turned_off_by_its_name(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_off.py").write_text("def test_it(sandbox):\n    pass\n")
    process = run_pytest(tmp_path, "-p", "no:pysandbox")
    assert process.returncode == pytest.ExitCode.TESTS_FAILED, process.stdout
    assert "fixture 'sandbox' not found" in process.stdout, process.stdout


def test_without_autoloading_the_module_is_the_plugin(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_on.py").write_text(
        "def test_it(sandbox):\n    assert sandbox.run(['true']).returncode == 0\n"
    )
    no_autoload = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    process = run_pytest(tmp_path, env=no_autoload)
    assert "fixture 'sandbox' not found" in process.stdout, process.stdout
    process = run_pytest(tmp_path, "-p", "pysandbox.pytest_plugin", env=no_autoload)
    assert process.returncode == pytest.ExitCode.OK, process.stdout + process.stderr


def test_importing_pysandbox_does_not_import_pytest() -> None:
    imported = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, pysandbox\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('pytest', '_pytest', 'pluggy')))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert imported.strip() == "[]"


@pytest.mark.parametrize("document", [README, DOCS / "graders.rst"], ids=lambda p: p.name)
def test_the_documented_example_passes_under_pytest(tmp_path: Path, document: Path) -> None:
    """The one example of the document that uses the fixture: every test in it passes."""
    blocks = code_blocks("python", document)
    (example,) = (b for b in blocks if "def test_" in b and re.search(r"\(sandbox[,)]", b))
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = --strict-markers\n")
    (tmp_path / "test_example.py").write_text(textwrap.dedent(example))
    process = run_pytest(tmp_path)
    assert process.returncode == pytest.ExitCode.OK, process.stdout + process.stderr
    tests = example.count("def test_")
    assert re.search(rf"\b{tests} passed\b", process.stdout), process.stdout


@pytest.mark.parametrize(
    ("document", "tests"), [(README, 1), (DOCS / "graders.rst", 3)], ids=["README", "graders"]
)
def test_the_documented_session_example_passes_under_pytest(
    tmp_path: Path, document: Path, tests: int
) -> None:
    """The example of the document that uses ``sandbox_session``, graded against a
    submission whose ``solution.py`` is right: every test in it passes."""
    blocks = code_blocks("python", document)
    (example,) = (block for block in blocks if "(sandbox_session" in block)
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = --strict-markers\n")
    (tmp_path / "test_example.py").write_text("import pytest\n" + textwrap.dedent(example))
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "solution.py").write_text(
        "def add(a, b):\n    return a + b\n\n\n"
        "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, n))\n"
    )
    process = run_pytest(tmp_path, "--submission", "submission")
    assert process.returncode == pytest.ExitCode.OK, process.stdout + process.stderr
    assert re.search(rf"\b{tests} passed\b", process.stdout), process.stdout
