# SPDX-License-Identifier: MIT
"""A real pytest session in a subprocess, independent of the suite that starts it.

The plugin under test is loaded the way users get it: by its ``pytest11`` entry point
in the installed package, with no ``-p`` option.  The session runs in its own directory
with its own ini file, without the outer run's cache, xdist or ``PYTEST_*`` variables.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from support.timing import slow

#: Seconds an inner session may take before the test fails instead of hanging: its tests
#: run a few short sandboxes each (idle: a few seconds in all).
SESSION_TIMEOUT = slow(60)


def run_pytest(
    directory: Path, *args: str, env: Mapping[str, str] | None = None, xdist: bool = False
) -> subprocess.CompletedProcess[str]:
    """``python -m pytest ARGS`` in ``directory``, with ``env`` added to the environment
    and its output captured as text; pytest-xdist is off unless ``xdist`` (then ARGS
    say how many workers: ``-n 2``)."""
    clean = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    plugins = [] if xdist else ["-p", "no:xdist"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *plugins, *args],
        cwd=directory,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=SESSION_TIMEOUT,
        check=False,
    )
