# SPDX-License-Identifier: MIT
"""A session for a test: its processes carry a marker the host can find, and none of
them is left once it is closed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from pysandbox import Limits, Session
from support.processes import survivors, unique_marker
from support.timing import PROMPTLY


@contextlib.contextmanager
def watched_session(limits: Limits) -> Iterator[Session]:
    """A ``Session`` with ``limits``, closed and checked gone on the way out."""
    marker = unique_marker()
    with Session(limits=limits, env={"PYSANDBOX_TEST_MARKER": marker}) as opened:
        yield opened
    assert survivors(marker, within=PROMPTLY) == []
