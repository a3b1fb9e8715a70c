# SPDX-License-Identifier: MIT
"""``pysandbox run`` and ``pysandbox python`` command lines parsed without argparse
(``_frontends/run_args.parse_plain``): what it takes, it parses exactly as argparse does,
on every Python the suite runs on; what it cannot be sure of, it leaves to argparse; and
the console script's quick exit still runs the ``atexit`` handlers."""

from __future__ import annotations

import glob
import os
import subprocess
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.cli import SCRIPT, TIMEOUT, cli

from pysandbox._frontends.cli import build_parser
from pysandbox._frontends.run_args import PYTHON_OPTIONS, RUN_OPTIONS, parse_plain
from pysandbox._model.units import LIMIT_OPTIONS

#: Words an option's value or the program may be: units, ``-`` (our stdin), pairs, things
#: that look like options, the separator, nothing.
WORDS = ["64M", "1s", "500ms", "7", "0", "-", "", "x", "A=b", "-x", "--", "-q", "--json", "a b"]

#: Every spelling of an option, a few abbreviations and strangers.
FLAGS = sorted(
    {flag for option in (*RUN_OPTIONS, *PYTHON_OPTIONS) for flag in option.flags}
    | {option.flag for option in LIMIT_OPTIONS}
    | {"--truncate-output", "--mem", "--qui", "-h", "--bogus", "-qq", "-1"}
)


def _program(argv: list[str]) -> list[str]:
    """What follows the options, without the ``--`` that may separate them (as the
    commands read ``argv``)."""
    return argv[1:] if argv[:1] == ["--"] else argv


def _argparse(argv: Sequence[str]) -> object:
    """What argparse makes of ``argv``; fails the test on a usage error or help."""
    try:
        return build_parser(argv[0]).parse_args(list(argv))
    except SystemExit as exc:  # pragma: no cover - a failure's message
        raise AssertionError(f"parse_plain took {list(argv)!r}, argparse refused it") from exc


def _agree(argv: Sequence[str]) -> None:
    plain = parse_plain(argv)
    if plain is None:
        return
    parsed = _argparse(argv)
    for dest, value in plain.items():
        if dest == "argv":
            assert _program(value) == _program(parsed.argv), argv  # type: ignore[arg-type, attr-defined]
        else:
            assert getattr(parsed, dest) == value, (argv, dest)


token = st.one_of(
    st.sampled_from(FLAGS),
    st.sampled_from(WORDS),
    st.builds(lambda flag, word: f"{flag}={word}", st.sampled_from(FLAGS), st.sampled_from(WORDS)),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["run", "python"]), st.lists(token, max_size=7))
def test_what_parse_plain_takes_argparse_parses_the_same(command: str, rest: list[str]) -> None:
    _agree([command, *rest])


#: The lines a grader or a shell types, each of which must take the quick path.
PLAIN_LINES = [
    ["run", "-q", "--", "true"],
    ["run", "--", "sh", "-c", "echo -q -- x"],
    ["run", "ls", "-la", "--json"],
    ["run", "--memory", "64M", "--wall-time=2", "--json", "--", "x"],
    ["run", "--file", "a=b", "--file", "c", "--env", "K=V", "--readable", "/etc", "--", "x"],
    ["run", "--stdin", "-", "--truncate-output", "--quiet", "--", "cat"],
    ["run", "--output-dir", "out", "--dotfiles", "--keep-modes", "--", "x"],
    ["python", "-c", "print(1)"],
    ["python", "-c", "print(1)", "a", "-b"],
    ["python", "--cpu-time", "500ms", "main.py", "--flag"],
    ["python", "-", "arg"],
    ["run"],
]


@pytest.mark.no_bwrap
@pytest.mark.parametrize("argv", PLAIN_LINES, ids=lambda argv: " ".join(argv) or "empty")
def test_the_usual_lines_take_the_quick_path_and_agree(argv: list[str]) -> None:
    assert parse_plain(argv) is not None, argv
    _agree(argv)


#: Lines only argparse can answer: help, abbreviations, unknown options, values that
#: look like options, refused values (argparse names the option), attached short values.
ARGPARSE_LINES = [
    ["run", "-h"],
    ["run", "--mem", "64M", "--", "x"],
    ["run", "--bogus", "--", "x"],
    ["run", "--memory", "-5", "--", "x"],
    ["run", "--memory", "lots", "--", "x"],
    ["run", "--json=yes", "--", "x"],
    ["run", "--memory"],
    ["python", "-cprint(1)"],
    ["batch", "jobs.jsonl"],
    ["--version"],
]


@pytest.mark.no_bwrap
@pytest.mark.parametrize("argv", ARGPARSE_LINES, ids=" ".join)
def test_the_rest_goes_to_argparse(argv: list[str]) -> None:
    assert parse_plain(argv) is None


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["run"], "error: no program given"),
        (["run", "--file", "/nonexistent/x", "--", "true"], "error: argument --file: cannot read"),
        (["run", "--env", "NOEQUALS", "--", "true"], "error: argument --env: expected NAME=VALUE"),
    ],
)
def test_a_usage_error_after_the_quick_path_is_argparses(args: list[str], says: str) -> None:
    """The handler's usage errors of a line parsed without argparse print argparse's
    usage of the command and exit 2, as had argparse parsed it."""
    assert parse_plain(args) is not None
    done = cli(*args)
    assert done.returncode == 2
    lines = done.stderr.decode().splitlines()
    assert lines[0].startswith("usage: pysandbox run [-h] [--wall-time SECONDS]"), lines
    assert lines[-1].startswith(f"pysandbox run: {says}"), lines


def _code_directories_of(pid: int) -> list[str]:
    """The code-file directories whose owner file names process ``pid``."""
    found = []
    for owner in glob.glob("/dev/shm/pysandbox-*/owner") + glob.glob("/tmp/pysandbox-*/owner"):
        try:
            with open(owner) as stream:
                fields = stream.read().split()
        except OSError:
            continue
        if len(fields) == 3 and fields[1] == str(pid):
            found.append(os.path.dirname(owner))
    return found


def test_the_quick_exit_of_the_console_script_runs_the_atexit_handlers() -> None:
    """``pysandbox python`` makes its code file's directory and removes it at exit, in an
    ``atexit`` handler: the console script ends without the interpreter's teardown, yet
    leaves no directory behind."""
    proc = subprocess.Popen(
        [SCRIPT, "python", "-q", "-c", "print('ran')"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, err
    assert out == b"ran\n"
    assert _code_directories_of(proc.pid) == []


def test_the_quick_exit_leaves_no_cgroup_behind() -> None:
    """The cgroup reaper's daemon thread does not keep the console script from its quick
    exit, and its ``atexit`` handler still removes the run's groups first."""
    proc = subprocess.Popen(
        [SCRIPT, "run", "-q", "--", "true"], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, err
    assert glob.glob(f"/sys/fs/cgroup/**/pysandbox-{proc.pid}-*", recursive=True) == []
