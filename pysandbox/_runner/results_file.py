# SPDX-License-Identifier: MIT
"""``ResultsFile``: the JSON-lines file a batch appends one outcome line to per job, and
what an earlier run of the same batch left in it (to resume).

A line is written whole, with one ``write`` on a file opened for appending, so an
interrupted batch leaves whole lines, except perhaps a partial last one if the process
was killed mid-write; opening the file again cuts that partial line off.  An exclusive
``flock`` keeps two batches from appending to the same file at once.
"""

from __future__ import annotations

import collections
import fcntl
import json
import os
from collections.abc import Iterator
from typing import Any

from .._model.untrusted import loads
from .outcome import Outcome

__all__ = ["ResultsFile", "ResultsFileError"]

#: How every outcome line starts (``Outcome.to_dict`` puts the id first).
_LINE_START = b'{"id": '
#: Bytes read at a time while looking for the end of the last whole line.
_CHUNK = 1 << 16


class ResultsFileError(Exception):
    """The results file cannot be used: unreadable, not a batch's results, or locked by
    another batch.  The message names the file and what to do."""


def _whole_lines_end(fd: int) -> int:
    """The offset just past the last newline of the file open at ``fd`` (0 without one)."""
    end = os.fstat(fd).st_size
    while end > 0:
        start = max(0, end - _CHUNK)
        chunk = os.pread(fd, end - start, start)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        end = start
    return 0


def _result_ids(path: str, size: int) -> Iterator[tuple[str | int, object]]:
    """The id and ``error_type`` (None for a result) of each line in the first ``size``
    bytes of ``path``; ``ResultsFileError`` for a line that is not an outcome."""
    with open(path, "rb") as stream:
        number = 0
        while stream.tell() < size:
            line = stream.readline()
            number += 1
            if not line.strip():
                continue
            data: Any
            try:
                data = loads(line, max_bytes=None)
            except ValueError:  # not JSON, or hostile: too deep, a number out of range
                data = None
            job_id = data.get("id") if isinstance(data, dict) else None
            if not isinstance(job_id, (str, int)) or isinstance(job_id, bool):
                raise ResultsFileError(
                    f"{path} line {number} is not a batch result (a JSON object with an id); "
                    "give --out a new file or the results of this batch"
                )
            yield job_id, data.get("error_type")


class ResultsFile:
    """A batch's results file, open for appending outcome lines.

    ``done`` holds the ids of the jobs that have an outcome line (an earlier run's), and
    ``duplicates`` how many outcomes of ``error_type`` ``duplicate_error`` (a line that
    repeated an earlier line's id) each id has, so a rerun writes none of them again.
    Only ids are kept, never the results.
    """

    def __init__(self, path: str, *, duplicate_error: str) -> None:
        """Open (or create) ``path``, lock it, cut off a partial last line, and read the
        ids already there.  Raises ``ResultsFileError`` naming the path and the fix."""
        self.path = path
        self.done: set[str | int] = set()
        self.duplicates: collections.Counter[str | int] = collections.Counter()
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            raise ResultsFileError(f"cannot open {path}: {exc.strerror}") from None
        try:
            self._lock()
            end = _whole_lines_end(self._fd)
            for job_id, error_type in _result_ids(path, end):
                if error_type == duplicate_error:
                    self.duplicates[job_id] += 1
                else:
                    self.done.add(job_id)
            #: Bytes of a partial last line cut off (an interrupted write), 0 if none.
            self.repaired = os.fstat(self._fd).st_size - end
            if self.repaired:
                self._cut_partial_line(end)
        except OSError as exc:
            os.close(self._fd)
            raise ResultsFileError(f"cannot read {path}: {exc.strerror}") from None
        except BaseException:
            os.close(self._fd)
            raise

    def _lock(self) -> None:
        """Take the file's exclusive lock, or ``ResultsFileError`` if a batch holds it."""
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ResultsFileError(
                f"{self.path} is being written by another batch; wait for it or choose "
                "another --out"
            ) from None

    def _cut_partial_line(self, end: int) -> None:
        """Cut the file at ``end``, where the partial line an interrupted write left
        starts; ``ResultsFileError`` if what follows ``end`` is not the start of an
        outcome line (a file that is not a batch's results is never cut)."""
        if os.pread(self._fd, len(_LINE_START), end) != _LINE_START:
            raise ResultsFileError(
                f"{self.path} ends with a line that is not a batch result; give --out a "
                "new file or the results of this batch"
            )
        os.ftruncate(self._fd, end)

    def append(self, outcome: Outcome) -> None:
        """Write ``outcome`` as one JSON line, at once (``OSError`` if the disk refuses)."""
        line = (json.dumps(outcome.to_dict()) + "\n").encode("utf-8")
        written = os.write(self._fd, line)
        while written < len(line):
            written += os.write(self._fd, line[written:])

    def close(self) -> None:
        """Close the file (which releases its lock).  Idempotent."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> ResultsFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
