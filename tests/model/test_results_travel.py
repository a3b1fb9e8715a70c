# SPDX-License-Identifier: MIT
"""Results travel: ``pickle``, ``copy``, ``dataclasses.asdict``, JSON, and ``check()``.

Every result here comes from a real sandbox; a grader's view of ``check()`` is checked in a
real pytest run in a subprocess.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import pickle
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import pysandbox
from pysandbox import (
    File,
    Limits,
    ProcessOutput,
    Result,
    SandboxFailure,
    Status,
    eval_in_sandbox,
    run_python,
)

BINARY = b"\xff\xfe\x00bin\x80"

PROGRAMS: dict[Status, tuple[str, Limits]] = {
    Status.OK: (
        "import sys\n"
        "sys.stdout.buffer.write(b'\\xff\\xfe\\x00bin\\x80')\n"
        "sys.stderr.write('caf\\u00e9\\n')\n"
        "open('out.bin', 'wb').write(b'\\x00\\x01\\xfe')\n"
        "open('note.txt', 'w').write('h\\u00e9llo')\n"
        "import os; os.chmod('out.bin', 0o755)\n",
        Limits(),
    ),
    Status.NONZERO_EXIT: ("print('bye'); raise SystemExit(3)", Limits()),
    Status.SIGNALED: ("import os, signal; os.kill(os.getpid(), signal.SIGABRT)", Limits()),
    Status.WALL_TIME_EXCEEDED: ("import time; time.sleep(60)", Limits(wall_time=0.5)),
    Status.CPU_TIME_EXCEEDED: ("while True: pass", Limits(cpu_time=0.25)),
    # Printing on and on: the cap, not the program's end, ends it (a program that wrote
    # its 10 KB and exited could be reported by the init before the kill).
    Status.OUTPUT_EXCEEDED: ("while True: print('x' * 10000)", Limits(stdout=100)),
}

#: The statuses of ``PROGRAMS`` whose run the C core ended by a kill.
KILLED_BEFORE_THE_END = {
    Status.WALL_TIME_EXCEEDED,
    Status.CPU_TIME_EXCEEDED,
    Status.OUTPUT_EXCEEDED,
}


@pytest.fixture(scope="module")
def results() -> dict[Status, Result]:
    """One real result per status that is cheap to reach."""
    made = {status: run_python(code, limits=limits) for status, (code, limits) in PROGRAMS.items()}
    for status, result in made.items():
        assert result.status is status, result
    return made


def test_ok_result_has_binary_output_and_files(results: dict[Status, Result]) -> None:
    ok = results[Status.OK]
    assert ok.stdout == BINARY
    assert ok.files["out.bin"] == b"\x00\x01\xfe"
    assert ok.files["note.txt"] == "héllo".encode()
    assert ok.executables == frozenset({"out.bin"})


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_results_pickle_with_every_protocol(results: dict[Status, Result], protocol: int) -> None:
    for result in results.values():
        back = pickle.loads(pickle.dumps(result, protocol=protocol))
        assert back == result
        assert back.status is result.status
        assert dict(back.files) == dict(result.files)
        assert back.executables == result.executables
        assert hash(back) == hash(result)
        with pytest.raises(TypeError):
            back.files["new"] = b"x"  # type: ignore[index]


def test_results_copy_and_deepcopy(results: dict[Status, Result]) -> None:
    for result in results.values():
        for duplicate in (copy.copy(result), copy.deepcopy(result)):
            assert duplicate == result
            assert duplicate.executables == result.executables
            assert duplicate.status is result.status
            with pytest.raises(TypeError):
                duplicate.files["new"] = b"x"  # type: ignore[index]


def test_asdict_works_and_files_stay_read_only(results: dict[Status, Result]) -> None:
    ok = results[Status.OK]
    as_dict = dataclasses.asdict(ok)
    assert as_dict["status"] is Status.OK
    assert as_dict["stdout"] == BINARY
    assert dict(as_dict["files"]) == dict(ok.files)
    assert as_dict["executables"] == frozenset({"out.bin"})
    assert [f.name for f in dataclasses.fields(Result)] == list(as_dict)
    with pytest.raises(TypeError):
        ok.files["out.bin"] = b"changed"  # type: ignore[index]
    with pytest.raises(AttributeError):
        ok.files.clear()  # type: ignore[attr-defined]
    assert ok.files["out.bin"] == b"\x00\x01\xfe"


def test_files_are_a_copy_of_the_callers_mapping() -> None:
    mine = {"a": b"1"}
    result = Result(Status.OK, 0, None, b"", b"", False, False, 0.0, 0.0, 0, mine, False)
    mine["a"] = b"2"
    assert result.files == {"a": b"1"}


def test_process_output_travels() -> None:
    output = eval_in_sandbox("print('héllo')")
    assert output == ProcessOutput(returncode=0, stdout="héllo", stderr="")
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(output, protocol=protocol)) == output
    assert copy.deepcopy(output) == output
    assert dataclasses.asdict(output) == {"returncode": 0, "stdout": "héllo", "stderr": ""}
    assert json.loads(json.dumps(dataclasses.asdict(output)))["stdout"] == "héllo"


def test_to_dict_schema_and_json_round_trip(results: dict[Status, Result]) -> None:
    for status, result in results.items():
        data = result.to_dict()
        assert set(data) == {
            "status",
            "returncode",
            "signal",
            "stdout",
            "stdout_encoding",
            "stdout_truncated",
            "stderr",
            "stderr_encoding",
            "stderr_truncated",
            "wall_time",
            "cpu_time",
            "max_rss",
            "files",
            "files_truncated",
            "queued_time",
            # A run a limit killed before its program ended never had its files collected.
            *(["files_not_collected"] if status in KILLED_BEFORE_THE_END else []),
        }
        assert data["status"] == status.name
        assert data["queued_time"] == 0.0
        loaded = json.loads(json.dumps(data))
        assert loaded == data
        assert Result.from_dict(loaded) == result


def test_to_dict_encodes_text_as_text_and_binary_as_base64(
    results: dict[Status, Result],
) -> None:
    data = results[Status.OK].to_dict()
    assert data["stdout_encoding"] == "base64"
    assert isinstance(data["stdout"], str) and base64.b64decode(data["stdout"]) == BINARY
    assert (data["stderr"], data["stderr_encoding"]) == ("café\n", "utf-8")
    assert data["files"] == {
        "out.bin": {
            "data": base64.b64encode(b"\x00\x01\xfe").decode(),
            "encoding": "base64",
            "executable": True,
        },
        "note.txt": {"data": "héllo", "encoding": "utf-8", "executable": False},
    }
    assert data["returncode"] == 0 and data["signal"] is None
    killed = results[Status.SIGNALED].to_dict()
    assert killed["returncode"] is None and killed["signal"] == signal.SIGABRT
    capped = results[Status.OUTPUT_EXCEEDED].to_dict()
    assert capped["stdout_truncated"] is True and capped["stdout"] == "x" * 100


@pytest.mark.no_bwrap
@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("status", "NOPE"),
        ("stdout_encoding", "latin-1"),
        ("stdout", "not base64!"),
        ("returncode", "3"),
        ("wall_time", None),
        ("files_truncated", 1),
        ("files", [1]),
        ("signal", True),
        ("max_rss", 1.5),
    ],
)
def test_from_dict_rejects_a_malformed_dict(key: str, value: object) -> None:
    good = Result(Status.OK, 0, None, b"\xff", b"", False, False, 0.1, 0.1, 1, {}, False)
    data = good.to_dict()
    assert Result.from_dict(data) == good
    data[key] = value
    with pytest.raises(ValueError, match=key):
        Result.from_dict(data)
    del data[key]
    with pytest.raises(ValueError, match=key):
        Result.from_dict(data)


@pytest.mark.no_bwrap
def test_queued_time_travels_and_defaults_to_zero() -> None:
    waited = Result(
        Status.OK, 0, None, b"", b"", False, False, 0.1, 0.1, 1, {}, False, queued_time=2.5
    )
    data = json.loads(json.dumps(waited.to_dict()))
    assert data["queued_time"] == 2.5
    assert Result.from_dict(data) == waited
    assert pickle.loads(pickle.dumps(waited)).queued_time == 2.5
    del data["queued_time"]  # a dict written before the field existed
    assert Result.from_dict(data).queued_time == 0.0
    for bad in ("2.5", None, True):
        data["queued_time"] = bad
        with pytest.raises(ValueError, match=r"^queued_time"):
            Result.from_dict(data)


@pytest.mark.no_bwrap
def test_executables_default_to_none_and_must_name_files() -> None:
    files = {"a": b"1", "b": b"2"}
    old_style = Result(Status.OK, 0, None, b"", b"", False, False, 0.0, 0.0, 0, files, False)
    assert old_style.executables == frozenset()
    assert old_style.files_with_modes() == {"a": File(b"1"), "b": File(b"2")}
    made = Result(Status.OK, 0, None, b"", b"", False, False, 0.0, 0.0, 0, files, False, ["a"])
    assert made.executables == frozenset({"a"})
    assert made.files_with_modes() == {"a": File(b"1", executable=True), "b": File(b"2")}
    assert made != old_style
    with pytest.raises(ValueError, match=r"^executables: names not in files: \['c'\]"):
        Result(Status.OK, 0, None, b"", b"", False, False, 0.0, 0.0, 0, files, False, {"a", "c"})
    with pytest.raises(TypeError, match=r"^executables must be a set of names"):
        Result(Status.OK, 0, None, b"", b"", False, False, 0.0, 0.0, 0, files, False, "a")


@pytest.mark.no_bwrap
def test_from_dict_reads_the_executable_bit_and_defaults_it_to_false() -> None:
    files = {"run": b"#!/bin/sh\n", "data": b"\xff"}
    result = Result(Status.OK, 0, None, b"", b"", False, False, 0.1, 0.1, 1, files, False, {"run"})
    data = json.loads(json.dumps(result.to_dict()))
    assert data["files"]["run"]["executable"] is True
    assert data["files"]["data"]["executable"] is False
    assert Result.from_dict(data) == result
    for entry in data["files"].values():  # a dict written before the bit existed
        del entry["executable"]
    assert Result.from_dict(data).executables == frozenset()


@pytest.mark.no_bwrap
@pytest.mark.parametrize("value", [1, 0, "true", None, [True]])
def test_from_dict_rejects_an_executable_that_is_not_a_bool(value: object) -> None:
    data = Result(
        Status.OK, 0, None, b"", b"", False, False, 0.1, 0.1, 1, {"run": b""}, False
    ).to_dict()
    data["files"]["run"]["executable"] = value  # type: ignore[index]
    with pytest.raises(ValueError, match=r"^files\['run'\]\['executable'\]: expected bool"):
        Result.from_dict(data)


@pytest.mark.no_bwrap
def test_sandbox_failure_is_exported_and_an_assertion_error() -> None:
    assert "SandboxFailure" in pysandbox.__all__
    assert pysandbox.__all__ == sorted(pysandbox.__all__)
    assert issubclass(SandboxFailure, AssertionError)


def test_check_returns_an_ok_result_itself(results: dict[Status, Result]) -> None:
    ok = results[Status.OK]
    assert ok.check() is ok
    assert run_python("print(42)").check().stdout == b"42\n"


def test_check_raises_on_a_nonzero_exit() -> None:
    result = run_python("import sys\nfor i in range(30): print('line', i)\nsys.exit(3)")
    with pytest.raises(SandboxFailure) as caught:
        result.check()
    message = str(caught.value)
    assert caught.value.result is result
    assert "NONZERO_EXIT" in message and "exit code 3" in message
    assert f"CPU {result.cpu_time:.3f} s" in message and f"wall {result.wall_time:.3f} s" in message
    assert "line 29" in message and "line 20" in message and "line 19" not in message
    back = pickle.loads(pickle.dumps(caught.value))
    assert str(back) == message and back.result == result


def test_check_raises_on_wall_time_with_the_signal_and_both_tails() -> None:
    code = (
        "import sys, time\n"
        "print('started', flush=True)\n"
        "sys.stderr.write('bad \\xff byte\\n'); sys.stderr.flush()\n"
        "sys.stderr.buffer.write(b'raw \\xff\\n'); sys.stderr.flush()\n"
        "time.sleep(60)\n"
    )
    result = run_python(code, limits=Limits(wall_time=1))
    assert result.status is Status.WALL_TIME_EXCEEDED
    with pytest.raises(SandboxFailure) as caught:
        result.check()
    message = str(caught.value)
    assert "WALL_TIME_EXCEEDED" in message
    assert result.signal is not None
    assert f"killed by {signal.Signals(result.signal).name}" in message
    assert "started" in message and "raw \ufffd" in message


def test_check_in_a_real_pytest_run_shows_the_failure(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_grader.py").write_text(
        textwrap.dedent(
            """
            from pysandbox import run_python

            def test_submission() -> None:
                run_python("print('answer', 6 * 7); import sys; "
                           "sys.stderr.write('o' + 'ops'); sys.exit(3)").check()
            """
        )
    )
    grader = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_grader.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert grader.returncode == 1, grader.stdout + grader.stderr
    out = grader.stdout
    assert "SandboxFailure: sandboxed program failed: NONZERO_EXIT, exit code 3" in out
    assert "answer 42" in out and "oops" in out
    assert "1 failed" in out
