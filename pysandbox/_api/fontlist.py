# SPDX-License-Identifier: MIT
"""Matplotlib's font list, built once per host in a sandbox and shown to every sandbox
that runs Python, so that none rebuilds it (issue 23).

Matplotlib reads its font list from ``fontlist-vNNN.json`` in its cache directory, and
builds it (a scan of every font, about 0.1 s to 0.7 s of CPU) wherever that file is
missing.  The sandbox's cache directory is a fresh tmpfs (``bwrap.MPLCONFIGDIR``), so
without help each sandbox would build it again.  Here the list is built once, in a
sandbox of its own (``_build``: the host process never imports matplotlib), by no code
but ``import matplotlib.font_manager``; the host keeps it under the user's cache
directory (``store``: ``$XDG_CACHE_HOME/pysandbox/fontlist/KEY/``, 0700, the file 0600,
built by one process at a time: ``_stored_or_built``), where ``KEY`` changes with the
interpreter, matplotlib's files and the fonts (``_key``), and each sandbox that runs
Python gets a copy of it, 0444, in its ``MPLCONFIGDIR`` (served from memory: the
sandbox sees no host path of it).

The file is data a sandbox produced, so it is checked as hostile input each time it is
read, after the build and before each reuse (``valid``): at most ``MAX_BYTES``, JSON of
bounded nesting and numbers (``untrusted.loads``), the shape matplotlib writes.  A file
that fails the check is removed and built again.  Whatever fails (no matplotlib, no
writable cache directory, a build that did not end well), the sandboxes go on without
it, and matplotlib builds its list inside, in the sandbox's cache directory.  Looked up
once per process and interpreter; the build happens at most once per process, and once
per host while the store is writable.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import sys
import threading
from collections.abc import Callable, Mapping

from .._launch import bwrap
from .._model import untrusted
from .._model.limits import Limits
from .._model.result import Result

__all__ = ["BUILD_LIMITS", "MAX_BYTES", "RunPython", "fontlist", "store", "valid"]

#: ``run_python(code, limits=..., env=...)`` with no font list of its own (the build's).
RunPython = Callable[[str, Limits, Mapping[str, str]], Result]

#: The most bytes a font list may have (matplotlib's is about 60 KiB for a hundred fonts;
#: a host with thousands of fonts stays well within it).
MAX_BYTES = 4 * 2**20
#: The build's sandbox: importing matplotlib on a busy 2-core machine, 3.13 included.
BUILD_LIMITS = Limits(cpu_time=30, wall_time=90, memory=512 * 2**20)
#: What the build runs: matplotlib writes the list into ``MPLCONFIGDIR`` as it loads.
_BUILD_CODE = "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.font_manager\n"
#: Where the build's matplotlib writes, inside its working directory (so the list comes
#: back in ``Result.files``).
_BUILD_DIR = "mpl"
_PREFIX, _SUFFIX = "fontlist-v", ".json"
#: The store directory's lock file (``flock``), held while a process reads or builds.
_LOCK = ".lock"
#: Directories walked for the fonts' state at most (a host with a huge font tree is
#: seen by its top directories' times past it).
_MAX_DIRS = 4096

_lock = threading.Lock()


def _new_lock() -> None:
    """A fork's child gets a lock of its own: a thread of the parent may have held it."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_new_lock)


def store() -> str:
    """The host directory of the built font lists: below ``$XDG_CACHE_HOME`` (or
    ``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pysandbox", "fontlist")


def valid(name: str, data: bytes) -> bool:
    """Whether ``data`` is a font list matplotlib may read, by the name ``name``: at most
    ``MAX_BYTES``, bounded JSON, a ``FontManager`` of the name's version whose ``ttflist``
    and ``afmlist`` hold ``FontEntry`` objects with a file name."""
    version = name[len(_PREFIX) : -len(_SUFFIX)]
    if not (name.startswith(_PREFIX) and name.endswith(_SUFFIX) and version):
        return False
    if not all(c.isascii() and (c.isalnum() or c in ".+-_") for c in version):
        return False
    if len(data) > MAX_BYTES:
        return False
    try:
        value = untrusted.loads(data, max_bytes=MAX_BYTES)
    except (ValueError, RecursionError):
        return False
    if not isinstance(value, dict) or value.get("__class__") != "FontManager":
        return False
    stored = value.get("_version")  # an int before matplotlib 3.10 (390), a str since
    if type(stored) not in (int, str) or str(stored) != version:
        return False
    for key in ("ttflist", "afmlist"):
        entries = value.get(key)
        if not isinstance(entries, list):
            return False
        for entry in entries:
            if not isinstance(entry, dict) or entry.get("__class__") != "FontEntry":
                return False
            if not isinstance(entry.get("fname"), str):
                return False
    return True


def _matplotlib_source() -> str | None:
    """The ``font_manager.py`` of the matplotlib the interpreter would import (the first
    on ``sys.path``), or None; found by path, without importing it."""
    for entry in sys.path:
        if os.path.isabs(entry):
            path = os.path.join(entry, "matplotlib", "font_manager.py")
            if os.path.isfile(path):
                return path
    return None


def _fonts_state() -> list[tuple[str, int]]:
    """The modification time of the font configuration and of every font directory
    (``/usr/share/fonts``, ``/usr/local/share/fonts``, those the configuration names):
    a font added, removed or reconfigured changes one."""
    roots = [*bwrap.FONT_CONFIG, "/etc/fonts/conf.d", "/usr/share/fonts", "/usr/local/share/fonts"]
    state: list[tuple[str, int]] = []
    for root in dict.fromkeys([*roots, *bwrap.font_dirs()]):
        for path, dirs, _ in os.walk(root):
            try:
                state.append((path, os.stat(path).st_mtime_ns))
            except OSError:
                continue
            if len(state) > _MAX_DIRS:
                dirs.clear()
    return state


def _key(python: str, source: str) -> str:
    """The store's key for the list: what it depends on, hashed."""
    import hashlib  # only the first run_python of a process gets here

    facts: list[object] = [python, os.path.dirname(source)]
    for path in (python, source):
        info = os.stat(path)
        facts.append((info.st_ino, info.st_size, info.st_mtime_ns))
    facts.append(_fonts_state())
    return hashlib.sha256(repr(facts).encode()).hexdigest()[:32]


def _private_dir(path: str) -> bool:
    """Make ``path`` (and its parents) when missing; whether it is a directory of this
    user that no one else may write, reached by no symlink."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError:
        return False
    mine = info.st_uid == os.geteuid() and not info.st_mode & 0o022
    return stat.S_ISDIR(info.st_mode) and mine and os.path.realpath(path) == path


def _read(directory: str) -> tuple[str, bytes] | None:
    """The list stored in ``directory``, checked; a file that fails the check removed."""
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    for name in names:
        if name.startswith("."):  # the lock, or a list being written
            continue
        path = os.path.join(directory, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as stream:
            info = os.fstat(stream.fileno())
            data = stream.read(MAX_BYTES + 1)
        if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and valid(name, data):
            return name, data
        with contextlib.suppress(OSError):
            os.unlink(path)
    return None


def _write(directory: str, name: str, data: bytes) -> None:
    """Store ``data`` as ``directory/name``, 0600, whole or not at all."""
    temporary = os.path.join(directory, f".{name}.{os.getpid()}.{threading.get_ident()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
        os.replace(temporary, os.path.join(directory, name))
    except BaseException:
        os.unlink(temporary)
        raise


def _build(run: RunPython) -> tuple[str, bytes] | None:
    """The list, built in a sandbox by matplotlib itself (``run``), checked; None when
    the build did not end well or what it wrote fails the check."""
    result = run(_BUILD_CODE, BUILD_LIMITS, {"MPLCONFIGDIR": f"{bwrap.WORKDIR}/{_BUILD_DIR}"})
    if result.returncode != 0:
        return None
    built = [
        (path.rpartition("/")[2], data)
        for path, data in result.files.items()
        if path.startswith(f"{_BUILD_DIR}/{_PREFIX}")
    ]
    if len(built) != 1 or not valid(*built[0]):
        return None
    return built[0]


def fontlist(python: str, run: RunPython) -> tuple[str, bytes] | None:
    """The font list of ``python``'s matplotlib, ``(name, data)``: the stored one, or
    one built now with ``run`` (``run_python`` without a font list) and stored; None
    when there is none (see the module's docstring)."""
    with _lock:
        return _fontlist(python, run)


@functools.lru_cache(maxsize=4)
def _fontlist(python: str, run: RunPython) -> tuple[str, bytes] | None:
    """``fontlist``, once per process and interpreter (under ``_lock``)."""
    source = _matplotlib_source()
    if source is None or os.path.realpath(python) != os.path.realpath(sys.executable):
        return None
    try:
        directory = os.path.join(os.path.realpath(store()), _key(python, source))
        if not _private_dir(directory):
            return _build(run)
        return _stored_or_built(directory, run)
    except Exception:  # a list is a speed-up: any failure leaves matplotlib to build it
        return None


def _stored_or_built(directory: str, run: RunPython) -> tuple[str, bytes] | None:
    """The list stored in ``directory``, or built and stored there, under the
    directory's lock: the processes that start at once (a test suite's workers, a
    service's) build it once, the others wait for it (the build's wall time bounds the
    wait)."""
    import fcntl  # only the first run_python of a process gets here

    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    lock = os.open(os.path.join(directory, _LOCK), flags, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _read(directory)
        if found is not None:
            return found
        built = _build(run)
        if built is not None:
            _write(directory, *built)
        return built
    finally:
        os.close(lock)
