# SPDX-License-Identifier: MIT
"""Rich reprs: what ``Result``, ``ProcessOutput`` and ``SelftestReport`` look like in IPython
and Jupyter, from the pure renderers up to a real ``InteractiveShell``'s display formatter.
"""

from __future__ import annotations

import signal

import pytest
from IPython.core.interactiveshell import InteractiveShell

from pysandbox import Check, ProcessOutput, Result, SelftestReport, Status, run_python
from pysandbox._model import display as _display

HEAD = _display.FOLD_HEAD_LINES
TAIL = _display.FOLD_TAIL_LINES


def _result(**changes: object) -> Result:
    fields: dict[str, object] = {
        "status": Status.OK,
        "returncode": 0,
        "signal": None,
        "stdout": b"",
        "stderr": b"",
        "stdout_truncated": False,
        "stderr_truncated": False,
        "wall_time": 0.25,
        "cpu_time": 0.125,
        "max_rss": 9 * 2**20 + 2**19,
        "files": {},
        "files_truncated": False,
    }
    fields.update(changes)
    return Result(**fields)  # type: ignore[arg-type]


def _numbered(count: int) -> str:
    return "".join(f"line {n}\n" for n in range(count))


@pytest.mark.no_bwrap
def test_text_gives_the_verdict_then_the_numbers_then_the_output() -> None:
    result = _result(
        status=Status.NONZERO_EXIT,
        returncode=3,
        stdout=b"out\n",
        stderr=b"err\n",
        files={"b.bin": b"x" * 3072, "a.txt": b"hello"},
        files_truncated=True,
        executables={"b.bin"},
    )
    assert _display.result_text(result).splitlines() == [
        "Result: NONZERO_EXIT, exit code 3",
        "CPU 0.125 s, wall 0.250 s, max RSS 9.5 MiB",
        "files: a.txt (5 bytes), b.bin (3 KiB, executable), some left out (files_truncated)",
        "--- stdout (1 line) ---",
        "out",
        "--- stderr (1 line) ---",
        "err",
    ]


@pytest.mark.no_bwrap
def test_a_signal_is_named_in_text_and_html() -> None:
    result = _result(status=Status.SIGNALED, returncode=None, signal=signal.SIGSEGV)
    assert _display.result_text(result).startswith("Result: SIGNALED, killed by SIGSEGV (11)\n")
    assert "SIGNALED</strong> killed by SIGSEGV (11)" in _display.result_html(result)


@pytest.mark.no_bwrap
def test_empty_output_says_empty_and_has_no_block() -> None:
    result = _result()
    assert _display.result_text(result).endswith("--- stdout (empty) ---\n--- stderr (empty) ---")
    page = _display.result_html(result)
    assert "stdout (empty)" in page and "stderr (empty)" in page
    assert "<pre>" not in page and "<details>" not in page


@pytest.mark.no_bwrap
def test_long_output_is_folded_to_its_first_and_last_lines() -> None:
    result = _result(stdout=_numbered(100).encode(), stdout_truncated=True)
    text = _display.result_text(result)
    shown = text.split("--- stdout (100 lines, truncated at the cap) ---\n")[1].splitlines()
    expected = [f"line {n}" for n in range(HEAD)]
    expected.append(f"... {100 - HEAD - TAIL} lines folded ...")
    expected += [f"line {n}" for n in range(100 - TAIL, 100)]
    expected.append("--- stderr (empty) ---")
    assert shown == expected


@pytest.mark.no_bwrap
def test_output_that_fits_is_not_folded() -> None:
    fits = _numbered(HEAD + TAIL)
    assert _display.fold(fits) == fits.rstrip("\n")
    assert not _display.is_folded(fits)
    assert "folded" not in _display.fold(_numbered(HEAD + TAIL))
    assert "... 1 line folded ..." in _display.fold(_numbered(HEAD + TAIL + 1))


@pytest.mark.no_bwrap
def test_a_long_line_is_clipped_with_a_count() -> None:
    line = "x" * (_display.LINE_CHARS + 123)
    assert _display.fold(line) == "x" * _display.LINE_CHARS + " ... [123 more characters]"
    assert _display.is_folded(line)


@pytest.mark.no_bwrap
def test_html_escapes_output_file_names_and_checks() -> None:
    script = "<script>alert(1)</script>"
    result = _result(stdout=script.encode(), stderr=b"a & b", files={"<b>x": b""})
    page = _display.result_html(result)
    assert "<script>" not in page and "<b>x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "a &amp; b" in page and "&lt;b&gt;x (0 bytes)" in page

    output = ProcessOutput(1, script, script)
    assert "<script>" not in _display.process_output_html(output)
    report = SelftestReport((Check(script, False, script, script),))
    assert "<script>" not in _display.selftest_html(report)
    assert _display.selftest_html(report).count("&lt;script&gt;") == 3


@pytest.mark.no_bwrap
def test_long_html_output_is_folded_with_the_whole_in_a_details_element() -> None:
    long = _display.result_html(_result(stdout=_numbered(100).encode()))
    pre, details = long.split("<details>")
    assert f"... {100 - HEAD - TAIL} lines folded ..." in pre and "line 50\n" not in pre
    assert "line 50\n" in details and "line 99" in details
    assert "<details>" not in _display.result_html(_result(stdout=_numbered(3).encode()))


@pytest.mark.no_bwrap
def test_invalid_utf8_is_replaced_not_raised() -> None:
    result = _result(stdout=b"ok \xff\xfe end\n", stderr=b"\x80")
    assert "ok \ufffd\ufffd end" in _display.result_text(result)
    assert "ok \ufffd\ufffd end" in _display.result_html(result)
    assert "\ufffd" in _display.result_text(result).split("stderr")[1]


@pytest.mark.no_bwrap
def test_process_output_gives_ok_or_the_signal_behind_a_return_code() -> None:
    assert _display.process_output_text(ProcessOutput(0, "42", "")).splitlines() == [
        "ProcessOutput: ok, return code 0",
        "--- stdout (1 line) ---",
        "42",
        "--- stderr (empty) ---",
    ]
    killed = _display.process_output_text(ProcessOutput(137, "", ""))
    assert killed.startswith("ProcessOutput: failed, return code 137 (128 + SIGKILL)\n")
    assert _display.process_output_text(ProcessOutput(3, "", "")).startswith(
        "ProcessOutput: failed, return code 3\n"
    )


@pytest.mark.no_bwrap
def test_selftest_report_lists_checks_with_yes_no_and_only_the_fixes_needed() -> None:
    report = SelftestReport(
        (
            Check("network", True, "not reached", "unused fix"),
            Check("cpu", False, "sampled", "do X"),
        )
    )
    assert _display.selftest_text(report).splitlines() == [
        "selftest: 1 of 2 protections do NOT hold",
        "[yes] network: not reached",
        "[NO ] cpu: sampled",
        "       fix: do X",
    ]
    page = _display.selftest_html(report)
    assert "unused fix" not in page and "<td>do X</td>" in page
    assert ">yes<" in page and ">NO<" in page
    held = SelftestReport((Check("network", True, "not reached"),))
    assert _display.selftest_text(held).startswith("selftest: all 1 protections hold\n")


def test_ipython_display_formatter_picks_up_every_record() -> None:
    """A real shell formats each record through its ``_repr_pretty_`` and ``_repr_html_``."""
    shell = InteractiveShell.instance()
    result = run_python("print('<b>hi</b>'); raise SystemExit(4)")
    records = [
        (result, "Result: NONZERO_EXIT, exit code 4\n"),
        (ProcessOutput(0, "fine", ""), "ProcessOutput: ok, return code 0\n"),
        (SelftestReport((Check("network", True, "ok"),)), "selftest: all 1 protections hold\n"),
    ]
    for record, first_line in records:
        data, _metadata = shell.display_formatter.format(record)
        assert data["text/plain"].startswith(first_line)
        assert data["text/html"].startswith('<div class="pysandbox-')
    data, _metadata = shell.display_formatter.format(result)
    assert "&lt;b&gt;hi&lt;/b&gt;" in data["text/html"]
    assert "<b>hi</b>" in data["text/plain"]
