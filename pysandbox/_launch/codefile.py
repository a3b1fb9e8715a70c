# SPDX-License-Identifier: MIT
"""The code file: the host file a sandbox's Python reads its program from.

Each sandbox that runs Python code gets one regular file in a private directory of this
process (on ``/dev/shm`` where it can, so no disk is touched), bound read-only at the
code's path inside (``--ro-bind-fd``).  The sandbox sees exactly that file whether the
code was written before the sandbox started (a fresh sandbox) or long after (a warm one):
same kind of mount, same file type, mode and owner, read by the interpreter the same way.

A warm sandbox's file is created empty; ``write`` puts the code in it at the hand-over,
before the sandbox's waiter (``waiter.py``) is told to go and opens it.

The private directory is ``pysandbox-XXXXXXXX`` (random, mode 0700) with an ``owner``
file naming this process, written whole under another name and renamed into place, so
an ``owner`` file is never empty or half written.  A caller killed with SIGKILL leaves
its directory behind, and the next process to make one in the same place removes the
directories whose owner is dead, and those without a sound owner file once they are
older than making one could take (``UNOWNED_GRACE``: a caller killed in the middle, or
a version that left an empty one).

The places are tried in order, at every step (the directory, its owner file, the code
file and its content): one that fails, full (``ENOSPC``, ``EDQUOT``, as any local user
can make ``/dev/shm``) or refused, has what this attempt made in it removed, and the
next is tried.  When none works, or on a failure no other place avoids (``EMFILE``,
``ENFILE``, ``ENOMEM``), ``SandboxError`` names each place, the errno and the fix.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import threading
import time

from .._host import owners
from .._model.errors import SandboxError, errno_text, process_wide_fix

__all__ = ["UNOWNED_GRACE", "CodeFile"]

#: Where the private directory goes, the first that works: memory, then the caller's
#: runtime directory, then the temporary directory.
_PLACES = ("/dev/shm", os.environ.get("XDG_RUNTIME_DIR", ""), tempfile.gettempdir())
_PREFIX = "pysandbox-"
_OWNER = "owner"
#: Seconds after which a private directory without a sound owner file is taken for the
#: remains of a caller that died making it: that takes microseconds.
UNOWNED_GRACE = 60.0

_lock = threading.Lock()
#: This process's private directory in each place where it made one.
_directories: dict[str, str] = {}


def _owner_of(directory: str) -> str:
    """The text of ``directory``'s owner file, "" when it has none or it is not ASCII."""
    try:
        with open(os.path.join(directory, _OWNER), "rb") as owner:
            return owner.read(256).decode("ascii")
    except (FileNotFoundError, UnicodeDecodeError):
        return ""


def _sweep(place: str) -> None:
    """Remove the private directories in ``place`` whose owner died without removing
    them, and those without a sound owner file older than ``UNOWNED_GRACE``; only this
    user's, only real directories."""
    try:
        names = [name for name in os.listdir(place) if name.startswith(_PREFIX)]
    except OSError:
        return
    for name in names:
        path = os.path.join(place, name)
        try:
            info = os.lstat(path)
            if not os.path.isdir(path) or os.path.islink(path) or info.st_uid != os.geteuid():
                continue
            owner = _owner_of(path)
        except OSError:
            continue
        unowned_long = time.time() - info.st_mtime > UNOWNED_GRACE
        if owners.is_dead(owner) if owners.is_sound(owner) else unowned_long:
            shutil.rmtree(path, ignore_errors=True)


def _remove_own(path: str, owner: str) -> None:
    """At exit: remove this process's directory (not a forked child's parent's)."""
    if owners.identity(os.getpid()) == owner:
        shutil.rmtree(path, ignore_errors=True)


def _places() -> list[str]:
    """The places to try, in order, each once."""
    return [place for place in dict.fromkeys(_PLACES) if place]


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``; raises ``OSError`` (``ENOSPC``...)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _write_owner(directory: str, owner: str) -> None:
    """Write ``owner`` as ``directory``'s owner file whole or not at all: under another
    name first, then renamed into place (a rename needs no room)."""
    partial = os.path.join(directory, _OWNER + ".partial")
    fd = os.open(
        partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
    )
    try:
        _write_all(fd, owner.encode("ascii"))
    finally:
        os.close(fd)
    os.rename(partial, os.path.join(directory, _OWNER))


def _directory_in(place: str) -> tuple[str, bool]:
    """This process's private directory in ``place``, and whether this call made it
    (its owner file written, the dead callers' directories there swept).  Raises
    ``OSError`` having removed whatever it made."""
    path = _directories.get(place)
    if path is not None and os.path.isdir(path):
        return path, False
    path = tempfile.mkdtemp(prefix=_PREFIX, dir=place)
    try:
        _write_owner(path, owners.identity(os.getpid()))
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    _sweep(place)
    return path, True


def _file_in(directory: str, mode: int, data: bytes) -> tuple[int, str]:
    """A new file of ``mode`` in ``directory`` holding ``data``: its fd (read-write,
    close-on-exec) and path.  Raises ``OSError`` having removed it."""
    path = os.path.join(directory, os.urandom(8).hex())
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, mode)
        _write_all(fd, data)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        raise
    return fd, path


def _failure(place: str, error: OSError) -> str:
    """``"/dev/shm: No space left on device (ENOSPC)"``."""
    return f"{place}: {errno_text(error)}"


def _new_file(mode: int, data: bytes) -> tuple[int, str]:
    """A code file of ``mode`` holding ``data`` in the first place where every step
    works (see the module's docstring): its fd and path.  ``SandboxError`` naming each
    place's failure and the fix when none works."""
    failures: list[str] = []
    error: OSError | None = None
    with _lock:
        for place in _places():
            made = None
            try:
                directory, new = _directory_in(place)
                made = directory if new else None
                fd, path = _file_in(directory, mode, data)
            except OSError as exc:
                if made is not None:
                    shutil.rmtree(made, ignore_errors=True)
                fix = process_wide_fix(exc)
                if fix is not None:
                    raise SandboxError(
                        f"cannot make the sandbox's code file ({_failure(place, exc)}): {fix}"
                    ) from exc
                failures.append(_failure(place, exc))
                error = exc
                continue
            if made is not None:
                _directories[place] = made
                atexit.register(_remove_own, made, owners.identity(os.getpid()))
            return fd, path
    raise SandboxError(
        "cannot make the sandbox's code file in any place for it ("
        + "; ".join(failures)
        + "): free space in /dev/shm (a local user may have filled it), or set TMPDIR "
        "to a directory with room"
    ) from error


class CodeFile:
    """One sandbox's code file, holding ``data`` (a warm sandbox's: empty until
    ``write``)."""

    def __init__(self, mode: int, *, data: bytes = b"") -> None:
        self._fd, self.path = _new_file(mode, data)

    def path_fd(self) -> int:
        """A new ``O_PATH`` fd of the file for bwrap's ``--ro-bind-fd`` (the caller's to
        close); it can neither read nor write."""
        return os.open(self.path, os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW)

    def write(self, data: bytes) -> None:
        """Write the code, at the hand-over, into the file that was made empty."""
        try:
            _write_all(self._fd, data)
        except OSError as exc:
            raise SandboxError(
                f"cannot write the sandbox's code file: {exc.strerror}; free space in "
                f"{os.path.dirname(self.path)}"
            ) from exc

    def close(self) -> None:
        """Close and remove the file (the sandbox's mount keeps its own reference).
        Idempotent."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
