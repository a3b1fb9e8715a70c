"""Writing a run's output files into a host directory (``pysandbox run --output-dir``).

The names come from the sandbox, so they are untrusted: each must pass
``_files.name_problem`` (relative, no ``..``), and the writing never leaves the
directory even if something in it changes meanwhile.  Every step goes through directory
handles with ``O_NOFOLLOW``: a symlink already in the directory (or planted in it
during the write) is refused, never followed.  Each file is written to a fresh temporary
name and renamed over its target, so an existing file, hard link or symlink of that
name is replaced, never written through.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet

from ._files import name_problem

__all__ = ["OutputDirError", "prepare", "write_files"]

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class OutputDirError(Exception):
    """An output file could not be written; the message names the file and the cause."""


def prepare(directory: str) -> None:
    """Create ``directory`` (and its parents) if needed, and check it is a writable
    directory; ``OutputDirError`` naming it otherwise.  Done before the run, so a typo
    costs no run."""
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise OutputDirError(f"cannot create {directory}: {exc.strerror}") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OutputDirError(f"cannot write into {directory}: permission denied")


@contextlib.contextmanager
def _opened(path: str, dir_fd: int | None, *, create: bool) -> Iterator[int]:
    """A handle of the directory ``path`` (relative to ``dir_fd``), made first when
    ``create``; never through a symlink."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, dir_fd=dir_fd)
    fd = os.open(path, _DIRECTORY_FLAGS, dir_fd=dir_fd)
    try:
        yield fd
    finally:
        os.close(fd)


def _write_one(root: int, name: str, content: bytes, mode: int) -> None:
    """Write ``content`` as ``name`` below the directory handle ``root``."""
    *parents, base = name.split("/")
    with contextlib.ExitStack() as stack:
        parent = root
        for part in parents:
            parent = stack.enter_context(_opened(part, parent, create=True))
        temporary = f".pysandbox-{secrets.token_hex(8)}.tmp"
        fd = os.open(temporary, _NEW_FILE_FLAGS, mode, dir_fd=parent)
        try:
            with open(fd, "wb", closefd=False) as stream:
                stream.write(content)
            os.replace(temporary, base, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=parent)
            raise
        finally:
            os.close(fd)


def write_files(
    directory: str, files: Mapping[str, bytes], executables: AbstractSet[str] = frozenset()
) -> None:
    """Write each of ``files`` (relative name to content) below ``directory``, creating
    sub-directories as needed, with mode ``0o666`` less the umask, or ``0o777`` less the
    umask for the names in ``executables`` (``Result.executables``).

    :raises OutputDirError: a name is unfit, or a file could not be written (a symlink
        or a file in the way of a directory, a directory in the way of a file, a full
        disk...); the message names the file.  Files before it are written.
    """
    try:
        root = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise OutputDirError(f"cannot open {directory}: {exc.strerror}") from None
    try:
        for name, content in files.items():
            problem = name_problem(name)
            if problem is not None:
                raise OutputDirError(f"refusing the output file name {name!r}: it {problem}")
            try:
                _write_one(root, name, content, 0o777 if name in executables else 0o666)
            except OSError as exc:
                reason = exc.strerror or str(exc)
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    reason += " (a symlink or a file is in the way; symlinks are never followed)"
                raise OutputDirError(f"cannot write {name} in {directory}: {reason}") from None
    finally:
        os.close(root)
