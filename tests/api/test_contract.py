# SPDX-License-Identifier: MIT
"""eval_in_sandbox keeps the reference implementation's contract exactly."""

from __future__ import annotations

import dataclasses
import inspect
import os
import stat

import pytest
from support.timing import KILL_LATENCY, PROMPTLY

import pysandbox
from pysandbox import ProcessOutput, SandboxError, eval_in_sandbox

#: Every test here that calls eval_in_sandbox or run_python runs fresh and warm (conftest).
WARM_THROUGH = True


@pytest.mark.no_bwrap
def test_signature_and_defaults_match_the_reference() -> None:
    params = inspect.signature(eval_in_sandbox).parameters
    assert list(params) == [
        "python_code",
        "mem_max_mb",
        "cpu_max_time_sec",
        "timeout_max_time_sec",
        "io_max_kb",
    ]
    defaults = {name: p.default for name, p in params.items()}
    assert defaults == {
        "python_code": inspect.Parameter.empty,
        "mem_max_mb": 100,
        "cpu_max_time_sec": 1,
        "timeout_max_time_sec": 10,
        "io_max_kb": 128,
    }


@pytest.mark.no_bwrap
def test_process_output_is_the_reference_record() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(ProcessOutput)}
    assert fields == {"returncode": 0, "stdout": "", "stderr": ""}
    assert ProcessOutput() and ProcessOutput(0, "x", "y")
    assert not ProcessOutput(returncode=1)
    assert not ProcessOutput(returncode=-9)
    assert issubclass(SandboxError, Exception)


@pytest.mark.no_bwrap
def test_public_names_are_sorted_and_exported() -> None:
    assert pysandbox.__all__ == sorted(pysandbox.__all__)
    for name in pysandbox.__all__:
        assert hasattr(pysandbox, name)


def test_output_is_decoded_and_stripped() -> None:
    result = eval_in_sandbox("print('  hello\\n'); import sys; sys.stderr.write('\\n err \\n')")
    assert result == ProcessOutput(returncode=0, stdout="hello", stderr="err")
    assert result


def test_unicode_round_trips() -> None:
    assert eval_in_sandbox("print('žluťoučký kůň 🐍')").stdout == "žluťoučký kůň 🐍"


def test_exit_code_is_returned() -> None:
    assert eval_in_sandbox("import sys; sys.exit(42)").returncode == 42


def test_uncaught_exception_returns_1_with_traceback() -> None:
    result = eval_in_sandbox("raise RuntimeError('boom')")
    assert result.returncode == 1
    assert 'File "/home/code.py", line 1' in result.stderr
    assert result.stderr.endswith("RuntimeError: boom")


def test_memory_error_under_the_address_space_limit_returns_1() -> None:
    result = eval_in_sandbox("x = bytearray(200 * 2**20)", mem_max_mb=100)
    assert result.returncode == 1
    assert result.stderr.endswith("MemoryError")


def test_more_memory_allows_the_same_allocation() -> None:
    """Only the memory limit differs from the test above.  CPU is not what this test is
    about: with a cgroup the CPU cap counts the whole sandbox, and bwrap's start-up plus
    the kernel zeroing 200 MiB took 1.1 s of CPU in the lab's emulated guest (0.1 to 0.3 s
    here), past the default of 1 s, which killed the run with 137."""
    result = eval_in_sandbox("x = bytearray(200 * 2**20)", mem_max_mb=400, cpu_max_time_sec=30)
    assert result.returncode == 0, result


def test_cpu_limit_kills_with_137() -> None:
    result = eval_in_sandbox("while True: pass", cpu_max_time_sec=1)
    assert result.returncode == 137


def test_segfault_returns_139() -> None:
    assert eval_in_sandbox("import ctypes; ctypes.string_at(0)").returncode == 139


def test_wall_clock_timeout_raises_and_is_bounded() -> None:
    import time

    start = time.monotonic()
    with pytest.raises(SandboxError, match=r"^Process timed out$"):
        eval_in_sandbox("import time; time.sleep(30)", timeout_max_time_sec=1)
    assert time.monotonic() - start < 1 + KILL_LATENCY


def test_fractional_timeout() -> None:
    with pytest.raises(SandboxError, match=r"^Process timed out$"):
        eval_in_sandbox("import time; time.sleep(30)", timeout_max_time_sec=0.5)


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_output_over_the_cap_raises(stream: str) -> None:
    code = f"import sys; sys.{stream}.write('x' * 2049)"
    with pytest.raises(SandboxError, match=r"^I/O buffer size exceeded$"):
        eval_in_sandbox(code, io_max_kb=2)


def test_endless_output_is_stopped_at_once() -> None:
    import time

    start = time.monotonic()
    with pytest.raises(SandboxError, match=r"^I/O buffer size exceeded$"):
        eval_in_sandbox("while True: print('y' * 1000)", timeout_max_time_sec=30)
    assert time.monotonic() - start < PROMPTLY


def test_invalid_utf8_raises() -> None:
    with pytest.raises(SandboxError, match=r"^Subprocess did not produce valid UTF-8$"):
        eval_in_sandbox("import sys; sys.stdout.buffer.write(b'\\xff\\xfe')")


def test_code_runs_as_home_code_py_read_only() -> None:
    code = """
import os, sys
print(os.getcwd(), os.path.abspath(__file__), os.listdir("."))
for path in ("code.py", "new.txt", "/home/other.txt"):
    try:
        open(path, "a").close()
    except OSError as exc:
        print(exc.errno == 30)
"""
    result = eval_in_sandbox(code)
    lines = result.stdout.splitlines()
    assert lines[0] == "/home /home/code.py ['code.py']"
    assert lines[1:] == ["True", "True", "True"]


def test_environment_is_empty_but_for_python() -> None:
    result = eval_in_sandbox("import os; print(sorted(os.environ))")
    assert set(eval(result.stdout)) <= {"PWD", "LC_CTYPE"}


def test_stdin_is_closed() -> None:
    result = eval_in_sandbox("input()")
    assert result.returncode == 1
    assert result.stderr.endswith("EOFError: EOF when reading a line")


def test_one_mebibyte_script_runs() -> None:
    padding = "# " + "p" * 77 + "\n"
    code = padding * (2**20 // len(padding) + 1) + "print(len(open(__file__).read()))"
    assert len(code) > 2**20
    assert eval_in_sandbox(code).stdout == str(len(code) + 1)


def test_demo_module_runs_the_reference_demo(capsys: pytest.CaptureFixture[str]) -> None:
    from pysandbox.__main__ import main

    assert main([]) == 0
    out = capsys.readouterr().out
    assert "Hello World from stdout!" in out
    assert "Writing to a file failed with: [Errno 30] Read-only file system" in out
    assert "Deleting a file failed with: [Errno 30] Read-only file system" in out
    assert "Stderr:     Hello World from stderr!" in out
    assert out.rstrip().endswith("Returncode: 42")


# ---- bad input: rejected before anything runs -------------------------------------


@pytest.mark.no_bwrap
@pytest.mark.parametrize("code", [b"print(1)", None, 42, ["print(1)"]])
def test_code_must_be_str(code: object) -> None:
    with pytest.raises(TypeError, match="python_code"):
        eval_in_sandbox(code)  # type: ignore[arg-type]


@pytest.mark.no_bwrap
def test_code_with_nul_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"python_code.*NUL"):
        eval_in_sandbox("print(1)\0")


@pytest.mark.no_bwrap
def test_code_with_lone_surrogate_is_rejected() -> None:
    with pytest.raises(ValueError, match="python_code"):
        eval_in_sandbox("print('\ud800')")


@pytest.mark.no_bwrap
@pytest.mark.parametrize("name", ["mem_max_mb", "cpu_max_time_sec", "io_max_kb"])
@pytest.mark.parametrize(
    ("value", "error"),
    [
        (0, ValueError),
        (-1, ValueError),
        (True, TypeError),
        (1.5, TypeError),
        ("10", TypeError),
        (None, TypeError),
        (2**80, ValueError),
    ],
)
def test_integer_limits_are_validated(name: str, value: object, error: type) -> None:
    with pytest.raises(error, match=name):
        eval_in_sandbox("print(1)", **{name: value})  # type: ignore[arg-type]


@pytest.mark.no_bwrap
@pytest.mark.parametrize(
    ("value", "error"),
    [
        (0, ValueError),
        (-0.5, ValueError),
        (float("nan"), ValueError),
        (float("inf"), ValueError),
        (True, TypeError),
        ("10", TypeError),
        (None, TypeError),
    ],
)
def test_timeout_is_validated(value: object, error: type) -> None:
    with pytest.raises(error, match="timeout_max_time_sec"):
        eval_in_sandbox("print(1)", timeout_max_time_sec=value)  # type: ignore[arg-type]


# ---- host faults: SandboxError naming the fix, and never an unsandboxed run --------


@pytest.mark.no_bwrap
def test_missing_bwrap_raises_the_reference_message(
    monkeypatch: pytest.MonkeyPatch, tmp_path: os.PathLike[str]
) -> None:
    monkeypatch.setenv("PATH", os.fspath(tmp_path))
    with pytest.raises(SandboxError, match=r"^Cannot find the `bwrap` executable$"):
        eval_in_sandbox("print(1)")


def _fake_bwrap(directory: str, script: str) -> None:
    path = os.path.join(directory, "bwrap")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + script)
    os.chmod(path, stat.S_IRWXU)


@pytest.mark.no_bwrap
def test_bwrap_that_cannot_build_the_sandbox_raises_with_its_words_and_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: os.PathLike[str]
) -> None:
    marker = os.path.join(os.fspath(tmp_path), "ran")
    # What bwrap prints when user namespaces are disabled; it must not run the code.
    _fake_bwrap(
        os.fspath(tmp_path),
        f"echo 'bwrap: No permissions to create new namespace' >&2\nexit 1\ntouch {marker}\n",
    )
    monkeypatch.setenv("PATH", os.fspath(tmp_path))
    with pytest.raises(SandboxError) as caught:
        eval_in_sandbox("print(1)")
    message = str(caught.value)
    assert "No permissions to create new namespace" in message
    assert "unprivileged user namespaces" in message
    assert "AppArmor" in message
    assert not os.path.exists(marker)


@pytest.mark.no_bwrap
def test_exit_1_without_a_built_sandbox_is_not_taken_for_the_codes_exit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: os.PathLike[str]
) -> None:
    _fake_bwrap(os.fspath(tmp_path), "exit 1\n")
    monkeypatch.setenv("PATH", os.fspath(tmp_path))
    with pytest.raises(SandboxError, match="could not build the sandbox"):
        eval_in_sandbox("print(1)")


@pytest.mark.no_bwrap
def test_unexecutable_bwrap_raises_sandbox_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: os.PathLike[str]
) -> None:
    _fake_bwrap(os.fspath(tmp_path), "exit 0\n")
    path = os.path.join(os.fspath(tmp_path), "bwrap")
    monkeypatch.setattr("pysandbox._host.programs.find_bwrap", lambda: path)
    os.chmod(path, stat.S_IRUSR)
    with pytest.raises(SandboxError, match="could not start bubblewrap"):
        eval_in_sandbox("print(1)")


def test_non_ascii_white_space_is_stripped_like_str_strip() -> None:
    result = eval_in_sandbox("print('\\u00a0\\u3000 x \\x1c\\u2028')")
    assert result.stdout == "x"
