# SPDX-License-Identifier: MIT
"""The ``pysandbox`` command line, run as its users run it: the installed console script
(and ``python -m pysandbox``) in a real subprocess, with real sandboxes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import SCRIPT, TIMEOUT, WITH_DEFAULT_SIGINT, assert_usage_error, cli
from support.docs import DOCS, README, code_blocks
from support.filtered import WRITE, WRITE_SH
from support.processes import pids_with_marker, survivors, unique_marker
from support.timing import PROMPTLY

from pysandbox import Result

MODULE = (sys.executable, "-m", "pysandbox")


def verdict(done: subprocess.CompletedProcess[bytes]) -> str:
    """The verdict line: the last line of stderr, which must be the only one that says it."""
    lines = done.stderr.decode().splitlines()
    assert lines and lines[-1].startswith("pysandbox: "), done.stderr
    return lines[-1]


# ---- exit status mirrors the program's ----------------------------------------------


@pytest.mark.parametrize("entry", [(SCRIPT,), MODULE], ids=["console-script", "python-m"])
def test_both_entry_points_pass_output_and_exit_code_through(entry: tuple[str, ...]) -> None:
    done = cli("run", "--", "sh", "-c", "echo out; echo err >&2; exit 3", entry=entry)
    assert done.returncode == 3
    assert done.stdout == b"out\n"
    assert done.stderr.decode().splitlines()[0] == "err"
    assert verdict(done).startswith("pysandbox: nonzero_exit, exit 3, cpu ")


def test_output_passes_through_as_bytes_and_the_verdict_starts_its_own_line() -> None:
    code = "import sys; sys.stdout.buffer.write(b'\\xff\\x00ok'); sys.stderr.write('no newline')"
    done = cli("python", "-c", code)
    assert done.returncode == 0
    assert done.stdout == b"\xff\x00ok"
    assert done.stderr.decode().splitlines()[0] == "no newline"
    assert verdict(done).startswith("pysandbox: ok, exit 0, cpu ")
    assert " s, wall " in verdict(done) and ", max rss " in verdict(done)


def test_output_passes_through_as_it_arrives(tmp_path: Path) -> None:
    """Each line is read from the command's pipes while the program still runs: it waits
    for a file that the test creates only after reading both lines."""
    go = tmp_path / "go"
    code = (
        "import os, sys, time\n"
        "print('first out', flush=True)\n"
        "print('first err', file=sys.stderr, flush=True)\n"
        f"while not os.path.exists({str(go)!r}):\n"
        "    time.sleep(0.01)\n"
        "print('last out')\n"
    )
    tmp_path.chmod(0o755)  # the sandbox's uid looks for the file
    proc = subprocess.Popen(
        [SCRIPT, "python", "--wall-time", "60", "--readable", str(tmp_path), "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline() == b"first out\n"
        assert proc.stderr.readline() == b"first err\n"
        assert proc.poll() is None
        go.touch()
        stdout, stderr = proc.communicate(timeout=PROMPTLY)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
    assert stdout == b"last out\n"
    assert stderr.decode().startswith("pysandbox: ok, exit 0, ")


def test_quiet_drops_the_verdict() -> None:
    done = cli("run", "--quiet", "--", "sh", "-c", "echo err >&2; exit 4")
    assert (done.returncode, done.stderr) == (4, b"err\n")


def test_a_signal_is_128_plus_its_number() -> None:
    done = cli("run", "--", "sh", "-c", "kill -SEGV $$")
    assert done.returncode == 128 + signal.SIGSEGV == 139
    assert verdict(done).startswith("pysandbox: signaled, killed by SIGSEGV, cpu ")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["python", "--cpu-time", "300ms", "-c", "while True: pass"],
            "cpu_time_exceeded (limit 0.3 s), killed by SIGKILL",
        ),
        (["run", "--wall-time", "0.5", "--", "sleep", "30"], "wall_time_exceeded (limit 0.5 s)"),
        (
            ["python", "--stdout-limit", "1K", "-c", "print('x' * 5000)"],
            "output_exceeded (stdout limit 1 KiB)",
        ),
        (
            ["python", "--memory", "64M", "-c", "b = bytearray(2**30)"],
            "memory_exceeded (limit 64 MiB), exit 1",
        ),
    ],
    ids=["cpu", "wall", "output", "memory"],
)
def test_a_limit_exceeded_is_124(args: list[str], says: str) -> None:
    done = cli(*args)
    assert done.returncode == 124, done.stderr
    assert verdict(done).startswith(f"pysandbox: {says}, "), verdict(done)


def test_truncated_output_is_said() -> None:
    done = cli("python", "--truncate-output", "--stdout-limit", "1K", "-c", "print('x' * 5000)")
    assert done.returncode == 0
    assert done.stdout == b"x" * 1024
    assert verdict(done).endswith(", stdout truncated at 1 KiB")


@pytest.mark.no_bwrap
def test_no_bwrap_is_125_with_the_cause(tmp_path: Path) -> None:
    """An empty PATH hides bwrap, as on a host without it; nothing runs."""
    env = {**os.environ, "PATH": str(tmp_path)}
    done = cli("run", "--", "true", env=env)
    assert done.returncode == 125
    assert done.stderr.decode() == "pysandbox: sandbox error: Cannot find the `bwrap` executable\n"
    done = cli("python", "--json", "-c", "pass", env=env)
    assert done.returncode == 125
    assert json.loads(done.stdout) == {
        "error": "Cannot find the `bwrap` executable",
        "kind": "sandbox_error",
    }


def test_a_program_that_cannot_start_is_125_not_an_exit_code() -> None:
    done = cli("run", "--", "/no/such/program")
    assert done.returncode == 125
    assert done.stdout == b""
    last = done.stderr.decode().splitlines()[-1]
    assert last.startswith("pysandbox: sandbox error: ") and "/no/such/program" in last


# ---- JSON ----------------------------------------------------------------------------


def test_json_is_one_object_in_the_schema_of_to_dict() -> None:
    code = (
        "import sys; print('hi'); sys.stderr.buffer.write(b'\\xff');"
        "open('o.txt', 'w').write('x'); sys.exit(5)"
    )
    done = cli("python", "--json", "-c", code)
    assert done.returncode == 5
    assert done.stderr == b""
    text = done.stdout.decode()
    assert text.endswith("}\n") and text.count("\n") == 1
    data = json.loads(text)
    result = Result.from_dict(data)
    assert list(data) == list(result.to_dict())
    assert (data["status"], data["returncode"], data["signal"]) == ("NONZERO_EXIT", 5, None)
    assert (data["stdout"], data["stdout_encoding"]) == ("hi\n", "utf-8")
    assert result.stderr == b"\xff" and data["stderr_encoding"] == "base64"
    assert data["files"] == {"o.txt": {"data": "x", "encoding": "utf-8", "executable": False}}


def test_files_include_and_exclude_choose_the_files_of_json_and_output_dir(
    tmp_path: Path,
) -> None:
    """Repeatable; with ``--json`` the object holds only the files asked for, with
    ``--output-dir`` only those are written."""
    done = cli(
        "run", "--json", "--files-exclude", ".cache", "--files-exclude=notes.txt",
        "--", "sh", "-c", WRITE_SH,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)["files"]) == {"out/a.png"}
    out = tmp_path / "out"
    done = cli(
        "python", "--files-include", "out", "--files-include", "*.txt",
        "--output-dir", str(out), "-c", WRITE,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    written = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert written == {"out/a.png", "notes.txt"}


@pytest.mark.parametrize(
    ("option", "pattern", "message"),
    [
        ("--files-include", "", "--files-include has an empty pattern"),
        ("--files-exclude", "[^a]", "--files-exclude has a pattern holding '[^'"),
        ("--files-exclude", "a\\b", "--files-exclude has a pattern holding '\\\\'"),
    ],
)
def test_a_bad_pattern_is_a_usage_error_before_anything(
    tmp_path: Path, option: str, pattern: str, message: str
) -> None:
    out = tmp_path / "out"
    done = cli("run", option, pattern, "--output-dir", str(out), "--", "true")
    assert message in assert_usage_error(done)
    assert not out.exists()


def test_json_of_a_limit_keeps_the_exit_status() -> None:
    done = cli("run", "--json", "--wall-time", "0.3", "--", "sleep", "30")
    assert done.returncode == 124
    assert json.loads(done.stdout)["status"] == "WALL_TIME_EXCEEDED"


# ---- stdin, files in and out -------------------------------------------------------


def test_stdin_from_a_file_and_from_our_own_stdin(tmp_path: Path) -> None:
    fruit = tmp_path / "fruit.txt"
    fruit.write_bytes(b"pear\napple\n")
    assert cli("run", "--stdin", str(fruit), "--", "sort").stdout == b"apple\npear\n"
    assert cli("run", "--stdin", "-", "--", "sort", stdin=b"b\na\n").stdout == b"a\nb\n"


def test_stdin_is_closed_by_default() -> None:
    done = cli("python", "-c", "import sys; print(repr(sys.stdin.read()))", stdin=b"not for it")
    assert done.stdout == b"''\n"


def test_files_go_in_and_come_back_out(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"alpha\n")
    (tmp_path / "b.bin").write_bytes(b"\x00\xff")
    out = tmp_path / "out" / "deeper"
    done = cli(
        "run",
        "--file",
        str(tmp_path / "a.txt"),
        "--file",
        f"in/b.bin={tmp_path / 'b.bin'}",
        "--output-dir",
        str(out),
        "--",
        "sh",
        "-c",
        "mkdir res && cat a.txt in/b.bin > res/c.bin",
    )
    assert done.returncode == 0, done.stderr
    written = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert written == {
        "a.txt": b"alpha\n",
        "in/b.bin": b"\x00\xff",
        "res/c.bin": b"alpha\n\x00\xff",
    }


def test_the_executable_bit_goes_in_and_comes_back_out(tmp_path: Path) -> None:
    """A host script runs as ``./name``; a program made in the sandbox runs on the host."""
    script = tmp_path / "hello.sh"
    script.write_text("#!/bin/sh\necho hello from $0\n")
    script.chmod(0o744)
    (tmp_path / "plain.txt").write_text("data")
    (tmp_path / "plain.txt").chmod(0o655)  # executable by others, not by its owner
    out = tmp_path / "out"
    made = "printf '#!/bin/sh\\necho made inside\\n' > made.sh && chmod +x made.sh && ./hello.sh"
    done = cli(
        "run", "--file", str(script), "--file", str(tmp_path / "plain.txt"),
        "--output-dir", str(out), "--keep-modes", "--", "sh", "-c", made,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"hello from ./hello.sh\n"
    modes = {path.name: path.stat().st_mode & 0o111 != 0 for path in out.iterdir()}
    assert modes == {"hello.sh": True, "made.sh": True, "plain.txt": False}
    assert subprocess.run([out / "made.sh"], capture_output=True, check=True).stdout == (
        b"made inside\n"
    )


def test_output_dir_refuses_a_directory_that_is_not_empty(tmp_path: Path) -> None:
    """A directory with anything in it (a symlink planted there, the host's files) is a
    usage error naming it, before anything runs: the program's files never mix with the
    host's or go through a link."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / "c.txt").symlink_to(victim)
    done = cli("run", "--output-dir", str(out), "--", "sh", "-c", "echo new > c.txt")
    assert f"argument --output-dir: {out} is not empty" in assert_usage_error(done)
    assert victim.read_bytes() == b"precious" and (out / "c.txt").is_symlink()


def test_python_runs_a_host_file_with_its_arguments(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text("import sys; print(sys.argv)")
    done = cli("python", str(script), "a", "-b", "--json")
    assert done.stdout == b"['/sandbox/main.py', 'a', '-b', '--json']\n"
    done = cli("python", "-c", "import sys; print(sys.argv[1:])", "--", "--x")
    assert done.stdout == b"['--x']\n"
    assert cli("python", "-", stdin=b"print(7 * 6)").stdout == b"42\n"


def test_env_and_readable(world_readable_dir: Path) -> None:
    shared = world_readable_dir / "shared.txt"
    shared.write_text("visible\n")
    shared.chmod(0o644)
    done = cli(
        "run", "--env", "GREETING=hi", "--readable", str(shared), "--",
        "sh", "-c", f'echo "$GREETING"; cat {shared}',
    )  # fmt: skip
    assert done.stdout == b"hi\nvisible\n", done.stderr


# ---- usage errors --------------------------------------------------------------------


@pytest.mark.no_bwrap
@pytest.mark.parametrize(
    "args",
    [
        ["--bogus"],
        ["bogus"],
        ["run"],
        ["run", "--"],
        ["run", "--memory", "0", "--", "true"],
        ["run", "--cpu-time=-1", "--", "true"],
        ["run", "--memory", "12XB", "--", "true"],
        ["run", "--processes", "2", "--", "true"],
        ["run", "--stdin", "/no/such/file", "--", "cat"],
        ["run", "--file", "/no/such/file", "--", "true"],
        ["run", "--file", "x=/", "--", "true"],
        ["run", "--file", "../up=/etc/hostname", "--", "true"],
        ["run", "--file", "a=/etc/hostname", "--file", "a=/etc/hostname", "--", "true"],
        ["run", "--env", "NOVALUE", "--", "true"],
        ["run", "--readable", "/proc", "--", "true"],
        ["run", "--output-dir", "/dev/null/x", "--", "true"],
        ["python"],
        ["python", "/no/such/file.py"],
        ["python", "--stdin", "-", "-"],
        ["run", "--stdin", "-", "--file", "in.txt=-", "--", "true"],
        ["selftest", "--bogus"],
    ],
)
def test_bad_options_are_usage_errors_without_a_traceback(args: list[str]) -> None:
    assert_usage_error(cli(*args))


@pytest.mark.no_bwrap
def test_help_documents_the_exit_statuses() -> None:
    done = cli("run", "--help")
    assert done.returncode == 0
    text = done.stdout.decode()
    for line in ("128+N", "124 ", "125 ", "130 ", "141 ", "143 ", "--memory SIZE", "--json"):
        assert line in text, line


# ---- Ctrl-C, selftest, demo ----------------------------------------------------------


@pytest.mark.parametrize(
    ("signum", "status", "message"),
    [
        (signal.SIGINT, 130, "pysandbox: interrupted: the sandbox was killed\n"),
        (signal.SIGTERM, 143, "pysandbox: terminated: the sandbox was killed\n"),
    ],
    ids=["ctrl-c", "sigterm"],
)
def test_ctrl_c_or_sigterm_kills_the_sandbox_and_exits_128_plus_it(
    tmp_path: Path, signum: int, status: int, message: str
) -> None:
    marker = unique_marker()  # in a file: the command line's own argv must not hold it
    program = tmp_path / "sleeper.py"
    program.write_text(
        f"import os; os.execv('/bin/sh', ['sh', '-c', 'sleep 60; exit 0', {marker!r}])"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", WITH_DEFAULT_SIGINT, SCRIPT, "python", "--wall-time", "100",
         str(program)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + TIMEOUT  # the CLI starting, then its sandbox
        while not pids_with_marker(marker):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the sandbox never started"
            time.sleep(0.02)
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=PROMPTLY)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == status
    assert stderr.decode() == message
    assert stdout == b""
    assert survivors(marker) == [], "the sandbox outlived the signal"


def test_a_reader_that_went_away_is_sigpipe_without_a_traceback() -> None:
    """``pysandbox run ... | head -1``: the pipe's reader is gone before the output comes."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [SCRIPT, "python", "-c", "print('x' * 100_000)"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=TIMEOUT,
            check=False,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 128 + signal.SIGPIPE
    assert b"Traceback" not in done.stderr and b"Exception ignored" not in done.stderr


def test_selftest_json_agrees_with_its_exit_status() -> None:
    done = cli("selftest", "--json")
    report = json.loads(done.stdout)
    assert set(report) == {"ok", "checks"}
    assert report["ok"] == all(check["ok"] for check in report["checks"])
    assert done.returncode == (0 if report["ok"] else 1)
    names = [check["name"] for check in report["checks"]]
    assert "seccomp filter" in names
    for check in report["checks"]:
        assert set(check) == {"name", "ok", "detail", "fix"}


def test_demo_command_runs_the_reference_demo() -> None:
    done = cli("demo")
    assert done.returncode == 0
    assert done.stdout.decode().rstrip().endswith("Returncode: 42")


# ---- the documents' examples: the README's quick start, the guide's pages -----------

#: Every console block, in reading order (the README's, then the pages'), each in one
#: shell of its own in one scratch folder.
CONSOLE_BLOCKS = [
    block
    for document in (README, DOCS / "shell.rst", DOCS / "graders.rst")
    for block in code_blocks("console", document)
]
#: What changes from run to run: times and sizes, in the verdict line and in the JSON.
MEASURES = [
    (re.compile(r"\b(cpu|wall) [0-9.]+ s\b"), r"\1 N s"),
    (re.compile(r"max rss [0-9.]+ \w+"), "max rss N"),
    (re.compile(r'"(wall_time|cpu_time|max_rss)": [0-9.e-]+'), r'"\1": N'),
    (re.compile(r"in [0-9.]+ s \([0-9.]+ jobs/s\)"), "in N s (N jobs/s)"),
]


def _measures_masked(text: str) -> str:
    for pattern, mask in MEASURES:
        text = pattern.sub(mask, text)
    return text


def test_documented_command_line_examples_print_what_they_show(tmp_path: Path) -> None:
    """Each console block runs in one shell, in order, in a scratch directory: its
    output (stdout and stderr as a terminal interleaves them) is the block's lines
    that are not ``$`` commands."""
    assert CONSOLE_BLOCKS
    env = {**os.environ, "PATH": f"{Path(SCRIPT).parent}{os.pathsep}{os.environ['PATH']}"}
    for block in CONSOLE_BLOCKS:
        lines = [line[3:] for line in block.rstrip().splitlines()]
        script = "\n".join(line[2:] for line in lines if line.startswith("$ "))
        shown = "\n".join(line for line in lines if not line.startswith("$ "))
        done = subprocess.run(
            ["bash", "-c", script],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
            env=env,
            timeout=TIMEOUT,
            check=False,
        )
        printed = done.stdout.decode().rstrip()
        assert _measures_masked(printed) == _measures_masked(shown), printed


def test_the_command_line_imports_no_asyncio_until_an_async_form_is_used() -> None:
    """asyncio's import is about 30 ms of every command line's start-up: the package
    loads its async forms only when one is asked for."""
    check = (
        "import sys, pysandbox._frontends.cli\n"
        "before = 'asyncio' in sys.modules\n"
        "pysandbox.run_async\n"
        "print(before, 'asyncio' in sys.modules)\n"
    )
    shown = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, check=True
    ).stdout
    assert shown.split() == ["False", "True"]
