# SPDX-License-Identifier: MIT
"""``SelftestReport.ok`` is true exactly when every check held, as its truth value and
``pysandbox selftest --json``'s ``"ok"`` are."""

from __future__ import annotations

import pytest

from pysandbox import Check, SelftestReport

pytestmark = pytest.mark.no_bwrap


@pytest.mark.parametrize(
    ("held", "ok"),
    [((True, True), True), ((True, False), False), ((False,), False), ((), True)],
)
def test_ok_is_whether_every_check_held(held: tuple[bool, ...], ok: bool) -> None:
    report = SelftestReport(
        tuple(Check(f"check {i}", value, "seen") for i, value in enumerate(held))
    )
    assert report.ok is ok
    assert bool(report) is ok
