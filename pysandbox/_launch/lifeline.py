# SPDX-License-Identifier: MIT
"""The lifeline: how a sandbox learns that its caller died, whoever the caller is.

The caller makes a pipe before it spawns the sandbox.  The read end goes into the
sandbox (one of the C core's ``pass_fds``; bwrap passes it on to pysandbox's init, which
is told its number with ``--lifeline-fd``); the write end stays in the calling process
only and nobody ever writes to it.  When the caller exits, however it exits (``kill -9``,
the OOM killer, ``os._exit``, a worker timeout), the kernel closes the write end, the
init sees end-of-file, kills every process of the sandbox and exits.

A parent-death signal cannot do this: the kernel sends it with the dying parent's
credentials, and bwrap (the init's parent) runs as uid 0 without capabilities for a root
caller, or in another user namespace, so it may not signal the sandbox's uid.  A pipe's
end-of-file needs no permission.

Both ends are ``O_CLOEXEC``: no program the caller starts meanwhile keeps the write end
(which would keep the lifeline from ever breaking), and the C core hands the read end to
bwrap explicitly.  A child the caller forks without exec (``multiprocessing`` with the
fork start method) does inherit the write end: the sandboxes then also wait for that
child to exit.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

__all__ = ["init_options", "lifeline"]


@contextlib.contextmanager
def lifeline() -> Iterator[tuple[int, int]]:
    """A fresh lifeline pipe as ``(read_fd, write_fd)``, both close-on-exec.

    Pass ``read_fd`` to the sandbox and keep ``write_fd``; both are closed when the block
    ends, which is after the C core returned, so after the sandbox is gone.
    """
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
    try:
        yield read_fd, write_fd
    finally:
        os.close(read_fd)
        os.close(write_fd)


def init_options(fd: int) -> list[str]:
    """The init's options for a lifeline whose read end is fd number ``fd`` inside."""
    return ["--lifeline-fd", str(fd)]
