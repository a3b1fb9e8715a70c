# SPDX-License-Identifier: MIT
"""Sandboxed code never runs as host root, and a non-root caller works too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.callers import run_unprivileged

from pysandbox import eval_in_sandbox

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the caller is not root here")
NOBODY = 65534


@needs_root
def test_root_callers_code_is_unprivileged_on_the_host() -> None:
    code = """
import os
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines())
print(os.getuid(), os.geteuid(), os.getgid(), os.getgroups())
print([status[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")])
print(status["NoNewPrivs"].strip())
"""
    ids, caps, no_new_privs = eval_in_sandbox(code).stdout.splitlines()
    uid, euid, gid, groups = ids.split(" ", 3)
    assert "0" not in (uid, euid, gid)
    assert groups == "[]"
    assert set(eval(caps)) == {"0000000000000000"}
    assert no_new_privs == "1"


@needs_root
@pytest.mark.parametrize("device", ["/dev/null", "/dev/urandom", "/dev/zero"])
def test_host_device_nodes_cannot_be_changed(device: str) -> None:
    before = os.stat(device)
    code = f"""
import os
for attempt in (lambda: os.chmod({device!r}, 0o600), lambda: os.chown({device!r}, 1, 1)):
    try:
        attempt()
        print("changed")
    except OSError as exc:
        print(exc.errno)
"""
    assert eval_in_sandbox(code).stdout.splitlines() == ["1", "1"]  # EPERM twice
    after = os.stat(device)
    assert (after.st_mode, after.st_uid, after.st_gid) == (
        before.st_mode,
        before.st_uid,
        before.st_gid,
    )


def test_unprivileged_caller_gets_the_same_sandbox(
    unprivileged_pysandbox: tuple[str, Path],
) -> None:
    """Drop to nobody in a subprocess (root is needed only to get there) and run there."""
    python, shared = unprivileged_pysandbox
    driver = f"""
import os, sys
sys.path.insert(0, {str(shared)!r})
from pysandbox import eval_in_sandbox
result = eval_in_sandbox('''
import os
print(os.getuid())
try:
    open("/home/x", "w")
except OSError as exc:
    print(exc.errno)
import sys; sys.exit(7)
''')
print(os.getuid(), result.returncode, result.stdout.split(), sep=";")
"""
    out = run_unprivileged(python, driver, uid=NOBODY)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"{NOBODY};7;['{NOBODY}', '30']"
