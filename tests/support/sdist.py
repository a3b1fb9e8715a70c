# SPDX-License-Identifier: MIT
"""The checkout's sdist, built once per test process: building one takes seconds, and
more than one test reads it."""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

#: The checkout: the folder above ``tests``.
ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def built_sdist() -> Path:
    """The path of ``python -m build --sdist`` of the checkout, in a private folder
    removed when the process exits; a failed build raises ``CalledProcessError``."""
    out = Path(tempfile.mkdtemp(prefix="pysandbox-sdist-"))
    atexit.register(shutil.rmtree, out, True)
    subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (sdist,) = out.glob("pysandbox-*.tar.gz")
    return sdist


def sdist_names() -> set[str]:
    """The paths in the sdist, relative to its top folder."""
    with tarfile.open(built_sdist()) as tar:
        return {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
