# SPDX-License-Identifier: MIT
"""Showing a program's output to people without letting it act on their terminal or CI.

A program's bytes may hold terminal controls (``ESC [8m`` conceals what follows, ``ESC
[2J`` clears the screen, OSC 52 writes the clipboard, a carriage return overwrites a
line) and CI log commands (GitHub Actions runs a line starting ``::``, Azure Pipelines
one holding ``##vso[``).  Wherever pysandbox shows output to a person in its own text (the
command line on a terminal, pytest report sections, ``SandboxFailure``, the text form
of a ``Result``), it goes through here first, so what the program printed can neither
hide nor fake pysandbox's own lines.
"""

from __future__ import annotations

import functools

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import re

__all__ = ["escape_controls", "escape_report"]


def _escape_table() -> dict[int, str]:
    """Each code point to escape, mapped to its visible escape: C0 but newline and tab,
    DEL, C1, and the bidirectional embeddings, overrides and isolates (which reorder how
    the rest of a line looks)."""
    table = {code: f"\\x{code:02x}" for code in [*range(0x20), *range(0x7F, 0xA0)]}
    for code in [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]:
        table[code] = f"\\u{code:04x}"
    del table[ord("\n")], table[ord("\t")]
    return table


_TABLE = _escape_table()


@functools.cache
def _ci_commands() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A GitHub Actions workflow command (``::`` at the start of a line, after blanks),
    and an Azure Pipelines logging command (``##vso[`` anywhere) or format (``##[`` at
    the start of a line); compiled on first use, as ``re`` costs every run's start-up."""
    import re

    return (
        re.compile(r"^([ \t]*):(?=:)", re.MULTILINE),
        re.compile(r"#(?=#vso\[)|^([ \t]*)#(?=#\[)", re.MULTILINE),
    )


def escape_controls(text: str) -> str:
    """``text`` with every control character but newline and tab written as a visible
    escape (``ESC`` as ``\\x1b``, a carriage return as ``\\x0d``), so it cannot move the
    cursor, clear, conceal, set attributes or reorder a line on a terminal."""
    return text.translate(_TABLE)


def escape_report(text: str) -> str:
    """``escape_controls(text)``, and the CI log commands in it made inert: the first
    character of a leading ``::`` or of ``##vso[`` / a leading ``##[`` is written as its
    escape (``\\x3a``, ``\\x23``), so the line still reads the same to a person."""
    github, azure = _ci_commands()
    escaped = github.sub(lambda match: f"{match[1]}\\x3a", escape_controls(text))
    return azure.sub(lambda match: f"{match[1] or ''}\\x23", escaped)
