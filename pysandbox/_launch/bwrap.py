"""Pure functions that find bubblewrap and the interpreter and build the bwrap command line.

Nothing here spawns a process; everything is unit-testable.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import secrets
import shutil
import struct
import sys
import sysconfig
from collections.abc import Iterable, Sequence
from typing import BinaryIO

from .. import _sandbox
from .._cgroups.mounts import unescape
from .._model.errors import SandboxError

__all__ = [
    "CODE_DIR",
    "CODE_PATH",
    "INIT_PATH",
    "KERNEL_DIRS",
    "MAIN_NAME",
    "MAIN_PATH",
    "MOVED_ROOT",
    "SANDBOX_PATH",
    "SECCOMP_FD",
    "WORKDIR",
    "Identity",
    "InterpreterView",
    "base_options",
    "eval_options",
    "filesystem_options",
    "find_bwrap",
    "find_init",
    "find_python",
    "init_mount",
    "init_prefix",
    "is_within",
    "kernel_mount_points",
    "loader_paths",
    "movable",
    "moved_venv_config",
    "namespace_options",
    "overlaps",
    "parent_dirs",
    "python_mounts",
    "resolve_links",
    "run_options",
    "sandbox_identity",
    "seccomp_program",
    "shown_at",
    "system_mounts",
]

#: The syscall filter is always the first fd passed to bwrap (``_launch.FdLayout``).
SECCOMP_FD = 3
#: Where eval_in_sandbox's code lives (read-only), as in the reference implementation.
CODE_DIR = "/home"
CODE_PATH = "/home/code.py"
#: Writable by mode on a read-only mount: a write attempt fails with EROFS, as in the
#: reference, rather than with EACCES for the unprivileged code.
CODE_MODE = 0o666
#: run's working directory: a writable tmpfs of ``Limits.disk`` bytes.
WORKDIR = "/sandbox"
#: Where ``run_python`` puts the code, read-only, inside ``WORKDIR``.
MAIN_NAME = "main.py"
MAIN_PATH = f"{WORKDIR}/{MAIN_NAME}"
MAIN_MODE = 0o444
#: The PATH run's programs see, and where a bare ``argv[0]`` is looked up.
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"

#: Top-level system directories the sandbox may see read-only, when the host has them.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Where pysandbox's init executable is, inside the sandbox.
INIT_PATH = "/.pysandbox/init"
#: Where the sandbox shows the interpreter's files that lie in a directory it must keep
#: for itself (eval_in_sandbox's ``CODE_DIR``, when a venv lives in a user's home): at
#: their host path below this directory, ``/home/ann/app/.venv`` as
#: ``/.pysandbox/home/ann/app/.venv``.
MOVED_ROOT = "/.pysandbox"


def find_bwrap() -> str:
    """Return the absolute path of ``bwrap`` on ``PATH``, or raise ``SandboxError``.

    The search is made once per value of ``PATH`` (and working directory, which a
    relative entry depends on); the path found is used again while it is still an
    executable file, so a bwrap removed or replaced by a non-executable is searched for
    afresh."""
    key = (os.environ.get("PATH"), os.getcwd() if _relative_path_entry() else "")
    cached = _found_bwrap.get(key)
    if cached is not None and os.access(cached, os.X_OK) and os.path.isfile(cached):
        return cached
    found = shutil.which("bwrap")
    if found is None:
        raise SandboxError("Cannot find the `bwrap` executable")
    path = os.path.abspath(found)
    if len(_found_bwrap) >= 16:
        _found_bwrap.clear()
    _found_bwrap[key] = path
    return path


#: ``find_bwrap``'s answers, by (``PATH``, working directory or "").
_found_bwrap: dict[tuple[str | None, str], str] = {}


def _relative_path_entry() -> bool:
    """Whether ``PATH`` has an entry that is not absolute (an empty one means ".")."""
    return any(not entry.startswith("/") for entry in os.environ.get("PATH", os.defpath).split(":"))


def find_python() -> str:
    """Return the caller's own interpreter (``sys.executable``), as the sandbox will run it.

    Falls back to ``python3`` on ``PATH`` when ``sys.executable`` is not executable, as the
    reference does.  Unlike the reference, any location works (pyenv, conda, a venv).
    """
    candidate = sys.executable
    if not candidate or not os.access(candidate, os.X_OK):
        candidate = shutil.which("python3") or ""
    if not candidate:
        raise SandboxError("Cannot find the Python executable")
    return os.path.abspath(candidate)


def is_within(path: str, root: str) -> bool:
    """Whether normalised absolute ``path`` is ``root`` or lies inside it."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def overlaps(path: str, root: str) -> bool:
    """Whether ``path`` is ``root``, lies inside it, or contains it."""
    return is_within(path, root) or is_within(root, path)


#: The host's kernel interfaces: the sandbox has its own /proc and a few device nodes,
#: and must never see the host's.
KERNEL_DIRS = ("/proc", "/sys", "/dev")
#: Filesystems whose files are the kernel's state (processes, devices, cgroups,
#: namespaces...), wherever they are mounted.
KERNEL_FILESYSTEMS = frozenset(
    {
        "binfmt_misc",
        "bpf",
        "cgroup",
        "cgroup2",
        "configfs",
        "debugfs",
        "devpts",
        "devtmpfs",
        "efivarfs",
        "fusectl",
        "mqueue",
        "nsfs",
        "proc",
        "pstore",
        "securityfs",
        "sysfs",
        "tracefs",
    }
)


def kernel_mount_points() -> list[str]:
    """Where the host (this process's mount namespace) has a kernel filesystem mounted,
    from ``/proc/self/mountinfo``; a bind of ``/proc`` to another place is one too."""
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as mountinfo:
        for line in mountinfo:
            fields = line.split()
            if "-" not in fields:
                continue
            fstype = fields[fields.index("-") + 1]
            if fstype in KERNEL_FILESYSTEMS:
                points.append(os.path.normpath(unescape(fields[4])))
    return points


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


@dataclasses.dataclass(frozen=True)
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


def _shown_link(where: str, target: str, moved: str | None) -> tuple[str, str]:
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


#: ELF program header and dynamic entry types that ``loader_paths`` reads.
_PT_LOAD, _PT_DYNAMIC, _PT_INTERP = 1, 2, 3
_DT_NULL, _DT_STRTAB, _DT_RPATH, _DT_RUNPATH = 0, 5, 15, 29


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


def system_mounts(dirs: Sequence[str] = SYSTEM_DIRS) -> list[str]:
    """bwrap arguments that show the host's system directories read-only.

    A directory is bound; a symlink (``/lib -> usr/lib`` on merged-/usr systems) is
    recreated as the same symlink; a missing one is skipped.
    """
    args: list[str] = []
    for path in dirs:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


@dataclasses.dataclass(frozen=True)
class Identity:
    """Who the sandboxed code is on the host when the caller is root.

    A root caller's bwrap would otherwise run the code as host uid 0: without
    capabilities, but still the owner of every root-owned file it can reach (it could
    chmod the host's ``/dev/null``).  pysandbox's init (``INIT_PATH``), run inside the
    sandbox after bwrap has built it, drops to ``uid``/``gid`` (one of the sandbox's
    own, see ``sandbox_identity``) with no supplementary groups and empty capability
    sets.
    """

    uid: int
    gid: int

    def init_options(self) -> list[str]:
        return ["--drop", f"{self.uid}:{self.gid}"]


#: Root callers' sandboxes run as a uid (and gid) of their own, drawn from this range:
#: no account uses it, and no two running sandboxes are likely to share one, so each
#: has its own RLIMIT_NPROC count and none can signal or trace another.
SANDBOX_ID_BASE = 0x70000000
SANDBOX_ID_SPAN = 2**24


def sandbox_identity() -> Identity | None:
    """A fresh identity for one sandbox, or None when the caller is not root (bwrap then
    maps the caller's own unprivileged uid in a user namespace)."""
    if os.geteuid() != 0:
        return None
    uid = SANDBOX_ID_BASE + secrets.randbelow(SANDBOX_ID_SPAN)
    return Identity(uid=uid, gid=uid)


def find_init() -> str:
    """The host path of pysandbox's init executable, built with the extension beside it."""
    path = os.path.join(os.path.dirname(os.path.abspath(_sandbox.__file__)), "_init")
    if not os.access(path, os.X_OK):
        raise SandboxError(
            f"pysandbox's init is missing or not executable at {path}: reinstall pysandbox "
            "(pip install --force-reinstall pysandbox)"
        )
    return path


def init_mount() -> list[str]:
    """bwrap options that put the init at ``INIT_PATH``, read-only."""
    return ["--ro-bind", find_init(), INIT_PATH]


def parent_dirs(mounts: Sequence[str]) -> list[str]:
    """Ancestors of the mount points that bwrap would have to create: created explicitly
    as 0755, since bwrap copies the host's mode (``/root`` is 0700) and the unprivileged
    code could not reach its interpreter."""
    parents: dict[str, None] = {}
    for path in mounts:
        parent = os.path.dirname(path)
        chain = []
        while parent not in ("/", "") and not any(is_within(parent, d) for d in SYSTEM_DIRS):
            chain.append(parent)
            parent = os.path.dirname(parent)
        parents.update(dict.fromkeys(reversed(chain)))
    return list(parents)


#: Device nodes the sandbox gets, bound from the host.  Their owner is root, so the
#: unprivileged code cannot change them; cheaper than bwrap's ``--dev``, which also
#: mounts a tmpfs, a devpts and a /dev/shm that the sandbox has no use for.
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
DEVICE_LINKS = (
    ("/proc/self/fd", "/dev/fd"),
    ("/proc/self/fd/0", "/dev/stdin"),
    ("/proc/self/fd/1", "/dev/stdout"),
    ("/proc/self/fd/2", "/dev/stderr"),
)


def namespace_options(root_caller: bool) -> list[str]:
    """Every namespace unshared (no network), every capability dropped.

    For a root caller there is no user namespace, since its root would map
    to host root; bwrap keeps the three capabilities the init needs to drop to the
    identity, and the init empties every capability set there.
    """
    if not root_caller:
        return ["--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
    return [
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--cap-drop",
        "ALL",
        "--cap-add",
        "CAP_SETUID",
        "--cap-add",
        "CAP_SETGID",
        "--cap-add",
        "CAP_SETPCAP",
    ]


def filesystem_options(view: InterpreterView, moved: str | None = None) -> list[str]:
    """The system directories and the interpreter's ``view`` read-only (what of it lies
    within ``moved`` below ``MOVED_ROOT``, see ``shown_at``), a ``/proc`` of the
    sandbox's own pid namespace with ``/proc/sys`` read-only, and the usual device
    nodes."""
    options = system_mounts()
    binds = [(path, shown_at(path, moved)) for path in view.binds]
    links = [_shown_link(where, target, moved) for where, target in view.links]
    for path in parent_dirs([*(inside for _, inside in binds), *(where for where, _ in links)]):
        options += ["--perms", "0755", "--dir", path]
    for path, inside in binds:
        options += ["--ro-bind", path, inside]
    for where, target in links:
        options += ["--symlink", target, where]
    # bwrap covers /proc/irq and /proc/bus but not these; a root caller's bwrap would
    # otherwise leave the host's sysctls (kernel.core_pattern...) writable.
    options += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys"]
    options += ["--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger"]
    options += ["--perms", "0755", "--dir", "/dev"]
    for device in DEVICES:
        options += ["--dev-bind", device, device]
    for target, link in DEVICE_LINKS:
        options += ["--symlink", target, link]
    return options


@functools.lru_cache(maxsize=1)
def seccomp_program() -> bytes:
    """The syscall filter's BPF program (built once per process by the C core).

    Every sandbox runs under it, from the init on; see ``src/seccomp_filter.c`` for
    what it refuses.  Served to bwrap on ``SECCOMP_FD``.
    """
    try:
        return _sandbox.seccomp_program()
    except OSError as exc:
        raise SandboxError(
            f"cannot build the sandbox's syscall filter with libseccomp: {exc.strerror}"
        ) from exc


@functools.lru_cache(maxsize=16)
def base_options(python: str, euid: int, moved: str | None = None) -> tuple[str, ...]:
    """bwrap's options for running ``python`` as a caller with ``euid``, its files
    within ``moved`` shown below ``MOVED_ROOT``: everything that does not change from
    call to call, computed once."""
    options = [
        "--new-session",
        "--die-with-parent",
        # pysandbox's init is pid 1: when bwrap's own pid 1 reports the program's exit,
        # bwrap returns before that pid 1 is gone, and it would outlive the call.  When
        # our init exits, the kernel has already ended every process of the namespace.
        "--as-pid-1",
        "--seccomp",
        str(SECCOMP_FD),
        *namespace_options(euid == 0),
        "--clearenv",
        *filesystem_options(python_mounts(python), moved),
        *init_mount(),
    ]
    return tuple(options)


def init_prefix(identity: Identity | None) -> list[str]:
    """The start of the command: the init, told which identity to drop to."""
    return [INIT_PATH, *(identity.init_options() if identity else [])]


def eval_options(venv_config: tuple[str, int] | None = None) -> list[str]:
    """eval_in_sandbox's part of the command line: ``CODE_DIR`` as the working directory,
    as in the reference implementation (the code itself, at ``CODE_PATH`` with
    ``CODE_MODE``, is bound by ``_launch``).  The root is read-only.  ``venv_config`` is
    where the moved interpreter's ``pyvenv.cfg`` is shown and the fd of its moved text
    (``moved_venv_config``), served over the host's."""
    moved_config = []
    if venv_config is not None:
        path, fd = venv_config
        moved_config = ["--perms", "0444", "--ro-bind-data", str(fd), path]
    return [*moved_config, "--perms", "0755", "--dir", CODE_DIR, "--chdir", CODE_DIR]


def run_options(*, disk: int, readable: Sequence[tuple[int, str]], env: Sequence[str]) -> list[str]:
    """run's part of the command line: the extra read-only paths, each ``(fd, path)``
    bound from the file open on ``fd`` inside bwrap (``_readable.open_readable``), a
    writable tmpfs of ``disk`` bytes as the working directory ``WORKDIR`` (also ``HOME``;
    run_python's code is bound at ``MAIN_PATH`` in it by ``_launch``), ``PATH`` and the
    ``--setenv`` options of ``env``."""
    options = []
    for path in parent_dirs([path for _, path in readable]):
        options += ["--perms", "0755", "--dir", path]
    for fd, path in readable:
        options += ["--ro-bind-fd", str(fd), path]
    options += ["--perms", "0777", "--size", str(disk), "--tmpfs", WORKDIR]
    options += ["--setenv", "PATH", SANDBOX_PATH, "--setenv", "HOME", WORKDIR, *env]
    return [*options, "--chdir", WORKDIR]
