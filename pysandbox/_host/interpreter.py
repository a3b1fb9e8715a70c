# SPDX-License-Identifier: MIT
"""What of the host's interpreter a sandbox must show, and where: its files outside the system
directories, the symlinks on the way to them, the paths its ELF loader needs, and its
``pyvenv.cfg`` when its base moves."""

from __future__ import annotations

import functools
import os
import struct
import sys
import sysconfig
from collections.abc import Iterable

from .._model.errors import SandboxError
from .._model.record import record

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

__all__ = [
    "INTERPRETER_PATHS",
    "MOVED_ROOT",
    "SYSTEM_DIRS",
    "InterpreterView",
    "is_within",
    "loader_paths",
    "movable",
    "moved_venv_config",
    "overlaps",
    "python_mounts",
    "resolve_links",
    "shown_at",
    "shown_link",
]


#: Top-level system directories the sandbox may see read-only, when the host has them.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


#: Where the sandbox shows the interpreter's files that lie in a directory it must keep
#: for itself (eval_in_sandbox's ``CODE_DIR``, when a venv lives in a user's home): at
#: their host path below this directory, ``/home/ann/app/.venv`` as
#: ``/.pysandbox/home/ann/app/.venv``.
MOVED_ROOT = "/.pysandbox"


def is_within(path: str, root: str) -> bool:
    """Whether normalised absolute ``path`` is ``root`` or lies inside it."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def overlaps(path: str, root: str) -> bool:
    """Whether ``path`` is ``root``, lies inside it, or contains it."""
    return is_within(path, root) or is_within(root, path)


def _outermost(paths: Iterable[str]) -> list[str]:
    """Drop every path that lies inside another of ``paths``; keep order of first sight."""
    unique = list(dict.fromkeys(os.path.normpath(p) for p in paths))
    return [p for p in unique if not any(q != p and is_within(p, q) for q in unique)]


#: sysconfig's paths that the interpreter reads at start-up or import time.  Not
#: ``data`` (the prefix itself), ``scripts`` (every console script of the environment),
#: ``include`` or ``platinclude``.
INTERPRETER_PATHS = ("stdlib", "platstdlib", "purelib", "platlib")


#: The kernel's limit on symlinks followed while resolving one path.
_MAX_LINKS = 40


@record
class InterpreterView:
    """What the sandbox shows of the interpreter outside the system directories.

    ``binds`` are real paths (no symlink in them), each bound read-only at its own path;
    ``links`` are the symlinks met on the way to them, as ``(path, target)``, recreated
    inside as the same symlinks so that every host path the interpreter was reached by
    resolves the same way inside.
    """

    binds: tuple[str, ...]
    links: tuple[tuple[str, str], ...]


def resolve_links(path: str) -> tuple[str, list[tuple[str, str]]]:
    """``os.path.realpath(path)`` that also returns every symlink it followed.

    Each link is ``(where, target)``: ``where`` has no symlink in its directory part and
    ``target`` is the link's text, unchanged (relative targets stay relative).  A missing
    component ends nothing: the rest is appended as it is, as ``realpath`` does.
    :raises SandboxError: a chain of more than 40 links (a loop).
    """
    pending = path.split("/")
    pending.reverse()
    resolved = "/"
    links: list[tuple[str, str]] = []
    while pending:
        name = pending.pop()
        if name in ("", "."):
            continue
        if name == "..":
            resolved = os.path.dirname(resolved)
            continue
        candidate = os.path.join(resolved, name)
        try:
            target = os.readlink(candidate)
        except OSError:
            resolved = candidate
            continue
        if len(links) == _MAX_LINKS:
            raise SandboxError(f"too many levels of symbolic links in {path}")
        links.append((candidate, target))
        if target.startswith("/"):
            resolved = "/"
        pending.extend(reversed(target.split("/")))
    return resolved, links


def _libpython_dirs() -> list[str]:
    """Directories of the libpython this process has mapped (a shared build).

    What ``ldd`` would say, read from the live interpreter: builds whose ``LIBDIR`` is
    where they were built, not where they are (relocatable distributions), still find
    their library inside.
    """
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="surrogateescape") as maps:
            mapped = {line.split(maxsplit=5)[-1].rstrip("\n") for line in maps}
    except OSError:
        return []
    return sorted(os.path.dirname(p) for p in mapped if os.path.basename(p).startswith("libpython"))


def _interpreter_paths(executable: str) -> list[str]:
    """Host paths the interpreter needs, symlinks unresolved: the executable, the stdlib
    and site-packages of the environment and of its base installation, the directories
    of libpython, and a virtual environment's ``pyvenv.cfg``."""
    base = {
        "base": sys.base_prefix,
        "platbase": sys.base_exec_prefix,
        "installed_base": sys.base_prefix,
        "installed_platbase": sys.base_exec_prefix,
    }
    paths = [executable]
    for scheme_vars in (None, base):
        found = sysconfig.get_paths(vars=scheme_vars)
        paths += [found[key] for key in INTERPRETER_PATHS]
    libdir = sysconfig.get_config_var("LIBDIR")
    if isinstance(libdir, str) and libdir:
        paths.append(libdir)
    paths += _libpython_dirs()
    # CPython looks for pyvenv.cfg next to the executable it was started as (symlinks
    # unresolved), then one directory up.
    here = os.path.dirname(executable)
    paths += [os.path.join(here, "pyvenv.cfg"), os.path.join(os.path.dirname(here), "pyvenv.cfg")]
    return paths


def python_mounts(executable: str) -> InterpreterView:
    """What of the interpreter the sandbox sees, beyond the system directories.

    Only what the interpreter reads: its executable file (reached through the same chain
    of symlinks as on the host), the standard library and site-packages of the
    environment and of its base installation, the directory of libpython (``LIBDIR``,
    which for a conda environment also holds the libraries its extension modules link
    to), and a virtual environment's ``pyvenv.cfg``; never a prefix itself, so files
    next to a virtual environment made at an application's root stay on the host.
    Paths under the system directories (bound anyway) and missing paths are left out.
    """
    executable = os.path.abspath(executable)
    prefixes = {
        os.path.realpath(p)
        for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix)
    }
    binds: list[str] = []
    links: dict[tuple[str, str], None] = {}
    for path in _interpreter_paths(executable):
        if not os.path.lexists(path):
            continue
        real, met = resolve_links(path)
        links.update(dict.fromkeys(met))
        # Never a prefix or what holds one: the files next to a venv stay on the host.
        covers_prefix = any(is_within(prefix, real) for prefix in prefixes)
        if os.path.exists(real) and not covers_prefix and not _in_system_dirs(real):
            binds.append(real)
    outer = _outermost(binds)
    return InterpreterView(
        binds=tuple(outer),
        links=tuple(
            (where, target)
            for where, target in links
            if not _in_system_dirs(where) and not any(is_within(where, b) for b in outer)
        ),
    )


def _in_system_dirs(path: str) -> bool:
    return path == "/" or any(is_within(path, d) for d in SYSTEM_DIRS)


def shown_at(path: str, moved: str | None) -> str:
    """Where the sandbox shows the host's ``path`` of the interpreter: at the same path,
    or below ``MOVED_ROOT`` when it lies within ``moved``."""
    if moved is not None and is_within(path, moved):
        return MOVED_ROOT + path
    return path


def shown_link(where: str, target: str, moved: str | None) -> tuple[str, str]:
    """A symlink of the interpreter's view as the sandbox shows it, ``(where, target)``:
    moved with the files within ``moved``, and leading to what it leads to on the host.
    An absolute target is moved like any path; a relative one stays relative while it
    leads from a moved place to a moved one, or from one in place to one in place, and
    becomes the absolute path it reaches otherwise."""
    if target.startswith("/"):
        return shown_at(where, moved), shown_at(target, moved)
    reached = os.path.normpath(os.path.join(os.path.dirname(where), target))
    if shown_at(where, moved) == where and shown_at(reached, moved) == reached:
        return where, target
    if shown_at(where, moved) != where and shown_at(reached, moved) != reached:
        return shown_at(where, moved), target
    return shown_at(where, moved), shown_at(reached, moved)


def loader_paths(executable: str) -> list[str]:
    """The absolute paths the dynamic loader takes from ``executable`` before any of it
    runs: its ELF interpreter (``PT_INTERP``) and its library search paths
    (``DT_RPATH``, ``DT_RUNPATH``; those relative to ``$ORIGIN`` left out).  Empty for a
    file that is not a dynamically linked ELF file, or cannot be read."""
    try:
        with open(executable, "rb") as elf:
            return _read_loader_paths(elf)
    except (OSError, ValueError, struct.error):
        return []


def _read_loader_paths(elf: BinaryIO) -> list[str]:
    """``loader_paths`` of the open file ``elf``, 32- or 64-bit, either byte order."""
    ident = elf.read(16)
    if ident[:4] != b"\x7fELF" or ident[4] not in (1, 2) or ident[5] not in (1, 2):
        return []
    wide, order = ident[4] == 2, "<" if ident[5] == 1 else ">"
    header = order + ("HHIQQQIHHHHHH" if wide else "HHIIIIIHHHHHH")
    fields = struct.unpack(header, elf.read(struct.calcsize(header)))
    table, entry_size, count = fields[4], fields[8], fields[9]
    program_header = order + ("IIQQQQQQ" if wide else "IIIIIIII")
    if entry_size < struct.calcsize(program_header):
        return []
    # (type, file offset, virtual address, size in the file) of each segment.
    segments = []
    for index in range(count):
        elf.seek(table + index * entry_size)
        raw = struct.unpack(program_header, elf.read(struct.calcsize(program_header)))
        segments.append((raw[0], raw[2], raw[3], raw[5]) if wide else raw[:3] + raw[4:5])
    paths = []
    for kind, offset, _, size in segments:
        if kind == _PT_INTERP:
            elf.seek(offset)
            paths.append(os.fsdecode(elf.read(min(size, 4096)).split(b"\0")[0]))
    dynamic = [(offset, size) for kind, offset, _, size in segments if kind == _PT_DYNAMIC]
    if not dynamic:
        return paths
    entry = order + ("qQ" if wide else "iI")
    elf.seek(dynamic[0][0])
    data = elf.read(min(dynamic[0][1], 2**20))
    strtab, search = None, []
    for start in range(0, len(data) - struct.calcsize(entry) + 1, struct.calcsize(entry)):
        tag, value = struct.unpack_from(entry, data, start)
        if tag == _DT_NULL:
            break
        if tag == _DT_STRTAB:
            strtab = value
        elif tag in (_DT_RPATH, _DT_RUNPATH):
            search.append(value)
    # The string table is named by its address in memory: find it in the file.
    where = [
        offset + strtab - address
        for kind, offset, address, size in segments
        if strtab is not None and kind == _PT_LOAD and address <= strtab < address + size
    ]
    for name in search if where else []:
        elf.seek(where[0] + name)
        text = os.fsdecode(elf.read(4096).split(b"\0")[0])
        paths += [path for path in text.split(":") if path.startswith("/")]
    return paths


@functools.lru_cache(maxsize=16)
def movable(executable: str, moved: str) -> bool:
    """Whether the interpreter ``executable`` still starts when what of it lies within
    ``moved`` is shown below ``MOVED_ROOT``: not when its real file names its ELF
    interpreter or a library directory by an absolute path there (Homebrew on Linux,
    a shared build linked with an absolute rpath), which the kernel and the loader
    would look for at the host's path."""
    real = os.path.realpath(executable)
    return not any(is_within(os.path.normpath(p), moved) for p in loader_paths(real))


@functools.lru_cache(maxsize=16)
def moved_venv_config(executable: str, moved: str) -> tuple[str, bytes] | None:
    """The ``pyvenv.cfg`` that ``executable`` reads, as it must read it in the sandbox
    when its ``home`` (the base interpreter's directory) lies within ``moved``: the path
    inside where it is shown and its text with ``home`` moved.  None when the
    interpreter reads none, or its ``home`` is shown in place.

    CPython reads the first ``pyvenv.cfg`` it finds next to the executable it was
    started as, or one directory up, and looks for its base installation from ``home``:
    a ``home`` that the sandbox does not show would leave it without a standard library.
    """
    here = os.path.dirname(os.path.abspath(executable))
    for candidate in (
        os.path.join(here, "pyvenv.cfg"),
        os.path.join(os.path.dirname(here), "pyvenv.cfg"),
    ):
        try:
            with open(candidate, "rb") as config:
                lines = config.read().splitlines(keepends=True)
        except OSError:
            continue
        changed = False
        for number, line in enumerate(lines):
            key, equals, value = line.partition(b"=")
            home = os.fsdecode(value.strip())
            if equals and key.strip().lower() == b"home" and shown_at(home, moved) != home:
                lines[number] = b"home = " + os.fsencode(shown_at(home, moved)) + b"\n"
                changed = True
        if not changed:
            return None
        return shown_at(os.path.realpath(candidate), moved), b"".join(lines)
    return None


#: ELF program header and dynamic entry types that ``loader_paths`` reads.
_PT_LOAD, _PT_DYNAMIC, _PT_INTERP = 1, 2, 3


_DT_NULL, _DT_STRTAB, _DT_RPATH, _DT_RUNPATH = 0, 5, 15, 29
