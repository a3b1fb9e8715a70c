# SPDX-License-Identifier: MIT
"""``%%sandbox --session NAME`` and ``%sandbox_close`` in a real IPython
``InteractiveShell``: state kept from cell to cell, rollback, exceptions, the stored
result, closing, usage errors, separate sessions, hostile output, interrupts, unloading.
"""

from __future__ import annotations

import signal
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import CapturedIO, capture_output
from support.docs import DOCS, code_blocks
from support.filtered import WRITE
from support.processes import pids_with_marker, survivors, unique_marker
from support.timing import PROMPTLY

from pysandbox import CellResult, Status

#: The Sessions section's cells of the notebooks page (after the one-shot page's two).
SESSION_CELLS = code_blocks("ipython", DOCS / "notebooks.rst")[2:]


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    """The process's IPython shell with ``%load_ext pysandbox`` done; every session the
    test left open is closed after it."""
    ipython = InteractiveShell.instance()
    ipython.run_line_magic("load_ext", "pysandbox")
    yield ipython
    with capture_output():
        ipython.run_line_magic("sandbox_close", "")
    ipython.user_ns.pop("result", None)


def _cell(shell: InteractiveShell, line: str, cell: str) -> CapturedIO:
    """Run ``%%sandbox line`` over ``cell``, capturing its output and displays."""
    with capture_output() as captured:
        shell.run_cell_magic("sandbox", line, cell)
    return captured


def _shown(captured: CapturedIO) -> tuple[str | None, str]:
    """The value a cell displayed (None without one) and its verdict line, checking
    that each has its HTML form."""
    *values, verdict = captured.outputs
    assert verdict.data["text/html"].startswith("<div><strong")
    if not values:
        return None, verdict.data["text/plain"]
    (value,) = values
    assert value.data["text/html"].startswith("<pre>")
    return value.data["text/plain"], verdict.data["text/plain"]


def _value(shell: InteractiveShell, name: str, code: str) -> str | None:
    value, verdict = _shown(_cell(shell, f"--session {name}", code))
    assert verdict.startswith(f"pysandbox: committed in session {name!r}; cpu ")
    return value


def test_state_is_kept_across_three_cells(shell: InteractiveShell) -> None:
    assert _value(shell, "three", "import math\ndata = [1, 2]") is None
    captured = _cell(shell, "--session three", "def total():\n    return sum(data)\ndata += [3]")
    assert captured.stdout == "" and captured.stderr == ""
    captured = _cell(shell, "--session three", "print('total', total())\nmath.sqrt(total() * 6)")
    assert captured.stdout == "total 6\n"
    assert _shown(captured)[0] == "6.0"


def test_a_rolled_back_infinite_loop_leaves_the_variables_intact(shell: InteractiveShell) -> None:
    _value(shell, "loop", "x = 1\nitems = ['a']")
    captured = _cell(
        shell, "--session loop --cpu-time 300ms", "x = 2\nitems.append('b')\nwhile True: pass"
    )
    assert _shown(captured)[0] is None
    assert _shown(captured)[1].startswith(
        "pysandbox: rolled back in session 'loop': cpu_time_exceeded (limit 0.3 s), "
        "the call passed its CPU time; its state is as before this cell; cpu "
    )
    assert _value(shell, "loop", "x, items") == "(1, ['a'])"


def test_an_exception_shows_its_traceback_and_the_session_goes_on(
    shell: InteractiveShell,
) -> None:
    captured = _cell(shell, "--session raising", "done = 'before'\nprint('ran')\n1 / 0")
    assert captured.stdout == "ran\n"
    assert captured.stderr.startswith("Traceback (most recent call last):\n")
    assert 'File "<cell-1>", line 3' in captured.stderr
    assert captured.stderr.endswith("ZeroDivisionError: division by zero\n")
    assert _shown(captured)[1].startswith(
        "pysandbox: committed in session 'raising', raised ZeroDivisionError; cpu "
    )
    assert _value(shell, "raising", "done") == "'before'"  # as in Jupyter: committed


def test_the_cell_result_is_stored_under_the_name_given(shell: InteractiveShell) -> None:
    _cell(shell, "--session stored --result result", "print('out')\n6 * 7")
    result = shell.user_ns["result"]
    assert isinstance(result, CellResult) and result.committed
    assert (result.stdout, result.value, result.error) == (b"out\n", "42", None)
    _cell(shell, "--session stored --result result", "import os\nos._exit(3)")
    result = shell.user_ns["result"]
    assert (result.outcome, result.status, result.returncode) == (
        "rolled_back",
        Status.NONZERO_EXIT,
        3,
    )


def test_two_names_are_two_sessions(shell: InteractiveShell) -> None:
    _value(shell, "first", "x = 'one'")
    _value(shell, "second", "x = 'two'")
    assert _value(shell, "first", "x") == "'one'"
    assert _value(shell, "second", "x") == "'two'"
    with capture_output() as captured:
        shell.run_line_magic("sandbox_close", "first")
    assert captured.stdout == "pysandbox: session 'first' closed\n"
    assert _value(shell, "second", "x") == "'two'"


def test_closing_leaves_no_process_and_the_next_cell_starts_anew(
    shell: InteractiveShell,
) -> None:
    marker = unique_marker()
    _value(shell, "closing", "x = 1")
    _cell(shell, f"--session marked --env MARKER={marker}", "import os\nos.environ['MARKER']")
    assert pids_with_marker(marker) != []
    with capture_output():
        shell.run_line_magic("sandbox_close", "marked")
    assert survivors(marker, within=0) == []  # close returns once all is reaped
    captured = _cell(shell, "--session marked", "'MARKER' in __import__('os').environ")
    assert _shown(captured)[0] == "False"  # a new session, with this cell's options
    assert _value(shell, "closing", "x") == "1"  # the other session is untouched
    with pytest.raises(UsageError, match=r"%sandbox_close: no session named gone \(open: "):
        shell.run_line_magic("sandbox_close", "gone")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--session 'two words'", "--session: a name of 1 to 64 letters"),
        ("--session ''", "--session: a name of 1 to 64 letters"),
        ("--lifetime 10", "--lifetime: only with --session NAME"),
        ("--idle-timeout 10", "--idle-timeout: only with --session NAME"),
        ("--session usage --cpu-budget 0", "--cpu-budget: must be greater than 0"),
        ("--session usage --cpu-time lots", "--cpu-time: expected seconds"),
        ("--session usage --open-files 3", "--open-files: must be at least"),
        ("--session usage --readable /proc", "would cover the sandbox's /proc"),
        ("--session usage --files missing.txt", "--files: cannot read 'missing.txt'"),
    ],
)
def test_bad_options_are_usage_errors(shell: InteractiveShell, line: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        shell.run_cell_magic("sandbox", line, "print('never runs')")
    with capture_output() as captured:
        shell.run_line_magic("sandbox_close", "")
    assert captured.stdout == ""  # nothing was started


def test_session_wide_options_must_repeat_the_starting_values(
    shell: InteractiveShell, tmp_path: Path
) -> None:
    (tmp_path / "shared").mkdir()
    line = f"--session wide --memory 512M --env A=1 --readable {tmp_path / 'shared'}"
    _cell(shell, line, "x = 1")
    assert _shown(_cell(shell, line, "x"))[0] == "1"  # the notebook run again from the top
    for change in ("--memory 1G", "--env A=2", f"--readable {tmp_path}", "--lifetime 60"):
        flag = change.split()[0]
        with pytest.raises(UsageError, match=f"{flag}: session 'wide' started with another"):
            shell.run_cell_magic("sandbox", f"--session wide {change}", "x = 2")
    assert _value(shell, "wide", "x") == "1"


def test_a_sessions_file_patterns_are_given_when_it_starts(shell: InteractiveShell) -> None:
    """Session-wide: every cell gets only the files they let through; a later cell may
    repeat them, or leave them out, but not change them."""
    line = "--session filtered --files-exclude .cache --files-exclude notes.txt --result result"
    _cell(shell, line, WRITE)
    assert set(shell.user_ns["result"].files) == {"out/a.png"}
    _cell(shell, "--session filtered --result result", WRITE.replace('"png")', '"png2")'))
    assert shell.user_ns["result"].files == {"out/a.png": b"png2"}
    for change in ("--files-exclude out", "--files-include out"):
        flag = change.split()[0]
        with pytest.raises(UsageError, match=f"{flag}: session 'filtered' started with"):
            shell.run_cell_magic("sandbox", f"--session filtered {change}", "x = 2")


def test_what_the_sandbox_sends_is_escaped(shell: InteractiveShell) -> None:
    code = textwrap.dedent(
        """
        class Hidden(Exception):
            pass
        Hidden.__name__ = 'Bad\\x1b[2J\\nName'
        class Shown:
            def __repr__(self):
                return '<b>\\x1b[8mconcealed</b>'
        shown = Shown()
        """
    )
    _cell(shell, "--session hostile", code)
    captured = _cell(shell, "--session hostile", "shown")
    value = captured.outputs[0].data
    assert value["text/plain"] == "<b>\\x1b[8mconcealed</b>"
    assert value["text/html"] == "<pre>&lt;b&gt;\\x1b[8mconcealed&lt;/b&gt;</pre>"
    captured = _cell(shell, "--session hostile", "raise Hidden('boom')")
    verdict = captured.outputs[-1].data
    assert "raised Bad\\x1b[2J\\nName; cpu " in verdict["text/plain"]
    assert "\x1b" not in verdict["text/html"] and "\n" not in verdict["text/plain"]


def test_an_interrupt_rolls_the_cell_back_and_the_session_goes_on(
    shell: InteractiveShell,
) -> None:
    """SIGINT to the main thread while the cell spins, as Ctrl-C or the kernel's
    interrupt sends it: the cell ends with ``KeyboardInterrupt``, rolled back."""
    _value(shell, "interrupted", "x = 1")
    main = threading.main_thread().ident
    assert main is not None
    timer = threading.Timer(1.0, signal.pthread_kill, args=(main, signal.SIGINT))
    timer.start()
    started = time.monotonic()
    try:
        with capture_output() as captured, pytest.raises(KeyboardInterrupt):
            shell.run_cell_magic(
                "sandbox",
                "--session interrupted --wall-time 60 --cpu-time 60",
                "x = 2\nwhile True: pass",
            )
    finally:
        timer.cancel()
    assert time.monotonic() - started < 1.0 + PROMPTLY
    assert "pysandbox: interrupted; the cell was rolled back" in captured.stderr
    assert _value(shell, "interrupted", "x") == "1"


def test_a_session_that_ended_starts_again_and_says_so(shell: InteractiveShell) -> None:
    _cell(shell, "--session idle --idle-timeout 0.5 --env KEPT=yes", "x = 1")
    time.sleep(1.5)
    captured = _cell(shell, "--session idle", "import os\n'x' in globals(), os.environ['KEPT']")
    assert captured.stderr.startswith("pysandbox: session 'idle' had ended (")
    assert "(the idle timeout)" in captured.stderr
    assert "starts it again with the same options" in captured.stderr
    assert _shown(captured)[0] == "(False, 'yes')"


def test_unloading_the_extension_ends_every_session(shell: InteractiveShell) -> None:
    marker = unique_marker()
    _cell(shell, f"--session unloaded --env MARKER={marker}", "x = 1")
    assert pids_with_marker(marker) != []
    shell.run_line_magic("unload_ext", "pysandbox")
    try:
        assert survivors(marker, within=0) == []
        assert "sandbox" not in shell.magics_manager.magics["cell"]
        assert "sandbox_close" not in shell.magics_manager.magics["line"]
    finally:
        shell.run_line_magic("load_ext", "pysandbox")
    assert _value(shell, "unloaded", "'x' in globals()") == "False"  # a new session


def test_the_notebook_page_session_cells_run_as_it_says(
    shell: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("scores.csv").write_text("ana,78\nbob,91\ncyd,64\n")
    assert len(SESSION_CELLS) == 3
    outputs = []
    for cell in SESSION_CELLS:
        with capture_output() as captured:
            assert shell.run_cell(textwrap.dedent(cell)).success
        outputs.append(_shown(captured))
    assert outputs[0][0] == "3"
    assert outputs[0][1].startswith("pysandbox: committed in session 'work'; cpu ")
    assert outputs[1][1].startswith(
        "pysandbox: rolled back in session 'work': cpu_time_exceeded (limit 0.3 s), "
    )
    assert outputs[2][0] == "91"
    assert shell.user_ns.pop("best").value == "91"
