# SPDX-License-Identifier: MIT
"""Shared fixtures.  The suite runs the real thing: real bwrap, namespaces and limits."""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.callers import (
    Caller,
    CopyCaller,
    DriverCaller,
    InProcessCaller,
    Installation,
    SessionCaller,
    processes_of,
    reserved_uids,
)
from support.timing import slow

import pysandbox


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


def _system_python_like_ours() -> str | None:
    """A Python of our version and ABI that an unprivileged user can run."""
    candidate = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    if not os.access(candidate, os.X_OK):
        return None
    abi = subprocess.run(
        [candidate, "-c", "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return candidate if abi == sysconfig.get_config_var("EXT_SUFFIX") else None


@contextlib.contextmanager
def _world_readable_copy() -> Iterator[Path]:
    """A copy of the installed pysandbox that any user can import, in a fresh directory."""
    shared = Path(tempfile.mkdtemp(prefix="pysandbox-nonroot-"))
    try:
        shared.chmod(0o755)
        shutil.copytree(Path(pysandbox.__file__).parent, shared / "pysandbox")
        for path in shared.rglob("*"):
            path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
        yield shared
    finally:
        shutil.rmtree(shared)


def _skip_unless_a_non_root_caller_can_be_made() -> str:
    """The system interpreter a non-root caller runs; skips, saying why, when there is none."""
    if os.geteuid() != 0:
        pytest.skip("the test drops from root to make a non-root caller")
    if "libasan" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("a sanitizer build loads only with its runtimes preloaded (sanitize.sh)")
    python = _system_python_like_ours()
    if python is None:
        pytest.skip(
            f"no system Python {sys.version_info.major}.{sys.version_info.minor} with this "
            "ABI for an unprivileged caller (the venv's interpreter may be unreadable to it)"
        )
    return python


@pytest.fixture
def unprivileged_pysandbox() -> Iterator[tuple[str, Path]]:
    """A system interpreter and a world-readable copy of pysandbox for a non-root caller."""
    python = _skip_unless_a_non_root_caller_can_be_made()
    with _world_readable_copy() as shared:
        yield python, shared


@pytest.fixture(scope="session")
def _nonroot_installation() -> Iterator[Installation]:
    """One world-readable copy of pysandbox per test process, for every non-root caller."""
    python = _skip_unless_a_non_root_caller_can_be_made()
    with _world_readable_copy() as shared:
        yield Installation(python, shared)


@pytest.fixture(scope="session")
def _nonroot_uids() -> Iterator[range]:
    """The uids this test process gives its non-root callers, for the whole session."""
    with reserved_uids() as uids:
        yield uids


@pytest.fixture
def world_readable_dir() -> Iterator[Path]:
    """A fresh directory that every uid may enter (``tmp_path`` is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="pysandbox-shared-")).resolve()
    try:
        path.chmod(0o755)
        yield path
    finally:
        shutil.rmtree(path)


@pytest.fixture(params=["root", "nonroot"])
def caller(request: pytest.FixtureRequest) -> Iterator[Caller]:
    """The caller of the API, once as root and once not (``tests/callers.py``); a test
    marked ``THROUGH_EVERY_PATH`` also runs its ``run_python`` calls as calls of a session
    (``SessionCaller``) and in a copy of a template, as root (``CopyCaller``) and not.

    A non-root caller made by this fixture gets uids no other process has; when the test
    ends, any process of those uids still alive a few seconds later escaped the call:
    it is killed, and the test errors.
    """
    if request.param == "session":
        yield SessionCaller()
        return
    if request.param == "copy":
        if os.geteuid() != 0:
            pytest.skip("the test process is not root, so there is no root caller")
        yield CopyCaller()
        return
    if request.param == "root":
        if os.geteuid() != 0:
            pytest.skip("the test process is not root, so there is no root caller")
        yield InProcessCaller()
        return
    if os.geteuid() != 0:
        # The test process is a non-root caller itself.
        yield CopyCaller() if request.param == "copy-nonroot" else InProcessCaller()
        return
    uids: range = request.getfixturevalue("_nonroot_uids")
    left = processes_of(uids)
    assert left == [], f"processes of the non-root callers' uids before the test: {left}"
    installation = request.getfixturevalue("_nonroot_installation")
    yield DriverCaller(installation, uids[0], uids[1], copies=request.param == "copy-nonroot")
    deadline = time.monotonic() + slow(1.0)
    while (left := processes_of(uids)) and time.monotonic() < deadline:
        time.sleep(0.02)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert left == [], f"processes of the non-root caller outlived the test: {left}"


#: The API calls whose tests a module with ``WARM_THROUGH = True`` runs twice: as they
#: are, and through a warm Runner (``tests/warm.py``), which must be indistinguishable.
_WARMABLE = ("eval_in_sandbox", "run_python")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each test of a ``WARM_THROUGH`` module that calls a warmable API in a fresh
    sandbox and in a warm one (the ``through`` parameter)."""
    if not getattr(metafunc.module, "WARM_THROUGH", False):
        return
    source = inspect.getsource(metafunc.function)
    if any(f"{name}(" in source for name in _WARMABLE):
        metafunc.fixturenames.append("through")
        metafunc.parametrize("through", ["fresh", "warm"], indirect=True)


@pytest.fixture
def through(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """``"fresh"``, or ``"warm"``: the module's warmable API names then run each call
    through a warm Runner."""
    if request.param == "warm":
        import warm

        for name in _WARMABLE:
            if hasattr(request.module, name):
                monkeypatch.setattr(request.module, name, getattr(warm, name))
    return str(request.param)


@pytest.fixture
def runners() -> Iterator[list[pysandbox.Runner]]:
    """Runners a test makes; closed at the end whatever happened, so no sandbox or
    session stays."""
    made: list[pysandbox.Runner] = []
    yield made
    for runner in made:
        runner.close()
