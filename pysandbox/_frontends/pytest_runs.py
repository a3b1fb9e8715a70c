# SPDX-License-Identifier: MIT
"""What the pytest plugin's fixtures keep of each sandboxed run of a test, and how it
shows in the test's report: a numbered section (the verdict, the limits, the tails of
stdout and stderr) and a ``user_properties`` entry, which JUnit XML carries.

A run whose ``SandboxFailure`` fails the test shows once: the failure's message already
holds its verdict and tails, so its section is left out of that report.

Imported by the plugin only (it imports pytest).
"""

from __future__ import annotations

import threading
from typing import NamedTuple, NoReturn

import pytest

from .._model.call_result import CallResult
from .._model.escape import escape_report
from .._model.limits import Limits
from .._model.result import SandboxFailure, output_tails
from .._model.session_result import CellResult
from .._model.verdict import size_text
from .pytest_report import SECTION_PREFIX

__all__ = [
    "cell_tails",
    "fail_with",
    "record_run",
    "recorded_results",
    "run_sections",
    "shorten",
]

#: How long a title's program or code may be before it is cut.
_TITLE_WIDTH = 60


class _Run(NamedTuple):
    """One run made through a fixture: its number in the test, what ran, how it went."""

    number: int
    what: str
    verdict: str
    limits: Limits
    tails: str
    result: object


_RUNS = pytest.StashKey["list[_Run]"]()
#: The run whose failure failed the test with its verdict and tails in the message.
_SHOWN = pytest.StashKey[object]()
# Runs may end in several threads at once (a test's own thread pool): one number each.
_LOCK = threading.Lock()


def shorten(text: str) -> str:
    """``text`` cut to ``_TITLE_WIDTH`` characters, with ``...`` when it was longer."""
    return text if len(text) <= _TITLE_WIDTH else text[: _TITLE_WIDTH - 3] + "..."


def record_run(
    item: pytest.Item, what: str, verdict: str, limits: Limits, tails: str, result: object
) -> None:
    """Number the run ``result`` of ``item``, keep it for the report, and add its
    ``verdict`` to the test's ``user_properties``."""
    with _LOCK:
        runs = item.stash.setdefault(_RUNS, [])
        entry = _Run(len(runs) + 1, what, verdict, limits, tails, result)
        runs.append(entry)
        item.user_properties.append((f"{SECTION_PREFIX} {entry.number}", f"{verdict}: {what}"))


def recorded_results(item: pytest.Item) -> tuple[object, ...]:
    """The results recorded for ``item`` so far, in the order they ended."""
    return tuple(entry.result for entry in item.stash.get(_RUNS, []))


def fail_with(item: pytest.Item, message: str, result: object) -> NoReturn:
    """Fail ``item`` with ``message``, which holds the verdict and tails of its run
    ``result`` (None: of no run of this test): that run's section is left out."""
    item.stash[_SHOWN] = result
    pytest.fail(message, pytrace=False)


def cell_tails(cell: CellResult | CallResult) -> str:
    """The tails of a session call's stdout and stderr, and the traceback of what it
    raised."""
    trace = f"\n{escape_report(cell.error.traceback)}" if cell.error else ""
    return output_tails(cell) + trace


def _section(entry: _Run) -> tuple[str, str]:
    limits = entry.limits
    text = (
        f"{entry.verdict}\n"
        f"limits: cpu {limits.cpu_time:g} s, wall {limits.wall_time:g} s, "
        f"memory {size_text(limits.memory)}, processes {limits.processes}\n"
        f"{entry.tails}\n"
    )
    return f"{SECTION_PREFIX} {entry.number}: {entry.what}", text


def run_sections(
    item: pytest.Item, failure: BaseException | None, last: bool
) -> list[tuple[str, str]]:
    """The report sections of ``item``'s runs so far, but the one whose failure failed
    the test (``failure``'s, or ``fail_with``'s: the message shows it, in this phase's
    report and the later ones); forgotten when ``last``."""
    runs = item.stash.get(_RUNS, [])
    if isinstance(failure, SandboxFailure):
        item.stash[_SHOWN] = failure.result  # the teardown's report leaves it out too
    shown = item.stash.get(_SHOWN, None)
    sections = [_section(entry) for entry in runs if shown is None or entry.result is not shown]
    if last:
        item.stash[_RUNS] = []
        item.stash[_SHOWN] = None
    return sections
