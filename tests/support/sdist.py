# SPDX-License-Identifier: MIT
"""The checkout's sdist, and the wheel built from it, each built once per test process:
building one takes seconds (the wheel compiles the C core), and more than one test
reads them."""

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


@functools.cache
def built_wheel() -> Path:
    """The path of the wheel ``pip wheel`` builds from ``built_sdist()`` (as an installer
    from PyPI would), in a private folder removed when the process exits."""
    out = Path(tempfile.mkdtemp(prefix="pysandbox-wheel-"))
    atexit.register(shutil.rmtree, out, True)
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out)]
    subprocess.run(
        [*pip_wheel, str(built_sdist())],
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("pysandbox-*.whl")
    return wheel


def sdist_names() -> set[str]:
    """The paths in the sdist, relative to its top folder."""
    with tarfile.open(built_sdist()) as tar:
        return {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
