# SPDX-License-Identifier: MIT
"""Issue 18 item 2: a readable path is bound as it was checked.

A local user who controls a component of a readable path swaps it, over and over,
between a real directory and a symlink (to the host's ``/proc``, or to a directory the
sandbox must not see) while calls run.  Checked on ``realpath()`` and bound later by its
name, a call would sometimes bind the other target.  Opened once without following any
symlink and bound from that fd, each call either binds the real directory or raises
``ValueError``/``SandboxError``; the HOST checks what each sandbox listed.  As root and as
a non-root caller.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.callers import Caller
from support.timing import cpu

from pysandbox import Limits, SandboxError, Status

#: renameat2's flag that swaps two names atomically (Linux 3.15).
RENAME_EXCHANGE = 2
AT_FDCWD = -100
#: Calls per test: with a swap every few microseconds, the old check-then-bind-by-name
#: bound the other target within the first few.
CALLS = 40

LIST = """
import json, os, sys
print(json.dumps(sorted(os.listdir(sys.argv[1]))[:20]))
"""


def exchange(libc: ctypes.CDLL, first: Path, second: Path) -> None:
    """Swap the names ``first`` and ``second`` at once (renameat2 RENAME_EXCHANGE)."""
    if libc.renameat2(AT_FDCWD, bytes(first), AT_FDCWD, bytes(second), RENAME_EXCHANGE) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")


@contextlib.contextmanager
def swapping(first: Path, second: Path) -> Iterator[None]:
    """A thread that keeps exchanging ``first`` and ``second`` until the block ends."""
    libc = ctypes.CDLL(None, use_errno=True)
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            exchange(libc, first, second)

    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def real_dir(path: Path) -> None:
    """A world-readable directory ``path`` holding ``real.txt``."""
    path.mkdir(parents=True)
    path.chmod(0o755)
    (path / "real.txt").write_text("real")
    (path / "real.txt").chmod(0o644)


def listings(caller: Caller, readable: str) -> tuple[list[list[str]], list[str]]:
    """What each of ``CALLS`` sandboxes listed at ``readable``, and the errors of the
    calls that refused: pysandbox's when the path changed before it was opened, or
    bubblewrap's when it changed between the open and the bind (bwrap binds the fd's
    path, then compares the mount with the fd and dies when they differ)."""
    seen, refused = [], []
    for _ in range(CALLS):
        try:
            result = caller.run_python(
                LIST,
                args=[readable],
                readable=[readable],
                limits=Limits(wall_time=30, cpu_time=cpu(1)),
            )
        except (ValueError, SandboxError) as exc:
            refused.append(str(exc))
            continue
        if result.status is Status.OK:
            seen.append(json.loads(result.stdout))
        else:
            pytest.fail(f"the listing failed: {result.status} {result.stderr!r}")
    return seen, refused


def test_a_swapped_middle_component_never_binds_the_hosts_proc(
    caller: Caller, world_readable_dir: Path
) -> None:
    """``base/real/proc`` is a real directory while ``real`` is one; swapped with a
    symlink to ``/``, the same path names the host's ``/proc``."""
    base = world_readable_dir
    (base / "real").mkdir()
    (base / "real").chmod(0o755)
    real_dir(base / "real" / "proc")
    (base / "to_root").symlink_to("/")
    readable = str(base / "real" / "proc")
    with swapping(base / "real", base / "to_root"):
        seen, refused = listings(caller, readable)
    assert all(listing == ["real.txt"] for listing in seen), seen
    assert len(seen) + len(refused) == CALLS


def test_a_swapped_last_component_never_binds_the_hosts_proc(
    caller: Caller, world_readable_dir: Path
) -> None:
    """The readable path's own last component is swapped with a symlink to ``/proc``."""
    base = world_readable_dir
    real_dir(base / "real")
    (base / "to_proc").symlink_to("/proc")
    readable = str(base / "real")
    with swapping(base / "real", base / "to_proc"):
        seen, refused = listings(caller, readable)
    assert all(listing == ["real.txt"] for listing in seen), seen
    assert len(seen) + len(refused) == CALLS


def test_an_unswapped_symlink_binds_what_it_leads_to(
    caller: Caller, world_readable_dir: Path
) -> None:
    """Without a swap, a path through a symlink binds every time (resolved once)."""
    real_dir(world_readable_dir / "real")
    (world_readable_dir / "link").symlink_to(world_readable_dir / "real")
    readable = str(world_readable_dir / "link")
    result = caller.run_python(
        LIST, args=[readable], readable=[readable], limits=Limits(cpu_time=cpu(1))
    )
    assert result.status is Status.OK, result.stderr
    assert json.loads(result.stdout) == ["real.txt"]
