# SPDX-License-Identifier: MIT
"""``mypy --strict`` on one file of tests/repo against the installed package: run from a
scratch directory, without ``MYPYPATH`` or ``PYTHONPATH``, so the source tree is never
what gets checked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def mypy_strict(path: Path, scratch: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """mypy's run on ``path`` with ``options``, its cache and working directory in
    ``scratch``; never raises for what mypy reports."""
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    mypy = [sys.executable, "-m", "mypy", *options, "--strict", "--no-error-summary"]
    return subprocess.run(
        [*mypy, "--cache-dir", str(scratch / "cache"), str(path)],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
