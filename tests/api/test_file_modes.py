# SPDX-License-Identifier: MIT
"""Files keep their executable bit: ``File`` in, ``Result.executables`` out.

Real runs, by a root and a non-root caller: a script given executable runs as ``./x``,
one given without cannot; gcc compiles in one sandbox and the binary runs in the next;
modes set inside with ``chmod`` come back as exactly the executable bit, never setuid,
setgid or sticky.
"""

from __future__ import annotations

import asyncio
import copy
import pickle
import shutil
import struct
from collections.abc import Mapping
from pathlib import Path

import pytest
from support.callers import Caller

import pysandbox
import pysandbox._api.run
from pysandbox import File, Limits, SandboxError, Status, run, run_async, run_python
from pysandbox._model.filestream import tmpfs_footprint

SCRIPT = b"#!/bin/sh\necho ran as $0\n"
GENEROUS = Limits(cpu_time=10, wall_time=60)


def umask() -> int:
    """This process's umask, which the sandbox inherits, read without changing it."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Umask:"):
            return int(line.split()[1], 8)
    raise AssertionError("no Umask line in /proc/self/status")


def parse_stat(output: bytes) -> dict[str, int]:
    """Name to mode, from lines of ``stat -c "%a %n"``."""
    pairs = (line.split(" ", 1) for line in output.decode().splitlines())
    return {name: int(mode, 8) for mode, name in pairs}


def modes_inside(caller: Caller, files: Mapping[str, bytes | File]) -> dict[str, int]:
    """The permission bits (``stat %a``, setuid/setgid/sticky included) each file has
    inside a sandbox that ``caller`` gives ``files``."""
    script = 'stat -c "%a %n" "$@"'
    result = caller.run(["/bin/sh", "-c", script, "sh", *files], files=files)
    assert result.status is Status.OK, result
    return parse_stat(result.stdout)


# --------------------------------------------------------------------------- File itself


@pytest.mark.no_bwrap
def test_file_is_exported_and_defaults_to_not_executable() -> None:
    assert "File" in pysandbox.__all__ and pysandbox.File is File
    assert File(b"x") == File(b"x", executable=False) == File(content=b"x")
    assert File(b"x") != File(b"x", executable=True)


@pytest.mark.no_bwrap
def test_file_keeps_bytes_like_content_as_an_independent_copy() -> None:
    buffer = bytearray(b"abc")
    for content in (buffer, memoryview(buffer), memoryview(b"xabcx")[1:4]):
        file = File(content)
        assert type(file.content) is bytes and file.content == b"abc"
    kept = File(buffer)
    buffer[0] = ord("z")
    assert kept.content == b"abc"


@pytest.mark.no_bwrap
@pytest.mark.parametrize("content", ["text", None, 3, [1], File(b"x")])
def test_file_content_must_be_bytes_like(content: object) -> None:
    with pytest.raises(TypeError, match=r"^content must be bytes"):
        File(content)  # type: ignore[arg-type]


@pytest.mark.no_bwrap
@pytest.mark.parametrize("executable", [1, 0, 0o755, 0o4755, "yes", None])
def test_file_executable_must_be_a_bool(executable: object) -> None:
    """No number: a mode such as 0o4755 cannot even be asked for."""
    with pytest.raises(TypeError, match=r"^executable must be a bool"):
        File(b"x", executable=executable)  # type: ignore[arg-type]


@pytest.mark.no_bwrap
def test_file_is_frozen_hashable_and_travels() -> None:
    file = File(b"\x7fELF", executable=True)
    with pytest.raises(AttributeError):
        file.executable = False  # type: ignore[misc]
    assert len({file, File(b"\x7fELF", executable=True), File(b"\x7fELF")}) == 2
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(file, protocol=protocol)) == file
    assert copy.deepcopy(file) == file


@pytest.mark.no_bwrap
def test_tmpfs_footprint_counts_file_values_like_bytes() -> None:
    files = {"a": File(b"x" * 5000, executable=True), "b": File(b""), "c": b"y"}
    assert tmpfs_footprint(files, 4096) == tmpfs_footprint(
        {"a": b"x" * 5000, "b": b"", "c": b"y"}, 4096
    )
    assert tmpfs_footprint(files, 4096) == 3 * 4096


def test_file_values_that_do_not_fit_are_refused_up_front() -> None:
    files = {"big": File(b"x" * 3 * 4096, executable=True)}
    with pytest.raises(ValueError, match=r"^files: 1 files of 12288 bytes"):
        run(["true"], files=files, limits=Limits(disk=2 * 4096))


# --------------------------------------------------------------------------- modes in


def test_an_executable_input_runs_as_dot_slash(caller: Caller) -> None:
    result = caller.run(["./x"], files={"x": File(SCRIPT, executable=True)})
    assert result.status is Status.OK, result
    assert result.stdout == b"ran as ./x\n"
    assert result.executables == frozenset({"x"})


def test_run_python_and_run_async_take_files_too() -> None:
    code = "import subprocess; print(subprocess.run(['./bin/x'], capture_output=True).stdout)"
    files: dict[str, bytes | File] = {"bin/x": File(SCRIPT, executable=True)}
    assert run_python(code, files=files).stdout == b"b'ran as ./bin/x\\n'\n"
    result = asyncio.run(run_async(["bin/x"], files=files))
    assert result.stdout == b"ran as bin/x\n"


@pytest.mark.parametrize(
    "value",
    [SCRIPT, File(SCRIPT), File(SCRIPT, executable=False)],
    ids=["bytes", "File", "File-not-executable"],
)
def test_an_input_that_is_not_executable_cannot_be_executed(
    caller: Caller, value: bytes | File
) -> None:
    result = caller.run(["/bin/sh", "-c", "./x"], files={"x": value})
    assert result.returncode == 126, result
    assert b"Permission denied" in result.stderr
    assert result.executables == frozenset()
    with pytest.raises(SandboxError, match=r"cannot execute \./x: Permission denied"):
        caller.run(["./x"], files={"x": value})


def test_input_modes_are_0755_and_0644_less_the_umask_and_stay_writable(
    caller: Caller,
) -> None:
    files: dict[str, bytes | File] = {
        "exe": File(SCRIPT, executable=True),
        "plain": File(b"p"),
        "raw": b"r",
        "deep/er/exe": File(b"", executable=True),
    }
    mask = umask()
    assert modes_inside(caller, files) == {
        "exe": 0o755 & ~mask,
        "plain": 0o644 & ~mask,
        "raw": 0o644 & ~mask,
        "deep/er/exe": 0o755 & ~mask,
    }
    result = caller.run(["/bin/sh", "-c", "echo more >> exe && ./exe"], files=files)
    assert result.status is Status.OK and result.files["exe"] == SCRIPT + b"more\n", result


@pytest.mark.parametrize("mode", [0x02, 0x04, 0x08, 0x80, 0xFF])
def test_the_init_refuses_a_stream_with_other_mode_bits(
    mode: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``File`` cannot express them; this is the init's own check, for a stream that
    another caller of the init (or a bug) could write.  Nothing runs."""

    def with_mode(files: object) -> bytes:
        name, data = b"x", b"#!/bin/sh\necho ran\n"
        header = b"F" + bytes([mode]) + struct.pack("<I", len(name)) + name
        return header + struct.pack("<Q", len(data)) + data + b"E\x00"

    monkeypatch.setattr(pysandbox._api.run, "encode_files", with_mode)
    with pytest.raises(SandboxError, match=r"reading the input files \(malformed stream\)"):
        run(["/bin/sh", "-c", "echo the program ran"], files={"x": b"ignored"})


# --------------------------------------------------------------------------- modes out

#: Mode set inside with chmod, and whether the file comes back executable: exactly when
#: its owner may execute it.
MODES_OUT = {
    "u700": (0o700, True),
    "u750": (0o750, True),
    "u755": (0o755, True),
    "u500": (0o500, True),
    "u644": (0o644, False),
    "g610": (0o610, False),
    "o601": (0o601, False),
    "setuid": (0o4755, True),
    "setgid": (0o2755, True),
    "sticky": (0o1700, True),
    "all": (0o7777, True),
}


def test_executables_are_the_files_whose_owner_may_execute_them(caller: Caller) -> None:
    chmods = " && ".join(f"chmod {mode:o} {name}" for name, (mode, _) in MODES_OUT.items())
    script = f"touch {' '.join(MODES_OUT)} && {chmods} && stat -c '%a %n' *"
    result = caller.run(["/bin/sh", "-c", script])
    assert result.status is Status.OK, result
    # The modes really were set inside, setuid and all, when the init read them.
    assert parse_stat(result.stdout) == {name: mode for name, (mode, _) in MODES_OUT.items()}
    assert set(result.files) == set(MODES_OUT) and not result.files_truncated
    assert result.executables == {name for name, (_, executable) in MODES_OUT.items() if executable}


def test_setuid_setgid_and_sticky_do_not_come_back(caller: Caller) -> None:
    """A run sets them; what comes back, given to the next run, is 0755 at most."""
    made = caller.run(
        ["/bin/sh", "-c", "touch a b c && chmod 4755 a && chmod 2711 b && chmod 1777 c"]
    )
    assert made.status is Status.OK and made.executables == {"a", "b", "c"}, made
    again = made.files_with_modes()
    assert again == {name: File(b"", executable=True) for name in "abc"}
    assert modes_inside(caller, again) == dict.fromkeys("abc", 0o755 & ~umask())


def test_files_with_modes_gives_every_file_with_its_bit() -> None:
    result = run(["/bin/sh", "-c", "printf 1 > x && printf 2 > y && chmod +x x"])
    assert result.files_with_modes() == {"x": File(b"1", executable=True), "y": File(b"2")}


# --------------------------------------------------------------------------- compile, then run

PROGRAM_C = b"""#include <stdio.h>
int main(void) {
    long a, b;
    if (scanf("%ld %ld", &a, &b) != 2) return 2;
    printf("%ld\\n", a + b);
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed on this host")
def test_gcc_compiles_in_one_sandbox_and_the_binary_runs_in_the_next(caller: Caller) -> None:
    built = caller.run(
        ["gcc", "-O2", "-o", "sum", "sum.c"], files={"sum.c": PROGRAM_C}, limits=GENEROUS
    )
    assert built.status is Status.OK, built
    assert built.executables == frozenset({"sum"})
    assert set(built.files) == {"sum.c", "sum"}  # gcc's temporary files in "." are gone
    assert built.files["sum"].startswith(b"\x7fELF")
    for given, expected in [(b"2 3", b"5\n"), (b"-7 7\n", b"0\n"), (b"40 2", b"42\n")]:
        ran = caller.run(["./sum"], stdin=given, files=built.files_with_modes())
        assert (ran.status, ran.stdout) == (Status.OK, expected), ran
    # The same files without their modes: the binary is there but cannot run.
    with pytest.raises(SandboxError, match="Permission denied"):
        caller.run(["./sum"], stdin=b"1 1", files=dict(built.files))
