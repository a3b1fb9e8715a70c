# SPDX-License-Identifier: MIT
"""The ``%%sandbox`` cell magic in a real IPython ``InteractiveShell``: loading it, output
as it arrives, the verdict, limits, files, the stored result, usage errors, interrupts.
"""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import CapturedIO, capture_output
from support.docs import DOCS, README, code_blocks
from support.filtered import WRITE
from support.processes import survivors, unique_marker
from support.timing import PROMPTLY

import pysandbox
from pysandbox import Result, Status


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    """The process's IPython shell with ``%load_ext pysandbox`` done, as a user does."""
    ipython = InteractiveShell.instance()
    ipython.run_line_magic("load_ext", "pysandbox")
    yield ipython
    ipython.user_ns.pop("result", None)


def _cell(shell: InteractiveShell, line: str, cell: str) -> CapturedIO:
    """Run ``%%sandbox line`` over ``cell``, capturing its output and displays."""
    with capture_output() as captured:
        shell.run_cell_magic("sandbox", line, cell)
    return captured


def _verdict(captured: CapturedIO) -> str:
    (output,) = captured.outputs
    assert output.data["text/html"].startswith("<div><strong")
    text: str = output.data["text/plain"]
    return text


def test_importing_pysandbox_does_not_import_ipython() -> None:
    check = (
        "import sys, pysandbox; print('IPython' in sys.modules, pysandbox.load_ipython_extension)"
    )
    shown = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, check=True
    ).stdout
    assert shown.startswith("False <function load_ipython_extension")


def test_load_ext_registers_the_cell_magic(shell: InteractiveShell) -> None:
    magic = shell.magics_manager.magics["cell"]["sandbox"]
    assert "--cpu-time" in magic.__doc__ and "--files" in magic.__doc__


def test_load_ipython_extension_refuses_what_is_not_a_shell() -> None:
    with pytest.raises(TypeError, match="ipython must be an IPython shell"):
        pysandbox.load_ipython_extension(object())  # type: ignore[arg-type]


def test_a_cell_shows_its_output_then_the_verdict(shell: InteractiveShell) -> None:
    code = "import os, sys\nprint('out', os.getpid())\nprint('err', file=sys.stderr)"
    captured = _cell(shell, "", code)
    assert captured.stdout == "out 2\n"  # pid 2: the sandbox's own pid namespace
    assert captured.stderr == "err\n"
    assert _verdict(captured).startswith("pysandbox: ok, exit 0, cpu ")


def test_the_result_is_stored_under_the_name_given(shell: InteractiveShell) -> None:
    captured = _cell(shell, "--result result", "print('stored'); raise SystemExit(5)")
    result = shell.user_ns["result"]
    assert isinstance(result, Result)
    assert (result.status, result.returncode, result.stdout) == (
        Status.NONZERO_EXIT,
        5,
        b"stored\n",
    )
    assert _verdict(captured).startswith("pysandbox: nonzero_exit, exit 5, cpu ")


def test_limit_options_hold(shell: InteractiveShell) -> None:
    captured = _cell(shell, "--cpu-time 300ms --wall-time 30 --result result", "while True: pass")
    assert shell.user_ns["result"].status is Status.CPU_TIME_EXCEEDED
    assert _verdict(captured).startswith(
        "pysandbox: cpu_time_exceeded (limit 0.3 s), killed by SIGKILL, cpu "
    )

    _cell(shell, "--stdout-limit 1K --result result", "print('x' * 5000)")
    assert shell.user_ns["result"].status is Status.OUTPUT_EXCEEDED
    _cell(shell, "--stdout-limit 1K --truncate-output --result result", "print('x' * 5000)")
    assert shell.user_ns["result"].stdout == b"x" * 1024


def test_files_are_copied_in_by_name(shell: InteractiveShell, tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("by base name")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "other.txt").write_text("chosen name")
    (tmp_path / "tool.sh").write_text("#!/bin/sh\necho tool ran\n")
    (tmp_path / "tool.sh").chmod(0o755)
    code = (
        "import os, subprocess\n"
        "print(open('data.txt').read()); print(open('renamed.txt').read())\n"
        "print(os.access('data.txt', os.X_OK), subprocess.run(['./tool.sh']).returncode)"
    )
    captured = _cell(shell, "--files data.txt renamed.txt=sub/other.txt tool.sh", code)
    assert captured.stdout == "by base name\nchosen name\ntool ran\nFalse 0\n"


def test_env_and_readable_reach_the_code(shell: InteractiveShell, tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "notes.txt").write_text("readable")
    notes = str(tmp_path / "shared" / "notes.txt")
    code = f"import os; print(os.environ['GREETING']); print(open({notes!r}).read())"
    captured = _cell(shell, "--env GREETING=hello --readable shared", code)
    assert captured.stdout == "hello\nreadable\n"


def test_output_is_decoded_across_chunks_and_invalid_utf8_replaced(
    shell: InteractiveShell,
) -> None:
    code = (
        "import sys, time\n"
        "sys.stdout.buffer.write(b'caf\\xc3'); sys.stdout.flush(); time.sleep(0.2)\n"
        "sys.stdout.buffer.write(b'\\xa9 \\xff\\n')"
    )
    assert _cell(shell, "", code).stdout == "caf\u00e9 \ufffd\n"


class _InterruptOnFirstLine(io.StringIO):
    """A ``sys.stdout`` that raises ``KeyboardInterrupt`` on the first write, as Ctrl-C
    during the call would: only output written while the program runs can trigger it."""

    def write(self, text: str) -> int:
        super().write(text)
        raise KeyboardInterrupt


def test_output_arrives_live_and_an_interrupt_kills_the_sandbox(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The program prints, then sleeps 60 s: the output reached ``sys.stdout`` while it
    ran, and the interrupt raised there killed the sandbox; the next cell runs fine."""
    marker = unique_marker()
    written = _InterruptOnFirstLine()
    monkeypatch.setattr(sys, "stdout", written)
    with pytest.raises(KeyboardInterrupt):
        shell.run_cell_magic(
            "sandbox",
            f"--wall-time 60 --env MARKER={marker}",
            "import time\nprint('working', flush=True)\ntime.sleep(60)",
        )
    assert written.getvalue() in ("working", "working\n")  # the first chunk
    assert survivors(marker, within=PROMPTLY) == []
    monkeypatch.undo()
    assert _cell(shell, "", "print('next cell')").stdout == "next cell\n"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--cpu-time 0", "--cpu-time: must be greater than 0"),
        ("--memory lots", "--memory: expected bytes"),
        ("--bogus", "unrecognized arguments: --bogus"),
        ("stray", "unrecognized arguments: stray"),
        ("--files missing.txt", "--files: cannot read 'missing.txt'"),
        ("--files =x", "--files: expected PATH or NAME=PATH"),
        ("--env NOVALUE", "--env: expected NAME=VALUE"),
        ("--result 1x", "--result: not a Python variable name"),
        ("--result class", "--result: not a Python variable name"),
        ("--env 'A=unclosed", "No closing quotation"),
        ("--readable /proc", "would cover the sandbox's /proc"),
        ("--files-include ''", "files_include has an empty pattern"),
        ("--files-exclude '[[:digit:]]'", "files_exclude has a pattern holding '\\[:'"),
    ],
)
def test_bad_options_are_usage_errors(shell: InteractiveShell, line: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        shell.run_cell_magic("sandbox", line, "print('never runs')")


def test_files_include_and_exclude_choose_the_files(shell: InteractiveShell) -> None:
    _cell(shell, "--files-include out --files-include '*.txt' --files-exclude '*.json' "
          "--result result", WRITE)  # fmt: skip
    assert set(shell.user_ns["result"].files) == {"out/a.png", "notes.txt"}


def test_a_usage_error_in_a_cell_shows_no_traceback(shell: InteractiveShell) -> None:
    with capture_output() as captured:
        outcome = shell.run_cell("%%sandbox --cpu-time -1\nprint('never runs')")
    assert isinstance(outcome.error_in_exec, UsageError)
    assert "UsageError" in captured.stderr and "Traceback" not in captured.stderr
    assert "%%sandbox: error: argument --cpu-time" in captured.stderr
    assert "never runs" not in captured.stdout


def test_help_prints_the_options_and_runs_nothing(shell: InteractiveShell) -> None:
    captured = _cell(shell, "--help", "print('never runs')")
    assert captured.stdout.startswith("usage: %%sandbox")
    assert "--wall-time" in captured.stdout and "never runs" not in captured.stdout
    assert captured.outputs == []


NOTEBOOK_CELLS = code_blocks("ipython", DOCS / "notebooks.rst")
NOTEBOOK_SCORES = "ana,78\nbob,91\ncyd,64\n"


def test_the_notebook_page_cells_run_as_it_says(shell: InteractiveShell) -> None:
    """The notebooks page's cells, in order, in a real shell, with its ``scores.csv``."""
    Path("scores.csv").write_text(NOTEBOOK_SCORES)
    assert len(NOTEBOOK_CELLS) == 5  # the two of one-shot cells, then the Sessions section's
    with capture_output() as captured:
        for cell in NOTEBOOK_CELLS[:2]:
            assert shell.run_cell(textwrap.dedent(cell)).success
    assert captured.stdout.endswith("3 rows; best: 91\n")
    verdict = _verdict(captured)
    assert verdict.startswith("pysandbox: ok, exit 0, cpu ")
    assert verdict.endswith(f"; files: scores.csv ({len(NOTEBOOK_SCORES)} bytes)")
    assert shell.user_ns.pop("run").stdout == b"3 rows; best: 91\n"


def test_the_readme_quick_start_cells_run_as_it_says(shell: InteractiveShell) -> None:
    """The README's two cells: the extension loaded, then one sandboxed cell."""
    cells = code_blocks("ipython", README)
    assert len(cells) == 2
    with capture_output() as captured:
        for cell in cells:
            assert shell.run_cell(textwrap.dedent(cell)).success
    assert captured.stdout.endswith("42\n")
    assert _verdict(captured).startswith("pysandbox: ok, exit 0, cpu ")
