# SPDX-License-Identifier: MIT
"""Where the programs a sandbox needs are on this host: bubblewrap, the interpreter, the init."""

from __future__ import annotations

import os
import sys

from .._model.errors import SandboxError

#: The installed package's directory, where the extension and the init are built.
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

__all__ = [
    "PACKAGE_DIR",
    "find_bwrap",
    "find_copy_client",
    "find_init",
    "find_python",
    "which",
]


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
    found = which("bwrap")
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


def which(name: str) -> str | None:
    """The first executable file ``name`` in the directories of ``PATH`` (``os.defpath``
    when unset; an empty entry is the working directory), or None.

    What ``shutil.which`` answers for a bare name, without importing ``shutil`` (and the
    compression modules it loads) on every launch."""
    seen: set[str] = set()
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        if directory in seen:
            continue
        seen.add(directory)
        candidate = os.path.join(directory, name)
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return None


def find_python() -> str:
    """Return the caller's own interpreter (``sys.executable``), as the sandbox will run it.

    Falls back to ``python3`` on ``PATH`` when ``sys.executable`` is not executable, as the
    reference does.  Unlike the reference, any location works (pyenv, conda, a venv).
    """
    candidate = sys.executable
    if not candidate or not os.access(candidate, os.X_OK):
        candidate = which("python3") or ""
    if not candidate:
        raise SandboxError("Cannot find the Python executable")
    return os.path.abspath(candidate)


def find_copy_client() -> str:
    """The host path of pysandbox's copy client (``src/copy_client.c``), built beside
    the init."""
    return _built("_copy", "copy client")


def find_init() -> str:
    """The host path of pysandbox's init executable, built with the extension beside it."""
    return _built("_init", "init")


def _built(name: str, what: str) -> str:
    """The host path of the program ``name`` built beside the extension, or
    ``SandboxError`` naming ``what`` it is and the fix."""
    path = os.path.join(PACKAGE_DIR, name)
    if not os.access(path, os.X_OK):
        raise SandboxError(
            f"pysandbox's {what} is missing or not executable at {path}: reinstall pysandbox "
            "(pip install --force-reinstall pysandbox)"
        )
    return path
