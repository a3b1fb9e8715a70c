# SPDX-License-Identifier: MIT
"""The options of ``pysandbox run`` and ``pysandbox python``, as one table, and the plain
command lines of both parsed without argparse.

``RUN_OPTIONS`` (with the limit options of ``_model/units.py``) is what
``cli_run.add_run_options`` adds to argparse and what ``parse_plain`` reads.  argparse
and the help formatter it builds for every option cost a grader that shells out once per
test several milliseconds of every call, so ``parse_plain`` takes the lines that are
unambiguous, each option spelled in full and the program after them, and gives up
(returns None) on anything else: then argparse parses the line, with its own messages
for help, abbreviations, errors and every corner of its grammar.  What ``parse_plain``
accepts, it parses as argparse does (``tests/cli/test_run_args.py`` compares them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .._model.units import LIMIT_OPTIONS

__all__ = ["FLAG", "MANY", "ONE", "PYTHON_OPTIONS", "RUN_OPTIONS", "RunOption", "parse_plain"]

#: A ``RunOption``'s kinds: a flag (True when given), one value (the last one given
#: wins), a value per use (a list).
FLAG, ONE, MANY = "flag", "one", "many"


class RunOption:
    """One option of ``run`` and ``python``: its spellings, its ``dest``, its kind, and
    what ``--help`` says of it."""

    __slots__ = ("dest", "flags", "help", "kind", "metavar")

    def __init__(
        self, flags: tuple[str, ...], dest: str, kind: str, metavar: str | None, help: str
    ) -> None:
        self.flags = flags
        self.dest = dest
        self.kind = kind
        self.metavar = metavar
        self.help = help

    def default(self) -> object:
        """The value of the option when it is not given."""
        return {FLAG: False, ONE: None, MANY: []}[self.kind]


#: The input and output options, in the order ``--help`` lists them.
RUN_OPTIONS = (
    RunOption(
        ("--stdin",),
        "stdin",
        ONE,
        "FILE",
        "feed FILE to the program's stdin ('-': ours); default: a closed stdin",
    ),
    RunOption(
        ("--file",),
        "files",
        MANY,
        "NAME=PATH",
        "copy host file PATH into /sandbox as NAME (PATH alone: its base name); repeatable",
    ),
    RunOption(
        ("--output-dir",),
        "output_dir",
        ONE,
        "DIR",
        "write the files left in /sandbox into DIR, which must be missing (it is made) or "
        "empty; a name with a part starting with a dot is refused, executable bits are "
        "dropped (see --dotfiles, --keep-modes); a refused file is named on stderr and the "
        "exit status is {sandbox_error}",
    ),
    RunOption(
        ("--dotfiles",),
        "dotfiles",
        FLAG,
        None,
        "with --output-dir: also write names with a part starting with a dot",
    ),
    RunOption(
        ("--keep-modes",),
        "keep_modes",
        FLAG,
        None,
        "with --output-dir: keep the executable bit of the files the program made executable",
    ),
    RunOption(
        ("--files-include",),
        "files_include",
        MANY,
        "PATTERN",
        "return only the files left in /sandbox whose path (relative to /sandbox), or a "
        "directory above it, PATTERN matches (a glob: '*' matches '/' too); repeatable",
    ),
    RunOption(
        ("--files-exclude",),
        "files_exclude",
        MANY,
        "PATTERN",
        "return no file that PATTERN matches as --files-include does, and do not walk a "
        "directory it matches (e.g. .cache); repeatable",
    ),
    RunOption(
        ("--json",),
        "json",
        FLAG,
        None,
        "print one JSON object (Result.to_dict()) on stdout instead of the output and the verdict",
    ),
    RunOption(("-q", "--quiet"), "quiet", FLAG, None, "no verdict line on stderr"),
    RunOption(
        ("--env",),
        "env",
        MANY,
        "NAME=VALUE",
        "set an environment variable (besides PATH and HOME); repeatable",
    ),
    RunOption(
        ("--readable",),
        "readable",
        MANY,
        "PATH",
        "let the program read host PATH, read-only at the same path; repeatable",
    ),
)

#: ``pysandbox python``'s own option: the code to run instead of a file.
PYTHON_CODE = RunOption(("-c",), "code", ONE, "CODE", "the code to run")
PYTHON_DISPLAYS = RunOption(
    ("--capture-displays",),
    "capture_displays",
    FLAG,
    None,
    "give back what a notebook would show (display(), plt.show(), the figures open at "
    "the end), checked and sanitized, as the displays of --json's object (run_python's "
    "displays=True)",
)
#: The options ``python`` has beside ``run``'s.
PYTHON_OPTIONS = (PYTHON_CODE, PYTHON_DISPLAYS)

#: ``--truncate-output``, the one limit option without a value (None when not given).
_TRUNCATE = "--truncate-output"


def _value_options(command: str) -> dict[str, tuple[str, Callable[[str], object], bool]]:
    """Every spelling of an option of ``command`` that takes a value: its ``dest``, how
    its text is parsed, and whether it may be given more than once (a list)."""
    table: dict[str, tuple[str, Callable[[str], object], bool]] = {
        option.flag: (option.field, option.parse, False) for option in LIMIT_OPTIONS
    }
    extra = PYTHON_OPTIONS if command == "python" else ()
    for option in RUN_OPTIONS + extra:
        if option.kind != FLAG:
            for flag in option.flags:
                table[flag] = (option.dest, str, option.kind == MANY)
    return table


def _defaults(command: str) -> dict[str, object]:
    """What the options of ``command`` are when none is given."""
    values: dict[str, object] = {option.field: None for option in LIMIT_OPTIONS}
    values["truncate_output"] = None
    extra = PYTHON_OPTIONS if command == "python" else ()
    for option in RUN_OPTIONS + extra:
        values[option.dest] = option.default()
    return values


def _takes_value(token: str) -> bool:
    """Whether argparse would take ``token`` as an option's value without doubt: a
    token starting with ``-`` (but ``-`` alone) may be an option to it."""
    return token == "-" or not token.startswith("-")


def parse_plain(argv: Sequence[str]) -> dict[str, object] | None:
    """The options and the program of the ``run`` or ``python`` command line ``argv``
    (its first word is the command), as argparse's ``dest`` to value plus ``argv`` (what
    follows the options), or None when argparse must parse it.

    Accepted: options spelled in full (``--memory 64M``, ``--memory=64M``, ``-q``,
    ``-c CODE``) whose values do not start with ``-`` (``-`` alone does), then the
    program: ``--`` and what follows, or everything from the first word that is no
    option; an option's value that its parser refuses gives up too, so argparse names
    the option in its usage error."""
    if not argv or argv[0] not in ("run", "python"):
        return None
    command = argv[0]
    values = _defaults(command)
    value_options = _value_options(command)
    extra = PYTHON_OPTIONS if command == "python" else ()
    flags = {
        flag: option.dest
        for option in RUN_OPTIONS + extra
        if option.kind == FLAG
        for flag in option.flags
    }
    flags[_TRUNCATE] = "truncate_output"
    position = 1
    while position < len(argv):
        token = argv[position]
        if token == "--" or _takes_value(token):
            break
        name, equals, inline = token.partition("=") if token.startswith("--") else (token, "", "")
        if name in flags and not equals:
            values[flags[name]] = True
            position += 1
            continue
        if name not in value_options:
            return None
        if equals and inline != "--":  # argparse drops a value of "--" (not one to copy)
            text = inline
        elif not equals and position + 1 < len(argv) and _takes_value(argv[position + 1]):
            position += 1
            text = argv[position]
        else:
            return None
        dest, parse, many = value_options[name]
        try:
            value = parse(text)
        except ValueError:
            return None
        if many:
            values[dest] = [*values[dest], value]  # type: ignore[misc]
        else:
            values[dest] = value
        position += 1
    values["argv"] = list(argv[position:])
    values["command"] = command
    return values
