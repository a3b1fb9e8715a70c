# SPDX-License-Identifier: MIT
"""How results look in IPython and Jupyter: pure functions from a record to text or HTML.

``Result``, ``ProcessOutput`` and ``SelftestReport`` delegate their ``_repr_pretty_`` and
``_repr_html_`` here.  The verdict comes first, then the numbers, then the output:
decoded with replacement, HTML-escaped, and folded when long, so a flood of output
stays readable at a glance (the record itself always holds all of it).
"""

from __future__ import annotations

from .escape import escape_controls
from .limits import Limits
from .status import Status, ending, signal_name
from .verdict import describe, describe_parts, not_collected, size_text

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    from .result import ProcessOutput, Result
    from .selftest_report import SelftestReport
else:
    #: A plain base at run time: a command line's start-up does without ``typing``.
    Protocol = object

__all__ = [
    "FOLD_HEAD_LINES",
    "FOLD_TAIL_LINES",
    "HTML_FULL_CHARS",
    "LINE_CHARS",
    "Pretty",
    "fold",
    "is_folded",
    "pretty",
    "process_output_html",
    "process_output_text",
    "result_html",
    "result_text",
    "selftest_html",
    "selftest_text",
    "verdict_html",
    "verdict_text",
]

#: Lines of a long output shown before the fold.
FOLD_HEAD_LINES = 10
#: Lines of a long output shown after the fold.
FOLD_TAIL_LINES = 10
#: Characters of one line shown; the rest of a longer line is counted, not shown.
LINE_CHARS = 500
#: Characters of the whole output that the HTML form's "show all" holds at most.
HTML_FULL_CHARS = 200_000
#: Files named in the summary; more are counted.
LISTED_FILES = 20

_OK_COLOUR = "#1a7f37"
_FAIL_COLOUR = "#cf222e"


class Pretty(Protocol):
    """What ``_repr_pretty_`` is handed: IPython's ``PrettyPrinter`` (only ``text``)."""

    def text(self, obj: str) -> None:
        """Append ``obj`` to the output."""


def pretty(printer: Pretty, text: str, cycle: bool, name: str) -> None:
    """Write ``text`` for ``_repr_pretty_``; ``name(...)`` for a cycle (never happens:
    the records hold no references back to themselves, but the protocol asks)."""
    printer.text(f"{name}(...)" if cycle else text)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _clip(line: str) -> str:
    """``line`` cut at ``LINE_CHARS``, with how much was left out."""
    if len(line) <= LINE_CHARS:
        return line
    return f"{line[:LINE_CHARS]} ... [{len(line) - LINE_CHARS} more characters]"


def is_folded(text: str, head: int = FOLD_HEAD_LINES, tail: int = FOLD_TAIL_LINES) -> bool:
    """Whether ``fold`` leaves part of ``text`` out: too many lines, or a line too long."""
    lines = text.splitlines()
    return len(lines) > head + tail or any(len(line) > LINE_CHARS for line in lines)


def fold(text: str, head: int = FOLD_HEAD_LINES, tail: int = FOLD_TAIL_LINES) -> str:
    """``text`` with its lines past the first ``head`` and before the last ``tail``
    replaced by one ``... K lines folded ...`` line, and each line clipped at
    ``LINE_CHARS`` characters; text of at most ``head + tail`` lines stays whole."""
    lines = text.splitlines()
    if len(lines) > head + tail:
        folded = len(lines) - head - tail
        lines = [*lines[:head], f"... {_plural(folded, 'line')} folded ...", *lines[-tail:]]
    return "\n".join(_clip(line) for line in lines)


def _stream_title(name: str, text: str, truncated: bool) -> str:
    """``"stdout (3 lines)"``; ``"stderr (empty)"``; with ``truncated at the cap``."""
    count = len(text.splitlines())
    notes = [_plural(count, "line") if count else "empty"]
    if truncated:
        notes.append("truncated at the cap")
    return f"{name} ({', '.join(notes)})"


def _stream_text(name: str, text: str, truncated: bool) -> str:
    """The titled, folded text form of one stream, its control characters escaped (a
    terminal IPython prints it)."""
    title = f"--- {_stream_title(name, text, truncated)} ---"
    return f"{title}\n{fold(escape_controls(text))}" if text else title


def _numbers(result: Result) -> str:
    return (
        f"CPU {result.cpu_time:.3f} s, wall {result.wall_time:.3f} s, "
        f"max RSS {size_text(result.max_rss)}"
    )


def _files(result: Result) -> str:
    """``"files: a.txt (12 B), prog (16.0 KiB, executable)"``; empty when there are none."""
    names = sorted(result.files)
    listed = []
    for name in names[:LISTED_FILES]:
        size = size_text(len(result.files[name]))
        shown = escape_controls(name)  # a name from the sandbox: no escapes reach a terminal
        listed.append(
            f"{shown} ({size}, executable)" if name in result.executables else f"{shown} ({size})"
        )
    if len(names) > LISTED_FILES:
        listed.append(f"and {len(names) - LISTED_FILES} more")
    if result.files_truncated and not result.files_not_collected:
        listed.append("some left out (files_truncated)")
    return f"files: {', '.join(listed)}" if listed else ""


def _files_line(result: Result) -> str:
    """``_files``, or for a run whose files were not collected, that it was ended first
    (``verdict.not_collected``); empty when there is nothing to say."""
    return _files(result) or not_collected(result)


def _ending(result: Result) -> str:
    """``"exit code 0"``; ``"killed by SIGKILL (9), process limit reached"``."""
    capped = ", process limit reached" if result.processes_exceeded else ""
    return ending(result.returncode, result.signal) + capped


def _verdict(result: Result) -> str:
    """``"OK, exit code 0"``; ``"SIGNALED, killed by SIGSEGV (11)"``."""
    return f"{result.status.name}, {_ending(result)}"


def verdict_text(result: Result, limits: Limits) -> str:
    """The line ``%%sandbox`` shows after the output it streamed: the command line's
    verdict (``_verdict.describe``), so both say how a run ended in the same words, and
    the files the run left, which the command line writes out with ``--output-dir``."""
    files = _files(result)
    return f"pysandbox: {describe(result, limits)}" + (f"; {files}" if files else "")


def verdict_html(result: Result, limits: Limits) -> str:
    """``verdict_text`` as HTML, the status coloured."""
    status, *rest = describe_parts(result, limits)
    files = _files(result)
    line = ", ".join(rest) + (f"; {files}" if files else "")
    return _heading_html(result.status is Status.OK, status, line)


def result_text(result: Result) -> str:
    """The plain-text form of ``result``: verdict, numbers, files, stdout, stderr."""
    lines = [f"Result: {_verdict(result)}", _numbers(result)]
    files = _files_line(result)
    if files:
        lines.append(files)
    lines.append(_stream_text("stdout", result.stdout_text(), result.stdout_truncated))
    lines.append(_stream_text("stderr", result.stderr_text(), result.stderr_truncated))
    return "\n".join(lines)


def _escape(text: str) -> str:
    """``text`` HTML-escaped, quotes included; ``html`` loads only when HTML is asked for."""
    import html

    return html.escape(text)


def _stream_html(name: str, text: str, truncated: bool) -> str:
    """A titled ``<pre>`` of the folded ``text``, and for folded output a ``<details>``
    that shows it all (up to ``HTML_FULL_CHARS`` characters)."""
    title = _escape(_stream_title(name, text, truncated))
    if not text:
        return f"<div><strong>{title}</strong></div>"
    parts = [f"<div><strong>{title}</strong>", f"<pre>{_escape(fold(text))}</pre>"]
    if is_folded(text):
        whole = text[:HTML_FULL_CHARS]
        more = len(text) - len(whole)
        note = f"\n... [{more} more characters; the record holds them all]" if more else ""
        parts.append(
            f"<details><summary>show all</summary><pre>{_escape(whole + note)}</pre></details>"
        )
    parts.append("</div>")
    return "".join(parts)


def _heading_html(ok: bool, label: str, rest: str) -> str:
    colour = _OK_COLOUR if ok else _FAIL_COLOUR
    return f'<div><strong style="color: {colour}">{_escape(label)}</strong> {_escape(rest)}</div>'


def result_html(result: Result) -> str:
    """The HTML form of ``result``: the same parts as ``result_text``, escaped."""
    parts = [
        '<div class="pysandbox-result">',
        _heading_html(result.status is Status.OK, result.status.name, _ending(result)),
        f"<div>{_escape(_numbers(result))}</div>",
    ]
    files = _files_line(result)
    if files:
        parts.append(f"<div>{_escape(files)}</div>")
    parts.append(_stream_html("stdout", result.stdout_text(), result.stdout_truncated))
    parts.append(_stream_html("stderr", result.stderr_text(), result.stderr_truncated))
    parts.append("</div>")
    return "".join(parts)


def _return_code(output: ProcessOutput) -> str:
    """``"return code 137 (128 + SIGKILL)"``, as the reference encodes a signal."""
    code = output.returncode
    if code > 128 and not signal_name(code - 128).startswith("signal "):
        return f"return code {code} (128 + {signal_name(code - 128)})"
    return f"return code {code}"


def process_output_text(output: ProcessOutput) -> str:
    """The plain-text form of ``eval_in_sandbox``'s record."""
    verdict = "ok" if output else "failed"
    return "\n".join(
        [
            f"ProcessOutput: {verdict}, {_return_code(output)}",
            _stream_text("stdout", output.stdout, False),
            _stream_text("stderr", output.stderr, False),
        ]
    )


def process_output_html(output: ProcessOutput) -> str:
    """The HTML form of ``eval_in_sandbox``'s record."""
    return "".join(
        [
            '<div class="pysandbox-result">',
            _heading_html(bool(output), "ok" if output else "failed", _return_code(output)),
            _stream_html("stdout", output.stdout, False),
            _stream_html("stderr", output.stderr, False),
            "</div>",
        ]
    )


def _selftest_summary(report: SelftestReport) -> str:
    failed = sum(not check.ok for check in report.checks)
    total = len(report.checks)
    if not failed:
        return f"selftest: all {total} protections hold"
    return f"selftest: {failed} of {total} protections do NOT hold"


def selftest_text(report: SelftestReport) -> str:
    """A summary line, then one ``[yes]``/``[NO ]`` line per check with its fix."""
    return f"{_selftest_summary(report)}\n{report}"


def selftest_html(report: SelftestReport) -> str:
    """A summary, then a table: check, held (yes/NO), what was seen, the fix."""
    rows = []
    for check in report.checks:
        colour = _OK_COLOUR if check.ok else _FAIL_COLOUR
        fix = "" if check.ok else check.fix
        rows.append(
            f"<tr><td>{_escape(check.name)}</td>"
            f'<td style="color: {colour}"><strong>{"yes" if check.ok else "NO"}</strong></td>'
            f"<td>{_escape(check.detail)}</td><td>{_escape(fix)}</td></tr>"
        )
    return "".join(
        [
            '<div class="pysandbox-selftest">',
            _heading_html(bool(report), _selftest_summary(report), ""),
            "<table><thead><tr><th>check</th><th>held</th><th>seen</th><th>fix</th></tr>"
            "</thead><tbody>",
            *rows,
            "</tbody></table></div>",
        ]
    )
