"""The sandbox runs the caller's own interpreter, wherever it lives (issue: any Python)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import pysandbox
from pysandbox import eval_in_sandbox
from pysandbox._bwrap import SYSTEM_DIRS, python_mounts, resolve_links
from pysandbox._errors import SandboxError


def test_same_interpreter_and_version_inside() -> None:
    # repr: before 3.10, sys.version holds a newline.
    code = "import sys; print(repr(sys.version)); print(sys.base_prefix)"
    version, base_prefix = eval_in_sandbox(code).stdout.splitlines()
    assert version == repr(sys.version)
    assert base_prefix == sys.base_prefix


def test_interpreter_install_is_read_only_inside() -> None:
    code = f"""
import os
try:
    open(os.path.join({sys.base_prefix!r}, "planted-by-sandbox"), "w")
except OSError as exc:
    print(exc.errno)
"""
    assert eval_in_sandbox(code).stdout == "30"
    assert not os.path.exists(os.path.join(sys.base_prefix, "planted-by-sandbox"))


def test_interpreter_reached_through_a_virtualenv(tmp_path: Path) -> None:
    """A venv's python runs as itself inside: its prefix and its own packages."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    purelib = sysconfig.get_path("purelib", vars={"base": venv, "platbase": venv})
    Path(purelib, "only_in_this_venv.py").write_text("MARK = 'venv-package'\n")
    package_root = Path(pysandbox.__file__).resolve().parent.parent
    driver = (
        f"import sys; sys.path.insert(0, {str(package_root)!r})\n"
        "from pysandbox import eval_in_sandbox\n"
        "code = 'import sys, only_in_this_venv; print(sys.prefix, only_in_this_venv.MARK)'\n"
        "print(eval_in_sandbox(code))\n"
    )
    out = subprocess.run(
        [venv / "bin" / "python", "-c", driver],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert f"stdout='{venv} venv-package'" in out, out
    assert "returncode=0" in out


@pytest.mark.no_bwrap
def test_resolve_links_reports_every_link_it_follows(tmp_path: Path) -> None:
    """Relative and absolute links, a directory link in the middle, ``..`` after a link."""
    real = tmp_path / "real"
    (real / "bin").mkdir(parents=True)
    (real / "bin" / "python3.11").write_text("")
    (real / "bin" / "python3").symlink_to("python3.11")
    (tmp_path / "alias").symlink_to(real)
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to(tmp_path / "alias" / "bin" / "python3")
    resolved, links = resolve_links(str(tmp_path / "a"))
    assert resolved == os.path.realpath(tmp_path / "a") == str(real / "bin" / "python3.11")
    assert links == [
        (str(tmp_path / "a"), "b"),
        (str(tmp_path / "b"), str(tmp_path / "alias" / "bin" / "python3")),
        (str(tmp_path / "alias"), str(real)),
        (str(real / "bin" / "python3"), "python3.11"),
    ]
    assert resolve_links(str(tmp_path / "alias" / ".." / "a"))[0] == resolved
    assert resolve_links(str(tmp_path / "missing" / "x")) == (str(tmp_path / "missing/x"), [])


@pytest.mark.no_bwrap
def test_resolve_links_refuses_a_loop(tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(SandboxError, match="too many levels of symbolic links"):
        resolve_links(str(tmp_path / "loop"))


@pytest.mark.no_bwrap
def test_view_binds_no_prefix_and_every_path_resolves() -> None:
    """For this interpreter: no prefix is bound whole, every bind is a real path, and the
    executable's links and its real file make a complete chain.  The real file is bound,
    or lies in a system directory, which the sandbox shows anyway (a distribution's
    ``/usr/bin/python3.11`` behind a venv)."""
    view = python_mounts(sys.executable)
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)}
    for path in view.binds:
        assert os.path.realpath(path) == path
        assert not any(path == p or p.startswith(path + "/") for p in prefixes), path
    visible = [*view.binds, *(where for where, _ in view.links), *SYSTEM_DIRS]
    real = os.path.realpath(sys.executable)
    assert any(real == v or real.startswith(v + "/") for v in [*view.binds, *SYSTEM_DIRS]), real
    _, chain = resolve_links(sys.executable)
    for where, target in chain:
        assert (where, target) in view.links or any(where.startswith(v + "/") for v in visible), (
            where
        )


def test_interpreter_whose_libdir_is_stale_still_starts() -> None:
    """A relocatable build (python-build-standalone, as uv installs) says ``LIBDIR`` is
    where it was built: libpython is found from what this process has mapped."""
    package_root = Path(pysandbox.__file__).resolve().parent.parent
    driver = (
        f"import sys, sysconfig; sys.path.insert(0, {str(package_root)!r})\n"
        "sysconfig.get_config_vars()['LIBDIR'] = '/install/lib'\n"
        "from pysandbox import eval_in_sandbox\n"
        "print(eval_in_sandbox('import sys; print(sys.version)'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", driver], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert "returncode=0" in out, out
    assert sys.version.splitlines()[0] in out
