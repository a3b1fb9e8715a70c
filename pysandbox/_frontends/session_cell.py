# SPDX-License-Identifier: MIT
"""How ``%%sandbox --session`` shows one call's ``CellResult``: the verdict line, as text
and as HTML, the value of the final expression, and its displays.

Everything in a ``CellResult`` but its numbers came from the sandbox (the exception's
type, the value's ``repr``, the names of files, the reason of a lost session, which
holds the keeper's last words): it is hostile, so every piece goes through
``escape_controls`` (it cannot move the cursor, conceal or reorder what follows on a
terminal) and, in HTML, through ``html.escape`` as well.
"""

from __future__ import annotations

from .._model.escape import escape_controls
from .._model.limits import Limits
from .._model.record import record
from .._model.rich import Bundle
from .._model.session_result import CellResult
from .._model.verdict import LIMIT_STATUSES, limit_hit, size_text

__all__ = [
    "CELL_WORDS",
    "Wording",
    "cell_verdict_html",
    "cell_verdict_text",
    "display_data",
    "value_data",
]

#: Output files named in the verdict; more are counted.
LISTED_FILES = 20

_OK_COLOUR = "#1a7f37"
_FAIL_COLOUR = "#cf222e"


def _inert(text: str) -> str:
    """``text`` made one inert line: control characters escaped, newlines too."""
    return escape_controls(text).replace("\n", "\\n")


def _numbers(result: CellResult) -> str:
    return (
        f"cpu {result.cpu_time:.2f} s, wall {result.wall_time:.2f} s, "
        f"max rss {size_text(result.max_rss)}"
    )


def _cut_short(result: CellResult, limits: Limits) -> list[str]:
    """What the verdict says was cut: an output past its cap, files left out."""
    notes = []
    if result.stdout_truncated:
        notes.append(f"stdout truncated at {size_text(limits.stdout)}")
    if result.stderr_truncated:
        notes.append(f"stderr truncated at {size_text(limits.stderr)}")
    names = sorted(result.files)
    if names:
        listed = [f"{name} ({size_text(len(result.files[name]))})" for name in names]
        if len(names) > LISTED_FILES:
            listed[LISTED_FILES:] = [f"and {len(names) - LISTED_FILES} more"]
        notes.append(f"files: {', '.join(listed)}")
    if result.files_truncated:
        notes.append("some files left out (files_truncated)")
    if result.displays_truncated:
        notes.append("some displays left out (displays_truncated)")
    return notes


@record
class Wording:
    """The words of a verdict that depend on who shows it: what a call is called
    (``"cell"``) and what to do after a session was lost."""

    unit: str = "cell"
    after_loss: str = "the next cell naming it starts it anew"


#: The magic's words.
CELL_WORDS = Wording()


def _parts(result: CellResult, limits: Limits, name: str, words: Wording) -> tuple[str, str]:
    """The verdict's label (``committed``, ``rolled back``, ``lost``) and the rest of
    its line, both still unescaped."""
    if result.lost:
        reason = result.reason or "no reason given"
        return "lost", f"session {name!r}: {reason}; {words.after_loss}"
    if result.rolled_back:
        label = "rolled back"
        hit = limit_hit(result, limits) if result.status in LIMIT_STATUSES else ""
        head = (
            f"in session {name!r}: {result.status.value}{hit}, {result.reason}; "
            f"its state is as before this {words.unit}"
        )
    else:
        label = "committed"
        head = f"in session {name!r}"
        if result.error is not None:
            head += f", raised {result.error.type}"
    return label, "; ".join([head, ", ".join([_numbers(result), *_cut_short(result, limits)])])


def cell_verdict_text(
    result: CellResult, limits: Limits, name: str, words: Wording = CELL_WORDS
) -> str:
    """The line shown after a session cell's output, control characters escaped:
    ``pysandbox: committed in session 'a'; cpu 0.00 s, wall 0.00 s, max rss 9.1 MiB``.
    ``limits`` are the call's (for the limit that rolled it back); ``words`` those of
    the front end that shows it (the MCP server's call a cell a call)."""
    label, rest = _parts(result, limits, name, words)
    return _inert(f"pysandbox: {label} {rest}")


def cell_verdict_html(result: CellResult, limits: Limits, name: str) -> str:
    """``cell_verdict_text`` as HTML, the label coloured: green for a commit that raised
    nothing, red otherwise."""
    import html

    label, rest = _parts(result, limits, name, CELL_WORDS)
    colour = _OK_COLOUR if result else _FAIL_COLOUR
    return (
        f'<div><strong style="color: {colour}">{html.escape(label)}</strong> '
        f"{html.escape(_inert(rest))}</div>"
    )


def value_data(value: str) -> dict[str, str]:
    """The MIME bundle that shows a final expression's ``repr`` as ``Out[]`` would: as
    text, escaped, and as an HTML ``<pre>``."""
    import html

    shown = escape_controls(value)
    return {"text/plain": shown, "text/html": f"<pre>{html.escape(shown)}</pre>"}


def display_data(bundle: Bundle) -> dict[str, object]:
    """A display as a front end's ``display_data`` shows it: the bundle's JSON form (it
    was checked and sanitized as it came), its text escaped as ``value_data``'s."""
    data = dict(bundle.to_json())
    text = data.get("text/plain")
    if isinstance(text, str):
        data["text/plain"] = escape_controls(text)
    return data
