# SPDX-License-Identifier: MIT
"""Issue 18 item 10: what the program prints cannot forge the verdict.

The sandboxed program prints an OSC 52 clipboard write, SGR 8 (conceal), a screen clear,
CI log commands and a fake ``pysandbox: ok`` line, then burns CPU past its limit.  On
the host: ``SandboxFailure``'s message and the pytest report sections of a real pytest
run show them escaped; the command line under a real pty shows the real verdict, bold
after a reset, and the program's escapes as visible text.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.callers import Caller
from support.cli import SCRIPT, cli
from support.inner_pytest import run_pytest
from support.timing import cpu, slow

from pysandbox import Limits, SandboxFailure

FORGER = r"""
import sys
sys.stdout.write("\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b[8mhidden\n::error::forged\n")
sys.stdout.write("##vso[task.complete result=Succeeded]\npysandbox: ok, exit 0\n\x1b[8m")
sys.stdout.flush()
while True:
    pass
"""
RAW = ("\x1b]52", "\x1b[2J", "\x1b[8m", "\x07")
BIDI = "".join(map(chr, [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]))


def _assert_escaped(text: str) -> None:
    assert not any(raw in text for raw in RAW), repr(text)
    assert "\\x1b]52;c;ZXZpbA==\\x07" in text and "\\x1b[2J\\x1b[8mhidden" in text, text
    assert "\n::error::" not in text and "\n##vso[" not in text, text
    assert "\\x3a:error::forged" in text and "\\x23#vso[task.complete" in text, text


def test_a_failure_message_shows_the_programs_escapes_escaped(caller: Caller) -> None:
    result = caller.run_python(FORGER, limits=Limits(cpu_time=cpu(0.3), wall_time=slow(20)))
    assert result.status.name == "CPU_TIME_EXCEEDED"
    with pytest.raises(SandboxFailure) as failure:
        result.check()
    _assert_escaped(str(failure.value))


INNER = f"""
from pysandbox import Limits
FORGER = {FORGER!r}

def test_forger(sandbox):
    sandbox.run_python(FORGER, limits=Limits(cpu_time={cpu(0.3)}, wall_time={slow(20)})).check()


def test_forger_in_a_section(sandbox):
    result = sandbox.run_python(FORGER, limits=Limits(cpu_time={cpu(0.3)}, wall_time={slow(20)}))
    assert result.returncode == 0
"""


def test_pytest_report_sections_show_the_programs_escapes_escaped(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_inner.py").write_text(INNER)
    process = run_pytest(tmp_path, "-rA")
    report = process.stdout
    assert process.returncode == 1, report + process.stderr
    # check()'s failure shows its run in its message; the plain assert's run has a section.
    assert "SandboxFailure: sandboxed program failed: CPU_TIME_EXCEEDED" in report, report
    assert "pysandbox run 1" in report and "cpu_time_exceeded" in report, report
    for test in ("_ test_forger _", "_ test_forger_in_a_section _"):
        _assert_escaped(report.split(test)[1].split("\n___")[0])


def _on_a_pty(*args: str) -> tuple[int, bytes]:
    """Run the command line with stdout and stderr on a fresh pty; its status and all it
    wrote there."""
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [SCRIPT, *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
        env={**os.environ, "TERM": "xterm"},
    )  # fmt: skip
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + slow(30)
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if not ready:
            continue
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: every end of the slave is closed
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    return process.wait(timeout=slow(10)), seen


def test_on_a_terminal_the_real_verdict_shows_and_the_fake_one_is_escaped() -> None:
    status, seen = _on_a_pty(
        "python", "--cpu-time", str(cpu(0.3)), "--wall-time", str(slow(20)), "-c", FORGER
    )
    assert status == 124
    shown = seen.decode()
    *program, last = shown.rstrip("\r\n").split("\r\n")
    assert last.startswith("\x1b[0m\x1b[1mpysandbox: cpu_time_exceeded"), repr(shown)
    assert last.endswith("\x1b[0m"), repr(last)
    printed = "\n".join(program)
    assert "\x1b" not in printed and "\x07" not in printed, repr(printed)
    assert "\\x1b[8m" in printed and "pysandbox: ok, exit 0" in printed, repr(printed)


def test_to_a_pipe_the_output_stays_byte_exact() -> None:
    done = cli("python", "--cpu-time", str(cpu(0.3)), "--wall-time", str(slow(20)), "-c", FORGER)
    assert done.returncode == 124
    assert done.stdout.startswith(b"\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b[8mhidden\n"), done.stdout
    assert done.stderr.decode().splitlines()[-1].startswith("pysandbox: cpu_time_exceeded")


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_escaped_text_holds_no_control_character_but_newline_and_tab(text: str) -> None:
    from pysandbox._model.escape import escape_report

    for char in escape_report(text):
        assert char in "\n\t" or not (
            ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0 or char in BIDI
        ), repr(char)
    lines = escape_report(text).split("\n")
    assert not any(line.lstrip(" \t").startswith("::") for line in lines)
    assert not any("##vso[" in line or line.lstrip(" \t").startswith("##[") for line in lines)
