"""Pure functions that find bubblewrap and the interpreter and build the bwrap command line.

Nothing here spawns a process; everything is unit-testable.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import secrets
import shutil
import sys
from collections.abc import Iterable, Sequence

from . import _lifeline, _sandbox
from ._errors import SandboxError

__all__ = [
    "CODE_FD",
    "CODE_PATH",
    "INIT_PATH",
    "LIFELINE_FD",
    "SECCOMP_FD",
    "STATUS_FD",
    "Identity",
    "base_options",
    "eval_argv",
    "filesystem_options",
    "find_bwrap",
    "find_init",
    "find_python",
    "init_mount",
    "init_prefix",
    "namespace_options",
    "parent_dirs",
    "python_mounts",
    "sandbox_identity",
    "seccomp_program",
    "system_mounts",
]

#: The fds bwrap gets, numbered as the C core maps them: pass_fds[i] becomes fd 3 + i
#: and the capture pipes come next.  The syscall filter is always the first passed fd;
#: for eval_in_sandbox the code is the second and the lifeline's read end the third
#: (``_launch.launch`` passes them in this order).
SECCOMP_FD = 3
CODE_FD = 4
LIFELINE_FD = 5
STATUS_FD = 6
#: Where the sandboxed code lives (read-only), as in the reference implementation.
CODE_DIR = "/home"
CODE_PATH = "/home/code.py"

#: Top-level system directories the sandbox may see read-only, when the host has them.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Where pysandbox's init executable is, inside the sandbox.
INIT_PATH = "/.pysandbox/init"


def find_bwrap() -> str:
    """Return the absolute path of ``bwrap`` on ``PATH``, or raise ``SandboxError``."""
    found = shutil.which("bwrap")
    if found is None:
        raise SandboxError("Cannot find the `bwrap` executable")
    return os.path.abspath(found)


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


def _is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _outermost(paths: Iterable[str]) -> list[str]:
    """Drop every path that lies inside another of ``paths``; keep order of first sight."""
    unique = list(dict.fromkeys(os.path.normpath(p) for p in paths))
    return [p for p in unique if not any(q != p and _is_within(p, q) for q in unique)]


def python_mounts(executable: str) -> list[str]:
    """The directories the interpreter needs, bound read-only at the same paths inside.

    The installation (``sys.base_prefix``/``base_exec_prefix``: stdlib, extension modules,
    libpython), the virtual environment if any (``sys.prefix``: its ``pyvenv.cfg`` and
    site-packages), and the directory of the resolved executable.  Directories under the
    system directories, which are bound anyway, are left out.
    """
    candidates = [
        sys.base_prefix,
        sys.base_exec_prefix,
        sys.prefix,
        sys.exec_prefix,
        os.path.dirname(executable),
        os.path.dirname(os.path.realpath(executable)),
    ]
    outer = _outermost(os.path.abspath(c) for c in candidates if c)
    return [p for p in outer if not any(_is_within(p, d) for d in SYSTEM_DIRS) and p != "/"]


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
    """The host path of pysandbox's init executable, built with the extension."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_init")
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
        while parent not in ("/", "") and not any(_is_within(parent, d) for d in SYSTEM_DIRS):
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


def filesystem_options(mounts: Sequence[str]) -> list[str]:
    """The system directories and ``mounts`` read-only, a ``/proc`` of the sandbox's own
    pid namespace with ``/proc/sys`` read-only, and the usual device nodes."""
    options = system_mounts()
    for path in parent_dirs(mounts):
        options += ["--perms", "0755", "--dir", path]
    for path in mounts:
        options += ["--ro-bind", path, path]
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
def base_options(python: str, euid: int) -> tuple[str, ...]:
    """bwrap's options for running ``python`` as a caller with ``euid``: everything that
    does not change from call to call, computed once."""
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
        *filesystem_options(python_mounts(python)),
        *init_mount(),
    ]
    return tuple(options)


def init_prefix(identity: Identity | None, *, lifeline_fd: int | None) -> list[str]:
    """The start of the command: the init, told which identity to drop to and where its
    lifeline is (see ``_lifeline``; None: no lifeline, for a sandbox run from a shell)."""
    return [
        INIT_PATH,
        *(identity.init_options() if identity else []),
        *(_lifeline.init_options(lifeline_fd) if lifeline_fd is not None else []),
    ]


def eval_argv(bwrap: str, python: str) -> list[str]:
    """The full command line that runs ``CODE_PATH`` with ``python -u`` inside bubblewrap.

    See ``base_options``.  The environment is cleared; the sandbox dies with its parent
    and gets a new session (no TIOCSTI into the caller's terminal); the root and
    ``/home`` are read-only.  The code arrives through fd ``CODE_FD`` and is copied into
    the sandbox, so no host file holds it.  bwrap reports on ``STATUS_FD``; its
    ``exit-code`` report comes only from a sandbox it finished building, which tells a
    setup failure from the code's own exit 1.  The init ends the sandbox as soon as
    the lifeline on ``LIFELINE_FD`` breaks (the caller died).
    """
    options = base_options(python, os.geteuid())
    return [
        bwrap,
        *options,
        "--json-status-fd",
        str(STATUS_FD),
        "--perms",
        "0755",
        "--dir",
        CODE_DIR,
        # Writable by mode on a read-only mount: a write attempt fails with EROFS, as in
        # the reference, rather than with EACCES for the unprivileged code.
        "--perms",
        "0666",
        "--ro-bind-data",
        str(CODE_FD),
        CODE_PATH,
        "--chdir",
        CODE_DIR,
        "--remount-ro",
        "/",
        *init_prefix(sandbox_identity(), lifeline_fd=LIFELINE_FD),
        "--",
        python,
        "-u",
        CODE_PATH,
    ]
