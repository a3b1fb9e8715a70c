# SPDX-License-Identifier: MIT
"""A notebook's IPython-only lines made plain Python, so a cell runs in a session.

A session runs Python, not IPython, so the lines only IPython understands are
translated before a cell runs, each into one line (the cell's line numbers, and its
tracebacks' ``<cell-N>`` lines, stay those of the notebook):

* ``%%magic`` on a cell's first line: the whole cell is IPython's (``%%bash``,
  ``%%writefile``, ``%%time``...) and is skipped;
* ``%magic ...`` (``%matplotlib inline``, ``%pip install``, ``%time f()``): skipped,
  left as ``pass``;
* ``!command`` runs ``command`` with ``/bin/sh`` in the sandbox (through ``subprocess``,
  its output the cell's), and ``name = !command`` sets ``name`` to the list of its
  stdout's lines; the command is passed as written, without IPython's ``{name}`` and
  ``$name`` expansion of Python variables;
* help (``?name``, ``name?``, ``name??``): skipped, left as ``pass``.

A line is IPython's only where a statement starts: not inside brackets, a string
(triple-quoted strings span lines) or a backslash continuation, so a docstring line
that starts with ``%`` or ends with ``?`` is left alone.  Each translated line gives
a note in words (``line 2: '%matplotlib inline' is IPython's: skipped``).
"""

from __future__ import annotations

import re

from .record import record
from .untrusted import shown

__all__ = ["Translated", "translate_cell"]

#: What a ``!command`` line becomes: a statement, so it is never the cell's value.
_SHELL = (
    "if __import__('sys').stdout.flush() or __import__('sys').stderr.flush() or "
    "__import__('subprocess').run({command}, shell=True).returncode: pass"
)
#: What ``name = !command`` becomes.
_CAPTURE = (
    "{name} = __import__('subprocess').run({command}, shell=True, stdout=-1, text=True, "
    "errors='replace').stdout.splitlines()"
)
#: What a skipped line becomes.
_SKIPPED = "pass"

#: What matters to where a statement starts: an escape, a triple quote, a quote, a
#: comment, a bracket.
_SIGNIFICANT = re.compile(r"""\\(?:.|$)|'''|\"\"\"|['"#()\[\]{}]""")
#: ``name = !command``.
_CAPTURING = re.compile(r"([A-Za-z_][A-Za-z_0-9]*)\s*=\s*!(.*)", re.DOTALL)


@record
class Translated:
    """A cell as it runs in a session, and what was changed to make it Python."""

    #: The code to run; None when the whole cell is IPython's (a ``%%`` cell magic).
    code: str | None
    #: One line of words per line translated or skipped.
    notes: tuple[str, ...] = ()


class _Scanner:
    """Where statements start, line by line: the open string and brackets so far."""

    def __init__(self) -> None:
        self.quote = ""
        self.depth = 0
        self.continued = False

    @property
    def at_statement(self) -> bool:
        """The next line starts a statement."""
        return not self.quote and not self.depth and not self.continued

    def feed(self, line: str) -> None:
        """Read one line (without its newline) of Python."""
        self.continued = False
        for match in _SIGNIFICANT.finditer(line):
            token = match.group()
            if self.quote:
                if token == self.quote:
                    self.quote = ""
                elif token == "\\":  # a backslash at the end: the string goes on
                    return
                continue
            if token == "#":
                return
            if token in ("'", '"', "'''", '"""'):
                self.quote = token
            elif token in "([{":
                self.depth += 1
            elif token in ")]}":
                self.depth = max(self.depth - 1, 0)
            elif token == "\\":
                self.continued = True
        if self.quote in ("'", '"'):
            self.quote = ""  # a one-line string ends with its line (or is an error)


def _ipython_line(stripped: str) -> str:
    """What kind of IPython line ``stripped`` (a statement's first line, without its
    indentation) is: ``"magic"``, ``"shell"``, ``"capture"``, ``"help"`` or ``""``."""
    if stripped.startswith("%"):
        return "magic"
    if stripped.startswith("!"):
        return "shell"
    if _CAPTURING.fullmatch(stripped):
        return "capture"
    if stripped.startswith("?") or (stripped.endswith("?") and "#" not in stripped):
        return "help"
    return ""


def _translated(kind: str, indent: str, text: str) -> str:
    """The one line of Python that ``text`` (an IPython line of ``kind``, its
    continuation lines included) becomes."""
    if kind == "shell":
        return indent + _SHELL.format(command=repr(text[1:]))
    if kind == "capture":
        match = _CAPTURING.fullmatch(text)
        assert match is not None
        return indent + _CAPTURE.format(name=match.group(1), command=repr(match.group(2)))
    return indent + _SKIPPED


def _note(kind: str, number: int, text: str) -> str:
    what = {
        "shell": "ran as a shell command",
        "capture": "ran as a shell command, its stdout's lines kept",
    }.get(kind, "is IPython's: skipped")
    return f"line {number}: {shown(text.strip())} {what}"


def translate_cell(source: str) -> Translated:
    """``source``, a code cell's text, as plain Python (see the module's docstring)."""
    lines = source.split("\n")
    first = next((line.strip() for line in lines if line.strip()), "")
    if first.startswith("%%"):
        return Translated(
            None, (f"the cell magic {shown(first)} is IPython's: the cell was skipped",)
        )
    scanner = _Scanner()
    notes: list[str] = []
    out: list[str] = []
    number = 0
    while number < len(lines):
        line = lines[number]
        stripped = line.strip()
        kind = _ipython_line(stripped) if scanner.at_statement else ""
        if not kind:
            scanner.feed(line.rstrip("\r"))
            out.append(line)
            number += 1
            continue
        end = number
        while lines[end].rstrip("\r").endswith("\\") and end + 1 < len(lines):
            end += 1  # IPython's line goes on: its next lines are part of it
        text = "\n".join(part.rstrip("\r") for part in lines[number : end + 1]).strip()
        indent = line[: len(line) - len(line.lstrip())]
        out.append(_translated(kind, indent, text))
        out.extend("" for _ in range(end - number))
        notes.append(_note(kind, number + 1, text))
        number = end + 1
    return Translated("\n".join(out), tuple(notes))
