# SPDX-License-Identifier: MIT
"""The wheels users install (``scripts/build-wheels.sh``, found in ``$PYSANDBOX_WHEELS``)
are tagged for glibc 2.24, carry the init and link libseccomp in, and work from a venv
of their own Python on a host path with no compiler, installed offline with the wheels
of their runtime dependencies (nh3) that the script put beside them."""

from __future__ import annotations

import functools
import os
import re
import shutil
import stat
import subprocess
import zipfile
from pathlib import Path

import pytest

import pysandbox
from pysandbox import SelftestReport
from pysandbox._frontends.terminal import EXIT_SELFTEST_FAILED

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = ["3.9", "3.10", "3.11", "3.12", "3.13"]
PLATFORM = "manylinux_2_24_x86_64"
#: Where scripts/build-wheels.sh installs auditwheel.
AUDITWHEEL = ROOT / ".venv-wheel-tools" / "bin" / "auditwheel"
pytestmark = pytest.mark.slow


def _wheel(version: str) -> Path:
    folder = os.environ.get("PYSANDBOX_WHEELS")
    if not folder:
        reason = "no PYSANDBOX_WHEELS: bash scripts/build-wheels.sh DIR, then PYSANDBOX_WHEELS=DIR"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    tag = "cp" + version.replace(".", "")
    (wheel,) = Path(folder).glob(f"pysandbox-*-{tag}-{tag}-{PLATFORM}.whl")
    return wheel


def _python(version: str) -> str:
    found = subprocess.run(
        ["bash", str(ROOT / "scripts" / "find-python.sh"), version],
        capture_output=True,
        text=True,
        check=True,
    )
    return found.stdout.strip()


@pytest.mark.parametrize("version", VERSIONS)
def test_wheel_is_manylinux_with_everything_inside(version: str, tmp_path: Path) -> None:
    wheel = _wheel(version)
    shown = subprocess.run(
        [str(AUDITWHEEL), "show", str(wheel)], capture_output=True, text=True, check=True
    ).stdout
    # Only the C library: libseccomp is linked in, nothing else was grafted.
    assert "libseccomp" not in shown and "external shared libraries" not in shown, shown
    glibc = re.search(r'platform tag:\s*"manylinux_2_(\d+)_x86_64"', shown)
    assert glibc is not None and int(glibc.group(1)) <= 24, shown
    with zipfile.ZipFile(wheel) as archive:
        infos = {info.filename: info for info in archive.infolist()}
        tags = archive.read(next(n for n in infos if n.endswith(".dist-info/WHEEL"))).decode()
    tag = "cp" + version.replace(".", "")
    assert re.findall(r"^Tag: (.*)$", tags, re.M) == [f"{tag}-{tag}-{PLATFORM}"]
    init = infos["pysandbox/_init"]
    assert (init.external_attr >> 16) & stat.S_IXUSR
    assert {"pysandbox/py.typed", "pysandbox/_sandbox.pyi"} <= set(infos)
    # libseccomp's functions stay inside: only the module's init is exported.
    (module,) = (name for name in infos if name.endswith(".so"))
    library = tmp_path / "module.so"
    with zipfile.ZipFile(wheel) as archive:
        library.write_bytes(archive.read(module))
    exported = subprocess.run(
        ["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True
    ).stdout.split()[2::3]
    assert exported == ["PyInit__sandbox"]
    modules = {name for name in infos if name.endswith(".py")}
    sources = {str(p.relative_to(ROOT)) for p in (ROOT / "pysandbox").rglob("*.py")}
    assert modules == sources


def _without_a_compiler(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH has the venv and bwrap, and no compiler."""
    tools = tmp_path / "tools"
    tools.mkdir()
    bwrap = shutil.which("bwrap")
    assert bwrap is not None
    (tools / "bwrap").symlink_to(bwrap)
    path = f"{tmp_path / 'venv' / 'bin'}:{tools}"
    return {"PATH": path, "CC": "/bin/false", "HOME": str(tmp_path), "LANG": "C.UTF-8"}


@pytest.mark.parametrize("version", VERSIONS)
def test_wheel_installs_and_runs_without_a_compiler(version: str, tmp_path: Path) -> None:
    wheel = _wheel(version)
    make_venv = ROOT / "scripts" / "make-venv.sh"
    subprocess.run(["bash", str(make_venv), _python(version), str(tmp_path / "venv")], check=True)
    env = _without_a_compiler(tmp_path)
    python = str(tmp_path / "venv" / "bin" / "python")
    subprocess.run(
        [
            *(python, "-m", "pip", "install", "-q", "--no-index", "--only-binary", ":all:"),
            *("--find-links", str(wheel.parent), str(wheel)),
        ],
        env=env,
        check=True,
    )
    # A bundle with HTML imports nh3, the dependency installed beside the wheel.
    bundle = "pysandbox.Bundle({'text/html': '<b onclick=x()>2</b>'})['text/html']"
    smoke = subprocess.run(
        [
            python,
            "-c",
            "import pysandbox; print(pysandbox.eval_in_sandbox('print(1+1)').stdout)\n"
            f"print({bundle})",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert smoke.stdout == "2\n<b>2</b>\n"
    selftest = subprocess.run(
        [str(tmp_path / "venv" / "bin" / "pysandbox"), "selftest"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    # Each protection holds from the wheel exactly where it holds from the source build
    # (on CI's host, all of them; the filter is the linked-in libseccomp's).
    here = _selftest_here()
    assert selftest.returncode == (0 if here else EXIT_SELFTEST_FAILED), selftest.stdout
    assert _verdicts(selftest.stdout) == _verdicts(str(here))
    assert "[yes] seccomp filter" in selftest.stdout


@functools.cache
def _selftest_here() -> SelftestReport:
    return pysandbox.selftest()


def _verdicts(report: str) -> list[str]:
    """Each check's mark and name (``[yes] seccomp filter``), without the details."""
    return [line.split(":", 1)[0] for line in report.splitlines()]
