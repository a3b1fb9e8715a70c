# SPDX-License-Identifier: MIT
"""The submission a grader grades: ``Submission``, the student's directory read as
hostile, and the session-scoped ``submission`` fixture that finds it from
``--submission DIR`` or the ini option ``sandbox_submission``.

A file is read only when it is a regular file inside the directory, through a symbolic
link or not, opened without following a link at its last step and checked again once
open (a file swapped for a link or a FIFO in between is refused, never followed or
waited on); a read and a ``files()`` call are capped in bytes, a walk in entries.  What
the submission gets wrong (a missing file, a link out, a device, too much) fails the test
that asked, with a message for the student and no traceback, never the whole grader.
Imports pytest: the plugin's alone.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from pathlib import Path, PurePosixPath

import pytest

__all__ = ["DEFAULT_MAX_BYTES", "MAX_ENTRIES", "Submission", "submission", "submission_directory"]

#: The most bytes one ``read()`` or ``files()`` call returns, unless the grader says.
DEFAULT_MAX_BYTES = 64 * 2**20
#: The most files and directories one ``files()`` call walks.
MAX_ENTRIES = 10_000
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_MAGIC = frozenset("*?[")


class _Refused(Exception):
    """The submission's fault, said for the student: the test fails with it."""


def _relative(name: str, argument: str) -> PurePosixPath:
    """``name`` as a path inside the submission; ``TypeError``/``ValueError`` naming
    ``argument`` for what no submission could satisfy (the grader's mistake)."""
    if not isinstance(name, str):
        raise TypeError(f"{argument} must be a str, got {type(name).__name__}")
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts or "\0" in name:
        raise ValueError(f"{argument} must be a relative path inside the submission, got {name!r}")
    return path


def _matches(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    """Whether a relative path's parts match a pattern's: each part by ``fnmatch`` (so
    ``*`` stays within one directory), ``**`` for any number of directories."""
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_matches(parts[skip:], pattern[1:]) for skip in range(len(parts) + 1))
    return (
        bool(parts)
        and fnmatch.fnmatchcase(parts[0], pattern[0])
        and _matches(parts[1:], pattern[1:])
    )


class Submission:
    """A student's submission: the files of ``directory``, read as hostile.

    :param directory: the submission's directory (made absolute, links resolved).
    :param max_bytes: the most bytes one ``read()`` or ``files()`` call returns.
    :raises ValueError: ``directory`` is not a directory, or ``max_bytes`` is not positive.
    """

    def __init__(self, directory: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES):
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int):
            raise TypeError(f"max_bytes must be an int, got {type(max_bytes).__name__}")
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be greater than 0, got {max_bytes}")
        resolved = Path(os.path.realpath(os.fspath(directory)))
        if not resolved.is_dir():
            raise ValueError(f"directory must be a directory, got {os.fspath(directory)!r}")
        self._directory = resolved
        self._max_bytes = max_bytes

    def __repr__(self) -> str:
        return f"Submission({str(self._directory)!r})"

    @property
    def directory(self) -> Path:
        """The submission's directory, absolute, its links resolved."""
        return self._directory

    def _inside(self, real: str) -> bool:
        return Path(real) == self._directory or self._directory in Path(real).parents

    def _load(self, name: str, relative: PurePosixPath, budget: int) -> bytes | None:
        """The bytes of the regular file ``relative``, or None when there is none;
        ``_Refused`` for a link out, anything but a regular file, more than ``budget``."""
        real = os.path.realpath(self._directory / relative)
        if not os.path.lexists(self._directory / relative):
            return None
        if not self._inside(real):
            raise _Refused(f"{name} is a symbolic link out of the submission")
        try:
            before = os.lstat(real)
            if not stat.S_ISREG(before.st_mode):
                raise _Refused(f"{name} is not a regular file")
            fd = os.open(real, _OPEN_FLAGS)
        except FileNotFoundError:
            return None  # a link to nothing, inside
        except OSError as exc:
            raise _Refused(f"{name} cannot be read: {exc.strerror}") from None
        try:
            after = os.fstat(fd)
            if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
                raise _Refused(f"{name} changed while it was read")
            chunks, size = [], 0
            while size <= budget:
                chunk = os.read(fd, min(2**20, budget + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        finally:
            os.close(fd)
        if size > budget:
            raise _Refused(
                f"{name}: more than the {self._max_bytes} bytes the grader reads at once"
            )
        return b"".join(chunks)

    def exists(self, name: str) -> bool:
        """Whether ``read(name)`` would return the file: a regular file inside the
        submission (a missing file, a link out or a device: False)."""
        relative = _relative(name, "name")
        try:
            return self._load(name, relative, self._max_bytes) is not None
        except _Refused:
            return False

    def read(self, name: str) -> bytes:
        """The bytes of the submission's file ``name`` (a path relative to the
        directory).  A missing file, a link out of the submission, anything but a
        regular file, or more than ``max_bytes``: the test fails saying so.

        :raises ValueError: ``name`` is absolute, empty or goes up with ``..``.
        """
        data = self._load_or_fail(name, _relative(name, "name"), self._max_bytes)
        if data is None:
            pytest.fail(f"the submission has no {name}", pytrace=False)
        return data

    def _load_or_fail(self, name: str, relative: PurePosixPath, budget: int) -> bytes | None:
        """``_load``, a refusal failing the test (outside the ``except``, so that the
        student's message comes alone, not chained to ours)."""
        try:
            return self._load(name, relative, budget)
        except _Refused as exc:
            refusal = str(exc)
        pytest.fail(f"the submission's {refusal}", pytrace=False)

    def _walk(self) -> list[PurePosixPath]:
        """Every file name under the directory, sorted, links to directories not
        entered; the test fails past ``MAX_ENTRIES``."""
        found: list[PurePosixPath] = []
        entries = 0
        for top, directories, files in os.walk(self._directory, followlinks=False):
            directories.sort()
            entries += len(directories) + len(files)
            if entries > MAX_ENTRIES:
                pytest.fail(f"the submission has more than {MAX_ENTRIES} files", pytrace=False)
            base = PurePosixPath(Path(top).relative_to(self._directory).as_posix())
            found.extend(base / name for name in files)
        return sorted(found)

    def files(self, *patterns: str) -> dict[str, bytes]:
        """The submission's files named by ``patterns`` (all of them when none), as
        ``{relative path: bytes}`` for the ``files=`` of a run or a session.  A pattern
        is a path relative to the directory that may hold ``*``, ``?`` and ``[...]``
        (within one directory) and ``**`` (any number of directories); one without them
        names a file that must exist.  Files are refused as ``read()`` refuses them, and
        ``max_bytes`` caps their total.

        :raises ValueError: a pattern is absolute, empty or goes up with ``..``.
        """
        wanted = [_relative(pattern, "patterns") for pattern in patterns or ("**",)]
        exact = [path for path in wanted if not _MAGIC & set(str(path))]
        names = set(exact)
        globs = [path.parts for path in wanted if path not in names]
        if globs:
            names.update(
                path for path in self._walk() if any(_matches(path.parts, g) for g in globs)
            )
        found: dict[str, bytes] = {}
        budget = self._max_bytes
        for path in sorted(names):
            data = self._load_or_fail(str(path), path, budget)
            if data is None:
                if path in exact:
                    pytest.fail(f"the submission has no {path}", pytrace=False)
                continue
            found[str(path)] = data
            budget -= len(data)
        return found


def submission_directory(config: pytest.Config) -> Path | None:
    """The directory ``--submission`` names (from where pytest was started), else the
    ini option ``sandbox_submission`` (from the ini file's directory), else None."""
    option = config.getoption("submission")
    if option:
        return config.invocation_params.dir / str(option)
    ini = str(config.getini("sandbox_submission") or "")
    if ini:
        base = config.inipath.parent if config.inipath is not None else config.rootpath
        return base / ini
    return None


@pytest.fixture(scope="session")
def submission(pytestconfig: pytest.Config) -> Submission:
    """The submission to grade (``--submission DIR``): a test that asks for it without
    one configured fails saying how to give it."""
    directory = submission_directory(pytestconfig)
    if directory is None:
        pytest.fail(
            "no submission to grade: pass --submission DIR (or set the ini option "
            "sandbox_submission)",
            pytrace=False,
        )
    if not directory.is_dir():
        pytest.fail(f"--submission {directory}: not a directory", pytrace=False)
    return Submission(directory)
