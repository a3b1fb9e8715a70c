# SPDX-License-Identifier: MIT
"""Programs that wait at a gate, and waiting for a condition, for the Runner's tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from support.processes import pids_with_marker
from support.timing import slow

__all__ = [
    "GATE_PATIENCE",
    "alive",
    "gated",
    "running",
    "wait_until",
]


def gated(gate: Path) -> str:
    """Python that waits until the host creates ``gate`` (visible through ``readable``)."""
    return (
        "import os, sys, time\n"
        f"deadline = time.monotonic() + {GATE_PATIENCE}\n"
        f"while not os.path.exists({str(gate)!r}):\n"
        "    if time.monotonic() > deadline: sys.exit(3)\n"
        "    time.sleep(0.01)\n"
        "print('through')\n"
    )


def wait_until(condition: Callable[[], bool], what: str, within: float = slow(10)) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def alive(markers: list[str]) -> set[int]:
    """The indices of ``markers`` that some live process (not bwrap) has in its argv."""
    return {i for i, marker in enumerate(markers) if pids_with_marker(marker, bwrap=False)}


def running(marker: str) -> set[str]:
    """The sandboxed programs (``python`` processes, not bwrap nor the init) with
    ``marker``, by pid."""
    found = set()
    for pid in pids_with_marker(marker, bwrap=False):
        try:
            with open(f"/proc/{pid}/comm") as comm:
                name = comm.read().strip()
        except OSError:
            continue
        if name.startswith("python"):
            found.add(str(pid))
    return found


#: Seconds a gated program waits for its gate before it gives up (exit 3): far longer
#: than any test takes to open it, so a test never depends on it, and a broken test
#: still ends.
GATE_PATIENCE = 60
