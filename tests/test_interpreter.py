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
from pysandbox._bwrap import python_mounts


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
def test_mounts_cover_venv_and_installation_without_system_dirs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "base_prefix", "/opt/py/3.12")
    monkeypatch.setattr(sys, "base_exec_prefix", "/opt/py/3.12")
    monkeypatch.setattr(sys, "prefix", "/srv/app/.venv")
    monkeypatch.setattr(sys, "exec_prefix", "/srv/app/.venv")
    assert python_mounts("/srv/app/.venv/bin/python") == ["/opt/py/3.12", "/srv/app/.venv"]
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    monkeypatch.setattr(sys, "base_exec_prefix", "/usr")
    monkeypatch.setattr(sys, "prefix", "/usr")
    monkeypatch.setattr(sys, "exec_prefix", "/usr")
    assert python_mounts("/usr/bin/python3") == []
