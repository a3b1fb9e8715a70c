# SPDX-License-Identifier: MIT
"""One line that says how a session's call ended, as ``verdict.describe`` says it of a
run: what the call did to the session's state, the limit that ended it, the exception
it raised, its times.

``ok, committed, cpu 0.00 s, wall 0.01 s, max rss 9.1 MiB``
``cpu_time_exceeded (limit 0.5 s), rolled back, cpu 0.51 s, wall 0.53 s, ...``
"""

from __future__ import annotations

from .call_result import CallResult
from .escape import escape_report
from .limits import Limits
from .session_result import CellResult
from .status import signal_name
from .verdict import LIMIT_STATUSES, limit_hit, size_text

__all__ = ["describe_cell"]

_OUTCOME_WORDS = {"committed": "committed", "rolled_back": "rolled back", "lost": "session lost"}


def describe_cell(cell: CellResult | CallResult, limits: Limits) -> str:
    """How ``cell`` (a ``Session.run`` or ``Session.call``) ended, in one line, escaped
    for a terminal and a CI log; ``limits`` are the call's."""
    parts = [cell.status.value]
    if cell.status in LIMIT_STATUSES:
        parts[0] += limit_hit(cell, limits)
    if cell.processes_exceeded:
        parts.append(f"process limit reached (limit {limits.processes})")
    parts.append(_OUTCOME_WORDS[cell.outcome])
    if isinstance(cell, CallResult) and cell.value_refused:
        parts.append("its value cannot cross")
    elif cell.error is not None:
        parts.append(f"raised {cell.error.type}")
    if isinstance(cell, CellResult) and cell.signal is not None:
        parts.append(f"killed by {signal_name(cell.signal)}")
    elif isinstance(cell, CellResult) and cell.returncode is not None:
        parts.append(f"exit {cell.returncode}")
    parts.append(f"cpu {cell.cpu_time:.2f} s")
    parts.append(f"wall {cell.wall_time:.2f} s")
    parts.append(f"max rss {size_text(cell.max_rss)}")
    return escape_report(", ".join(parts))  # the exception's type is the code's to name
