# SPDX-License-Identifier: MIT
"""The exceptions pysandbox raises."""

from __future__ import annotations

import errno

__all__ = ["PROCESS_WIDE_FIXES", "SandboxError", "errno_text", "process_wide_fix"]

#: Host faults that every file, place and group would meet alike (the process or the
#: host is out of something), and what to do about each.  Every place that turns an
#: ``OSError`` into a ``SandboxError`` asks ``process_wide_fix`` first, so the same
#: fault gives the same fix wherever it strikes first.
PROCESS_WIDE_FIXES = {
    errno.EMFILE: "this process is out of file descriptors: close some of its files or "
    "raise its RLIMIT_NOFILE (`ulimit -n`)",
    errno.ENFILE: "the host's table of open files is full: raise fs.file-max",
    errno.ENOMEM: "the host is out of memory: free some",
}


class SandboxError(Exception):
    """The sandbox could not run the code, or the run broke a limit of the reference API.

    Raised with the reference implementation's messages for its cases (``Process timed
    out``, ``I/O buffer size exceeded``, ``Subprocess did not produce valid UTF-8``,
    ``Cannot find the `bwrap` executable``), and with a message naming the cause and
    the fix when the host cannot build a sandbox.  Never means the code ran unsandboxed.
    """


def errno_text(error: OSError) -> str:
    """``"Too many open files (EMFILE)"``: the error's text and its errno's name."""
    name = errno.errorcode.get(error.errno or 0, str(error.errno))
    return f"{error.strerror or error} ({name})"


def process_wide_fix(error: OSError) -> str | None:
    """The fix when ``error`` is a fault of the whole process or host, else None."""
    return PROCESS_WIDE_FIXES.get(error.errno or 0)


# END
