"""Shared fixtures.  The suite runs the real thing: real bwrap, namespaces and limits."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

import pytest


@functools.cache
def bwrap_probe() -> str | None:
    """Why bwrap cannot build a sandbox on this host, or None when it can."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bwrap is not installed (apt-get install bubblewrap)"
    probe = subprocess.run(
        [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if probe.returncode != 0:
        return f"bwrap cannot build a sandbox here: {probe.stderr.strip()}"
    return None


@pytest.fixture(autouse=True)
def _needs_bwrap(request: pytest.FixtureRequest) -> None:
    """Skip, with bwrap's own words as the reason, when this host cannot sandbox.

    In CI (``CI`` set) a host that cannot sandbox fails the run instead: CI installs
    bubblewrap, so a skip there would hide a broken set-up.
    """
    if request.node.get_closest_marker("no_bwrap") is None and (reason := bwrap_probe()):
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(autouse=True)
def _outside_the_source_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run each test, and the interpreters it starts, in a scratch directory: from the
    repository root, ``python -c`` would import the uncompiled source package."""
    monkeypatch.chdir(tmp_path)


def children_of(pid: int) -> list[int]:
    """Pids whose parent is ``pid``, read from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found
