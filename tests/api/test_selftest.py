# SPDX-License-Identifier: MIT
"""selftest() really attacks a sandbox here and reports every protection."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.callers import run_unprivileged

from pysandbox import Check, SelftestReport, selftest
from pysandbox._cgroups.probe import probe


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
        "cgroup placement",
        "network",
        "unix sockets",
        "readable paths inert",
        "working directory's inode cap",
        "kernel budgets",
    ]
    if os.geteuid() == 0:
        assert report, str(report)
        assert "cgroup" in report.checks[3].detail
        assert "cgroup CPU counter" in report.checks[5].detail
    elif probe().pids and probe().memory:  # a non-root caller in a delegated cgroup
        # All but the per-uid kernel budgets, which its sandboxes share with it.
        assert all(check.ok for check in report.checks[:-1]), str(report)
        assert not report.checks[-1].ok and "uid of its own" in report.checks[-1].fix
    else:
        assert all(check.ok for check in report.checks[:3]), str(report)
        assert not report.checks[3].ok and "Delegate=yes" in report.checks[3].fix


def test_a_non_root_caller_without_a_delegated_cgroup_is_told_the_fix(
    unprivileged_pysandbox: tuple[str, Path],
) -> None:
    """A non-root caller whose cgroup is not its own (here: the test's, root's) cannot cap
    one sandbox's processes apart from its others, nor their total memory: the report
    says so, and names the unit-file line and the command that fix it."""
    python, shared = unprivileged_pysandbox
    script = f"import sys; sys.path.insert(0, {str(shared)!r})\n" + (
        "from pysandbox import selftest\nprint(selftest())"
    )
    out = run_unprivileged(python, script, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    marks = {line[6:].split(":")[0]: line[:5] for line in lines if line.startswith("[")}
    assert marks == {
        "namespaces (pid, net, mount, ipc, uts)": "[yes]",
        "unprivileged identity": "[yes]",
        "seccomp filter": "[yes]",
        "process cap": "[NO ]",
        "total memory cap": "[NO ]",
        "CPU time of the whole tree": "[NO ]",
        "cgroup placement": "[NO ]",
        "network": "[yes]",
        "unix sockets": "[yes]",
        "readable paths inert": "[yes]",
        "working directory's inode cap": "[yes]",
        "kernel budgets": "[NO ]",
    }, out.stdout
    cap = lines.index(next(line for line in lines if line.startswith("[NO ] process cap")))
    assert "concurrent sandboxes of this uid share one count" in lines[cap]
    fix = lines[cap + 1]
    assert fix.strip().startswith("fix: run as root, or give the caller a delegated cgroup")
    assert "Delegate=yes" in fix and "systemd-run --user --scope -p Delegate=yes" in fix


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
