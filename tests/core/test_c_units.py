# SPDX-License-Identifier: MIT
"""The C units linked alone and fed hostile input (``tests/core/c``): the capture buffer
(``src/buffer.c``), the init's file record streams (``src/init_files.c``) and its file
filter (``src/file_filter.c``), and a
template's copy requests as received and parsed (``src/copy_request.c`` with
``src/fdpass.c``), each built by ``cc`` with the flags of ``setup.py``'s strict build and
run, plain and under AddressSanitizer and UndefinedBehaviorSanitizer (leaks included);
every line of their TAP output must be ``ok``."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.no_bwrap

#: Each program of ``tests/core/c`` and the files of ``src`` it links.
PROGRAMS: dict[str, tuple[str, ...]] = {
    "test_buffer": ("buffer.c",),
    "test_init_files": ("init_files.c", "file_filter.c"),
    "test_file_filter": ("file_filter.c", "init_files.c"),
    "test_copy_request": ("copy_request.c", "fdpass.c"),
    "test_copy_parse": ("copy_request.c", "fdpass.c"),
}
#: ``setup.py``'s compiler flags with ``PYSANDBOX_STRICT`` set.
CFLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror"]
#: ``setup.py``'s sanitizer flags, and UBSan's reports made fatal.
SANITIZE = [
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=undefined",
    "-fno-omit-frame-pointer",
    "-O1",
    "-g",
]


def _cc() -> str:
    found = shutil.which("cc")
    if found is None:
        pytest.fail("cc is not installed: it builds the extension too (apt-get install gcc)")
    return found


def test_the_flags_are_setup_pys() -> None:
    setup = (ROOT / "setup.py").read_text()
    for flag in [*CFLAGS, *(f for f in SANITIZE if f != "-fno-sanitize-recover=undefined")]:
        assert f'"{flag}"' in setup, flag


def _build(program: str, flags: list[str], out: Path) -> Path:
    binary = out / program
    subprocess.run(
        [
            _cc(),
            *flags,
            f"-I{ROOT / 'src'}",
            f"-I{ROOT / 'tests' / 'core' / 'c'}",
            str(ROOT / "tests" / "core" / "c" / f"{program}.c"),
            *(str(ROOT / "src" / source) for source in PROGRAMS[program]),
            "-o",
            str(binary),
        ],
        check=True,
    )
    return binary


def _sanitizers_missing(out: Path) -> str | None:
    """Why this compiler cannot build and run a sanitized program, or None."""
    source = out / "probe.c"
    source.write_text("int main(void) { return 0; }\n")
    build = subprocess.run(
        [_cc(), *SANITIZE, str(source), "-o", str(out / "probe")],
        capture_output=True,
        text=True,
        check=False,
    )
    if build.returncode != 0:
        return f"cc cannot build with -fsanitize=address,undefined: {build.stderr.strip()}"
    run = subprocess.run([str(out / "probe")], capture_output=True, text=True, check=False)
    if run.returncode != 0:
        return f"a sanitized program does not run here: {run.stderr.strip()}"
    return None


@pytest.mark.parametrize("sanitized", [False, True], ids=["plain", "sanitized"])
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_c_unit(program: str, sanitized: bool, tmp_path: Path) -> None:
    flags = list(CFLAGS)
    if sanitized:
        missing = _sanitizers_missing(tmp_path)
        if missing is not None:
            pytest.skip(missing)
        flags += SANITIZE
    binary = _build(program, flags, tmp_path)
    # The program links its own runtimes; scripts/sanitize.sh preloads them for Python.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    env["ASAN_OPTIONS"] = "detect_leaks=1:halt_on_error=1:abort_on_error=1"
    env["UBSAN_OPTIONS"] = "halt_on_error=1:print_stacktrace=1"
    run = subprocess.run(
        [str(binary)], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    lines = run.stdout.splitlines()
    assert lines and lines[-1].startswith("1.."), run.stdout + run.stderr
    checks = lines[:-1]
    failed = [line for line in checks if not line.startswith("ok ")]
    assert failed == [], "\n".join(failed) + "\n" + run.stderr
    assert len(checks) == int(lines[-1][3:]) > 0, run.stdout
    assert run.returncode == 0, run.stderr
