# SPDX-License-Identifier: MIT
"""The host paths a sandbox may read (``readable``): checked when given, then opened once
at launch without following any symlink, checked again on the open file, and bound from
that very file (bwrap's ``--ro-bind-fd``).

Checking a path and binding it later by name would let a local user who controls one of
its components swap in a symlink between the two (to the host's ``/proc``, say).  Here
the name is resolved once (``realpath``), every check is made on the resolved path, and
that path is then opened component by component from ``/`` with ``O_NOFOLLOW``: a
symlink met on the way means the path changed, and the call fails; otherwise the fd is
the file at the path that was checked, and its type is read from the fd.

What is bound must be inert (no host socket or FIFO reachable through it): the syscall
filter leaves the sandbox no unix socket that can address a path, and the init's Landlock
domain (``src/landlock.c``) refuses opening any host file for writing.  A readable path
that is itself a socket, FIFO or device is refused; a readable directory needs Landlock,
and without it the call fails rather than run weaker.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Sequence

from .. import _sandbox
from .._host import interpreter, mountinfo
from .._model.errors import SandboxError
from . import bwrap

__all__ = ["LANDLOCK_FIX", "check_readable", "landlock_abi", "open_readable"]

#: How a host gets Landlock, for the errors and the self-test.
LANDLOCK_FIX = (
    "boot a kernel with Landlock (Linux 5.13 or later, CONFIG_SECURITY_LANDLOCK=y, and "
    "landlock in the lsm= boot parameter, e.g. lsm=landlock,lockdown,yama,apparmor,bpf)"
)

#: File types a readable path may not be, by the name the error gives them.
_REFUSED_KINDS = (
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


@functools.lru_cache(maxsize=1)
def landlock_abi() -> int:
    """The running kernel's Landlock ABI version, 0 when it has none (asked once)."""
    return _sandbox.landlock_abi()


def _own_trees() -> tuple[str, ...]:
    """The sandbox's own places, which a readable path may not cover."""
    return (*bwrap.KERNEL_DIRS, bwrap.WORKDIR, os.path.dirname(bwrap.INIT_PATH))


def _check_resolved(path: str, source: str, kernel_mounts: Sequence[str]) -> None:
    """``ValueError`` when the resolved ``source`` of ``path`` would show the host's
    kernel state."""
    for tree in (*bwrap.KERNEL_DIRS, *kernel_mounts):
        if interpreter.overlaps(source, tree):
            raise ValueError(
                f"readable path {path!r} (resolved: {source}) would show the host's {tree}"
            )


def _check_kind(path: str, mode: int) -> None:
    """``ValueError`` for a path that is a socket, FIFO or device; ``SandboxError`` for a
    directory when the kernel has no Landlock to make what lies below it inert."""
    for test, kind in _REFUSED_KINDS:
        if test(mode):
            raise ValueError(
                f"readable path {path!r} is {kind}: the sandbox may read only regular "
                "files and directories"
            )
    if stat.S_ISDIR(mode) and landlock_abi() < 1:
        raise SandboxError(
            f"readable path {path!r} is a directory, and this kernel has no Landlock: "
            "without it a FIFO of the host below the directory would be writable from the "
            f"sandbox; {LANDLOCK_FIX}, or give only regular files"
        )


def check_readable(readable: object) -> list[str]:
    """The paths of ``readable``, normalised, each bound read-only at the same path.

    Refused with a ``ValueError`` that names the path: one that is, contains or lies
    inside ``/proc``, ``/sys``, ``/dev`` or a kernel filesystem mounted elsewhere (the
    host's processes, devices and kernel state), checked on the path with its symlinks
    resolved; one that would cover the sandbox's own mounts: ``/``, the working
    directory, the init's directory, ``/proc``, ``/sys``, ``/dev``, and ``/home`` itself
    (``eval_in_sandbox``'s code directory; paths inside ``/home`` are fine); and one that
    is a socket, a FIFO or a device.  A directory on a kernel without Landlock raises
    ``SandboxError``.  The launch checks it all again on the file it binds
    (``open_readable``).
    """
    if isinstance(readable, (str, bytes)) or not isinstance(readable, Sequence):
        raise TypeError(f"readable must be a sequence of paths, not {type(readable).__name__}")
    kernel_mounts: list[str] | None = None
    paths = []
    for path in readable:
        if not isinstance(path, str):
            raise TypeError(f"readable items must be str, not {type(path).__name__}")
        if "\0" in path or not os.path.isabs(path):
            raise ValueError(f"readable paths must be absolute: {path!r}")
        target = os.path.normpath(path)
        for tree in _own_trees():
            if interpreter.overlaps(target, tree):
                raise ValueError(f"readable path {path!r} would cover the sandbox's {tree}")
        if interpreter.is_within(bwrap.CODE_DIR, target):
            raise ValueError(f"readable path {path!r} would cover the sandbox's {bwrap.CODE_DIR}")
        try:
            mode = os.stat(path).st_mode
        except OSError:
            raise ValueError(f"readable path does not exist: {path!r}") from None
        if kernel_mounts is None:
            kernel_mounts = mountinfo.kernel_mount_points()
        _check_resolved(path, _resolved(path), kernel_mounts)
        _check_kind(path, mode)
        paths.append(target)
    return paths


def _changed(path: str, source: str, what: str) -> SandboxError:
    """The error for a readable path that is no longer what was checked."""
    return SandboxError(
        f"readable path {path!r} changed while it was opened ({source}: {what}); it is "
        "bound only as it was checked: keep its directories out of other users' hands"
    )


def _resolved(path: str) -> str:
    """``os.path.realpath(path)``; ``SandboxError`` when a component changes under it (a
    symlink that is a directory by the time it is read: ``readlink`` fails)."""
    try:
        return os.path.realpath(path)
    except OSError as exc:
        raise _changed(path, path, exc.strerror or "cannot be resolved") from None


def _walk(path: str, source: str) -> int:
    """An ``O_PATH`` fd of the absolute, resolved ``source``, opened one component at a
    time from ``/`` without following a symlink; ``SandboxError`` naming ``path`` when a
    component is no longer what ``realpath`` saw (a symlink, or gone)."""
    flags = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
    names = [name for name in source.split("/") if name]
    fd = os.open("/", flags | os.O_DIRECTORY)
    try:
        for index, name in enumerate(names):
            last = index == len(names) - 1
            following = os.open(name, flags if last else flags | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = following
    except OSError as exc:
        os.close(fd)
        raise _changed(path, source, exc.strerror or "cannot be opened") from None
    if stat.S_ISLNK(os.fstat(fd).st_mode):
        os.close(fd)
        raise _changed(path, source, "a symlink now")
    return fd


def open_readable(path: str, kernel_mounts: Sequence[str]) -> int:
    """The ``O_PATH`` fd (the caller's to close) that the sandbox binds at ``path``:
    ``path`` resolved once, checked as ``check_readable`` checks it, opened without
    following any symlink, and its type read from the open file.  ``kernel_mounts`` are
    ``mountinfo.kernel_mount_points()``."""
    source = _resolved(path)
    _check_resolved(path, source, kernel_mounts)
    fd = _walk(path, source)
    try:
        _check_kind(path, os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    return fd
