# SPDX-License-Identifier: MIT
"""Building from the sdist: a missing header names the package to install, and what an
old ``build/`` holds never reaches the wheel."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from support.sdist import built_sdist

pytestmark = [pytest.mark.slow, pytest.mark.no_bwrap]


def _unpacked(tmp_path: Path) -> Path:
    # The data filter where this Python has it (3.12+ warn without one).
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    with tarfile.open(built_sdist()) as tar:
        tar.extractall(tmp_path / "sdist", **safe)
    (tree,) = (tmp_path / "sdist").iterdir()
    return tree


def _build(tree: Path, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(out), str(tree)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )


def _cc_hiding_python_h(tmp_path: Path) -> dict[str, str]:
    """A cc that drops the interpreter's include directories, as on a host without
    the Python headers."""
    wrapper = tmp_path / "cc-without-python-h"
    include = sysconfig.get_paths()["include"]
    wrapper.write_text(
        "#!/bin/sh\n"
        'for arg; do shift; [ "$arg" = "-I' + include + '" ] || set -- "$@" "$arg"; done\n'
        'exec cc "$@"\n'
    )
    wrapper.chmod(0o755)
    return {"CC": str(wrapper), "LDSHARED": "cc -shared"}


def _includes_without_seccomp_h(tmp_path: Path) -> dict[str, str]:
    """The system's include directories, through a folder of links to each of their
    entries but libseccomp's headers, as on a host without libseccomp-dev."""
    farm = tmp_path / "include"
    farm.mkdir()
    for entry in Path("/usr/include").iterdir():
        if not entry.name.startswith("seccomp"):
            (farm / entry.name).symlink_to(entry)
    gcc = subprocess.run(
        ["cc", "-print-file-name=include"], capture_output=True, text=True, check=True
    ).stdout.strip()
    multiarch = subprocess.run(
        ["cc", "-print-multiarch"], capture_output=True, text=True, check=True
    ).stdout.strip()
    flags = f"-nostdinc -isystem {gcc} -isystem {farm / multiarch} -isystem {farm}"
    return {"CFLAGS": flags}


@pytest.mark.parametrize(
    ("header", "hide", "package"),
    [
        ("Python.h", _cc_hiding_python_h, "python3-dev"),
        ("seccomp.h", _includes_without_seccomp_h, "libseccomp-dev"),
    ],
)
def test_a_missing_header_names_the_package(
    tmp_path: Path, header: str, hide: Callable[[Path], dict[str, str]], package: str
) -> None:
    built = _build(_unpacked(tmp_path), tmp_path / "wheels", hide(tmp_path))
    assert built.returncode != 0
    assert f"{header} was not found; install {package}" in built.stdout + built.stderr


def test_an_old_build_folder_is_not_reused(tmp_path: Path) -> None:
    """A module deleted from the sources and an extension newer than its sources, both
    left in ``build/lib*`` by an earlier build, stay out of the wheel."""
    tree = _unpacked(tmp_path)
    plat = f"{sysconfig.get_platform()}-{sys.implementation.cache_tag}"
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for lib in ("lib", f"lib.{plat}"):
        stale = tree / "build" / lib / "pysandbox"
        stale.mkdir(parents=True)
        (stale / "_launch.py").write_text("raise ImportError('stale')\n")
        (stale / f"_sandbox{suffix}").write_text("not an ELF file\n")
    built = _build(tree, tmp_path / "wheels", {})
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "wheels").glob("pysandbox-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert "pysandbox/_launch.py" not in archive.namelist()
        assert archive.read(f"pysandbox/_sandbox{suffix}")[:4] == b"\x7fELF"
