# SPDX-License-Identifier: MIT
"""The exceptions pysandbox raises."""

from __future__ import annotations

__all__ = ["SandboxError"]


class SandboxError(Exception):
    """The sandbox could not run the code, or the run broke a limit of the reference API.

    Raised with the reference implementation's messages for its cases (``Process timed
    out``, ``I/O buffer size exceeded``, ``Subprocess did not produce valid UTF-8``,
    ``Cannot find the `bwrap` executable``), and with a message naming the cause and
    the fix when the host cannot build a sandbox.  Never means the code ran unsandboxed.
    """


# END
