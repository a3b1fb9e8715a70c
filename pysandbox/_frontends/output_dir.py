# SPDX-License-Identifier: MIT
"""Writing a run's output files into a host directory (``pysandbox run --output-dir``).

The names and the modes come from the sandbox, so they are untrusted.  Three rules keep
what lands on the host to what was asked for:

- the directory is one pysandbox creates, or one that is empty when the run starts
  (``prepare``): never a work tree, a home or ``.``, where a file of the program could
  be taken for the host's own (``.git/hooks/post-commit``, ``.bashrc``, ``Makefile``);
- no name with a part starting with a dot (``.git/...``, ``a/.hidden``) unless
  ``dotfiles``, and no name ``_files.name_problem`` refuses (absolute, ``..``);
- no executable bit unless ``keep_modes``: a file the program made executable is written
  with mode ``0o666`` less the umask, like any other.

A refused file is not written and is reported (``Written.refused``), and the files after
it still are.  Every step goes through directory handles with ``O_NOFOLLOW``, starting
from the handle ``prepare`` opened: a symlink planted in the directory is refused, never
followed.  Each file is written to a fresh temporary name and renamed over its target.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet

from .._host import tokens
from .._model.filestream import name_problem
from .._model.record import record

__all__ = ["OutputDir", "OutputDirError", "Written", "prepare", "write_files"]

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class OutputDirError(Exception):
    """An output directory cannot be used, or an output file could not be written; the
    message names the directory or the file and the cause."""


@record(frozen=False)
class OutputDir:
    """A directory made ready by ``prepare``: its path and a handle of it, so the files
    go into the very directory that was checked.  Close it (or use ``with``)."""

    path: str
    fd: int

    def close(self) -> None:
        """Close the handle.  Idempotent."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> OutputDir:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@record
class Written:
    """What ``write_files`` did besides writing: the files it refused, each with why, and
    the executable files it wrote without their executable bit."""

    refused: tuple[tuple[str, str], ...] = ()
    modes_dropped: tuple[str, ...] = ()


def prepare(directory: str) -> OutputDir:
    """Create ``directory`` (and its parents) if it is missing, or check that it is an
    empty directory; open it and check it is writable.  ``OutputDirError`` naming it
    otherwise.  Done before the run, so a typo costs no run."""
    try:
        os.makedirs(directory)
    except FileExistsError:
        pass
    except OSError as exc:
        raise OutputDirError(f"cannot create {directory}: {exc.strerror}") from None
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise OutputDirError(f"cannot open {directory}: {exc.strerror}") from None
    prepared = OutputDir(directory, fd)
    try:
        if os.listdir(fd):
            raise OutputDirError(
                f"{directory} is not empty: give a new or an empty directory (the program's "
                "files must not mix with the host's own)"
            )
        if not os.access(directory, os.W_OK | os.X_OK):
            raise OutputDirError(f"cannot write into {directory}: permission denied")
    except BaseException:
        prepared.close()
        raise
    return prepared


@contextlib.contextmanager
def _opened(path: str, dir_fd: int, *, create: bool) -> Iterator[int]:
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
        temporary = f".pysandbox-{tokens.token_hex(8)}.tmp"
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


def _refusal(name: str, dotfiles: bool) -> str | None:
    """Why ``name`` may not be written, or None."""
    problem = name_problem(name)
    if problem is not None:
        return f"the name {problem}"
    if not dotfiles and any(part.startswith(".") for part in name.split("/")):
        return "a part of its name starts with a dot (--dotfiles, dotfiles=True, writes it)"
    return None


def write_files(
    directory: OutputDir,
    files: Mapping[str, bytes],
    executables: AbstractSet[str] = frozenset(),
    *,
    dotfiles: bool = False,
    keep_modes: bool = False,
) -> Written:
    """Write each of ``files`` (relative name to content) below the ``prepare``-d
    ``directory``, creating sub-directories as needed, with mode ``0o666`` less the
    umask; ``0o777`` less the umask for the names in ``executables``
    (``Result.executables``) only with ``keep_modes``.  A name with a part starting with
    a dot is written only with ``dotfiles``.  Refused files are skipped and returned.

    :raises OutputDirError: a file could not be written (a symlink or a file in the way
        of a directory, a directory in the way of a file, a full disk...); the message
        names the file.  Files before it are written.
    """
    refused: list[tuple[str, str]] = []
    dropped: list[str] = []
    for name, content in files.items():
        reason = _refusal(name, dotfiles)
        if reason is not None:
            refused.append((name, reason))
            continue
        executable = name in executables
        if executable and not keep_modes:
            dropped.append(name)
        try:
            _write_one(directory.fd, name, content, 0o777 if executable and keep_modes else 0o666)
        except OSError as exc:
            cause = exc.strerror or str(exc)
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                cause += " (a symlink or a file is in the way; symlinks are never followed)"
            raise OutputDirError(f"cannot write {name!r} in {directory.path}: {cause}") from None
    return Written(tuple(refused), tuple(dropped))
