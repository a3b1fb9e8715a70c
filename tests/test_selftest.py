"""selftest() really attacks a sandbox here and reports every protection."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pysandbox import Check, SelftestReport, selftest


def test_every_protection_holds_on_this_host() -> None:
    report = selftest()
    names = [check.name for check in report.checks]
    assert names == [
        "namespaces (pid, net, mount, ipc, uts)",
        "unprivileged identity",
        "seccomp filter",
        "process cap",
        "total memory cap",
        "CPU time of the whole tree",
        "network",
    ]
    if os.geteuid() == 0:
        assert report, str(report)
        assert "cgroup" in report.checks[3].detail
        assert "cgroup CPU counter" in report.checks[5].detail
    else:
        assert all(check.ok for check in report.checks[:4]), str(report)


def test_command_line_prints_the_report_and_exits_by_it() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pysandbox", "--selftest"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "[yes] seccomp filter" in out.stdout
    assert out.returncode == (0 if "[NO " not in out.stdout else 1)


@pytest.mark.no_bwrap
def test_a_failed_check_shows_its_fix_and_makes_the_report_false() -> None:
    report = SelftestReport((Check("a", True, "fine"), Check("b", False, "broken", "do this")))
    assert not report
    assert str(report).splitlines() == ["[yes] a: fine", "[NO ] b: broken", "       fix: do this"]


@pytest.mark.no_bwrap
def test_unknown_command_line_arguments_are_refused() -> None:
    from pysandbox.__main__ import main

    assert main(["--bogus"]) == 2
