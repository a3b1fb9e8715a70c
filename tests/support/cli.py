# SPDX-License-Identifier: MIT
"""Running the installed ``pysandbox`` command line in tests, and reading its usage errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.timing import slow

__all__ = [
    "SCRIPT",
    "TIMEOUT",
    "WITH_DEFAULT_SIGINT",
    "assert_usage_error",
    "cli",
]


#: The console script pip installed next to this interpreter.
SCRIPT = str(Path(sys.executable).parent / "pysandbox")


#: How long any one command here may take, far above what it needs.
TIMEOUT = slow(20)


def cli(
    *args: str,
    stdin: bytes = b"",
    env: dict[str, str] | None = None,
    entry: tuple[str, ...] = (SCRIPT,),
) -> subprocess.CompletedProcess[bytes]:
    """Run the command line with ``args``, ``stdin`` as its stdin, and capture both outputs."""
    return subprocess.run(
        [*entry, *args], input=stdin, capture_output=True, env=env, timeout=TIMEOUT, check=False
    )


def assert_usage_error(done: subprocess.CompletedProcess[bytes]) -> str:
    err = done.stderr.decode()
    assert done.returncode == 2, (done.returncode, err)
    assert "usage: pysandbox" in err and "error: " in err, err
    assert "Traceback" not in err, err
    assert done.stdout == b""
    return err


#: Starts the command line with SIGINT at its default, as a terminal's Ctrl-C finds it,
#: even when the suite runs with SIGINT ignored (started in the background by ``cmd &``).
WITH_DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)
