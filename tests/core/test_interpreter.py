# SPDX-License-Identifier: MIT
"""The sandbox runs the caller's own interpreter, wherever it lives (issue: any Python)."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import pysandbox
from pysandbox import eval_in_sandbox
from pysandbox._host.interpreter import (
    SYSTEM_DIRS,
    InterpreterView,
    loader_paths,
    movable,
    moved_venv_config,
    python_mounts,
    resolve_links,
)
from pysandbox._launch.bwrap import filesystem_options
from pysandbox._model.errors import SandboxError


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


# --------------------------------------------------------------------------- moved from /home


def synthetic_elf(wide: bool, order: str, interpreter: bytes, search: bytes) -> bytes:
    """A minimal ELF file: one loadable segment holding everything, an interpreter, and a
    dynamic section with a string table and a ``DT_RUNPATH``."""
    header = order + ("HHIQQQIHHHHHH" if wide else "HHIIIIIHHHHHH")
    segment = order + ("IIQQQQQQ" if wide else "IIIIIIII")
    entry = order + ("qQ" if wide else "iI")
    headers = 16 + struct.calcsize(header) + 3 * struct.calcsize(segment)
    interp_at = headers
    strtab_at = interp_at + len(interpreter) + 1
    strtab = b"\0" + search + b"\0"
    dynamic_at = strtab_at + len(strtab)
    base = 0x400000
    dynamic = b"".join(
        struct.pack(entry, tag, value)
        for tag, value in ((5, base + strtab_at), (29, 1), (0, 0))  # STRTAB, RUNPATH, NULL
    )
    size = dynamic_at + len(dynamic)

    def program_header(kind: int, offset: int, length: int) -> bytes:
        if wide:
            return struct.pack(segment, kind, 4, offset, base + offset, 0, length, length, 1)
        return struct.pack(segment, kind, offset, base + offset, 0, length, length, 4, 1)

    ident = b"\x7fELF" + bytes([2 if wide else 1, 1 if order == "<" else 2, 1]) + bytes(9)
    fields = (2, 62, 1, 0, 16 + struct.calcsize(header), 0, 0, 16 + struct.calcsize(header))
    fields += (struct.calcsize(segment), 3, 0, 0, 0)
    return (
        ident
        + struct.pack(header, *fields)
        + program_header(1, 0, size)  # PT_LOAD
        + program_header(3, interp_at, len(interpreter) + 1)  # PT_INTERP
        + program_header(2, dynamic_at, len(dynamic))  # PT_DYNAMIC
        + interpreter
        + b"\0"
        + strtab
        + dynamic
    )


@pytest.mark.no_bwrap
@pytest.mark.parametrize("wide", [True, False], ids=["64-bit", "32-bit"])
@pytest.mark.parametrize("order", ["<", ">"], ids=["little-endian", "big-endian"])
def test_loader_paths_of_any_elf_class_and_byte_order(
    wide: bool, order: str, tmp_path: Path
) -> None:
    """The interpreter and the absolute library directories, not those of ``$ORIGIN``."""
    elf = tmp_path / "program"
    elf.write_bytes(
        synthetic_elf(wide, order, b"/home/brew/lib/ld.so", b"$ORIGIN/../lib:/home/brew/lib")
    )
    assert loader_paths(str(elf)) == ["/home/brew/lib/ld.so", "/home/brew/lib"]
    assert movable(str(elf), "/home") is False
    assert movable(str(elf), "/opt") is True


@pytest.mark.no_bwrap
@pytest.mark.parametrize("tags", ["--enable-new-dtags", "--disable-new-dtags"])
def test_loader_paths_of_a_compiled_program(tags: str, tmp_path: Path) -> None:
    """What the linker wrote, as RUNPATH or as RPATH: an interpreter there could not
    start below /.pysandbox, so eval_in_sandbox would show it in place."""
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler (cc) on this machine")
    (tmp_path / "main.c").write_text("int main(void) { return 0; }\n")
    program = tmp_path / "main"
    subprocess.run(
        [
            cc,
            "-o",
            str(program),
            str(tmp_path / "main.c"),
            f"-Wl,{tags}",
            "-Wl,-rpath,/home/u/py/lib:$ORIGIN/lib",
            "-Wl,--dynamic-linker=/lib64/ld-linux-x86-64.so.2",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    assert loader_paths(str(program)) == ["/lib64/ld-linux-x86-64.so.2", "/home/u/py/lib"]
    assert movable(str(program), "/home") is False
    assert loader_paths("/proc/self/status") == []


@pytest.mark.no_bwrap
def test_a_moved_venv_reads_where_its_base_is_shown(tmp_path: Path) -> None:
    """Only ``home`` changes, and only when it lies in the moved directory."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    (venv / "pyvenv.cfg").write_text(
        "home = /home/ann/.pyenv/versions/3.11.9/bin\nversion = 3.11.9\n"
    )
    assert moved_venv_config(str(venv / "bin" / "python"), "/home") == (
        str(venv / "pyvenv.cfg"),
        b"home = /.pysandbox/home/ann/.pyenv/versions/3.11.9/bin\nversion = 3.11.9\n",
    )
    (venv / "bin" / "pyvenv.cfg").write_text("home = /usr/bin\n")  # read first, not moved
    assert moved_venv_config(str(venv / "bin" / "python3"), "/home") is None


@pytest.mark.no_bwrap
def test_moved_links_lead_where_they_lead_on_the_host() -> None:
    """A link moved with its target stays relative; one that leaves or enters the moved
    directory becomes the absolute path it reaches; an absolute one into it is moved."""
    view = InterpreterView(
        binds=("/home/u/venv/lib",),
        links=(
            ("/home/u/venv/bin/python", "python3"),
            ("/home/u/venv/bin/python3", "/home/u/base/bin/python3"),
            ("/home/u/base", "../../opt/base"),
            ("/opt/python", "../home/u/venv/bin/python"),
            ("/opt/other", "/usr/bin/python3"),
        ),
    )
    options = filesystem_options(view, "/home")
    symlinks = {options[i + 2]: options[i + 1] for i, o in enumerate(options) if o == "--symlink"}
    expected = {
        "/.pysandbox/home/u/venv/bin/python": "python3",
        "/.pysandbox/home/u/venv/bin/python3": "/.pysandbox/home/u/base/bin/python3",
        "/.pysandbox/home/u/base": "/opt/base",
        "/opt/python": "/.pysandbox/home/u/venv/bin/python",
        "/opt/other": "/usr/bin/python3",
    }
    assert {where: symlinks.get(where) for where in expected} == expected
    binds = [tuple(options[i + 1 : i + 3]) for i, o in enumerate(options) if o == "--ro-bind"]
    assert ("/home/u/venv/lib", "/.pysandbox/home/u/venv/lib") in binds
    inside = [*symlinks, *(target for _, target in binds)]
    assert [path for path in inside if path.startswith("/home/")] == []
