"""Pure functions that find bubblewrap and the interpreter and build the bwrap command line.

Nothing here spawns a process; everything is unit-testable.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable, Sequence

from ._errors import SandboxError

__all__ = [
    "CODE_FD",
    "CODE_PATH",
    "STATUS_FD",
    "bwrap_argv",
    "find_bwrap",
    "find_python",
    "python_mounts",
    "system_mounts",
]

#: The fds bwrap gets, numbered as the C core maps them: pass_fds[i] becomes fd 3 + i
#: and the report pipe comes next.  The code is the only passed fd.
CODE_FD = 3
STATUS_FD = CODE_FD + 1
#: Where the sandboxed code lives (read-only), as in the reference implementation.
CODE_DIR = "/home"
CODE_PATH = "/home/code.py"

#: Top-level system directories the sandbox may see read-only, when the host has them.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


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


def bwrap_argv(bwrap: str, python: str, mounts: Sequence[str]) -> list[str]:
    """The full command line that runs ``CODE_PATH`` with ``python -u`` inside bubblewrap.

    Every namespace is unshared (no network); every capability is dropped and
    ``/proc/sys`` is read-only, which matters when the caller is root; the environment
    is cleared; the sandbox dies with its parent and gets a new session (no TIOCSTI into
    the caller's terminal).  The root,
    ``/home`` and ``/dev`` are read-only; the code arrives through fd ``CODE_FD`` and is
    copied into the sandbox, so no host file holds it.  bwrap reports on ``STATUS_FD``
    once the sandbox is built, which tells a setup failure from the code's own exit 1.
    """
    argv = [
        bwrap,
        "--new-session",
        "--die-with-parent",
        "--unshare-all",
        "--cap-drop",
        "ALL",
        "--clearenv",
        "--json-status-fd",
        str(STATUS_FD),
        *system_mounts(),
    ]
    for path in mounts:
        argv += ["--ro-bind", path, path]
    argv += [
        "--proc",
        "/proc",
        # bwrap covers /proc/irq and /proc/bus but not these; for a root caller, uid 0
        # inside could otherwise write the host's sysctls (kernel.core_pattern...).
        "--ro-bind",
        "/proc/sys",
        "/proc/sys",
        "--ro-bind-try",
        "/proc/sysrq-trigger",
        "/proc/sysrq-trigger",
        "--dev",
        "/dev",
        "--remount-ro",
        "/dev",
        "--ro-bind-data",
        str(CODE_FD),
        CODE_PATH,
        "--chdir",
        CODE_DIR,
        "--remount-ro",
        "/",
        python,
        "-u",
        CODE_PATH,
    ]
    return argv
