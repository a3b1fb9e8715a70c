# SPDX-License-Identifier: MIT
"""A fault of the whole process or host (out of descriptors, out of memory) gets the
same words and the same fix wherever it strikes first: the cgroup's files, the code
file, the spawn.  Since the host facts became lazy, the first place to meet ``EMFILE``
can be a cgroup group's open, which named the cgroup set-up as the fix."""

from __future__ import annotations

import errno
import os

import pytest

from pysandbox._cgroups.base import failure
from pysandbox._cgroups.mounts import Hierarchy
from pysandbox._launch.failures import spawn_failure
from pysandbox._model.errors import PROCESS_WIDE_FIXES, errno_text

HIERARCHY = Hierarchy(version=2, mountpoint="/sys/fs/cgroup", dev=0, controllers=frozenset())


@pytest.mark.no_bwrap
@pytest.mark.parametrize("number", sorted(PROCESS_WIDE_FIXES))
def test_every_place_names_the_same_fix_for_a_process_wide_fault(number: int) -> None:
    exc = OSError(number, os.strerror(number))
    words = errno_text(exc)
    cgroup = str(failure("open the cgroup", "/sys/fs/cgroup/memory", exc, HIERARCHY))
    spawn = str(spawn_failure(exc))
    for message in (cgroup, spawn):
        assert words in message and PROCESS_WIDE_FIXES[number] in message, message
        assert "check the cgroup setup" not in message, message


@pytest.mark.no_bwrap
def test_out_of_descriptors_names_the_errno_and_rlimit_nofile() -> None:
    exc = OSError(errno.EMFILE, os.strerror(errno.EMFILE))
    message = str(failure("open the cgroup", "/sys/fs/cgroup/memory", exc, HIERARCHY))
    assert "Too many open files (EMFILE)" in message and "RLIMIT_NOFILE" in message
