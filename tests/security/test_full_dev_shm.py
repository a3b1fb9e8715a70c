# SPDX-License-Identifier: MIT
"""Issue 18, item 9: a full ``/dev/shm`` is a clear error and no leak.

Any local user can fill ``/dev/shm``, where the code files of ``run_python`` and
``eval_in_sandbox`` go first.  Then every call raised a bare ``OSError``, never tried the
documented fallbacks (``$XDG_RUNTIME_DIR``, the temporary directory), and left a
``pysandbox-*`` directory with an empty owner file that no sweep removed.  Each step
(the directory, its owner file, the code file) that fails must make the call try the
next place, having removed what it made; when none works, ``SandboxError`` names them,
the errno and the fix.

The real ``/dev/shm`` of this machine is never filled: each case runs in a mount
namespace of its own (``unshare -m``, private propagation) where a tiny tmpfs is mounted
over ``/dev/shm`` (and over the temporary directory when that must be full too), then
calls the API from the caller's interpreter, as root or dropped to the non-root caller's
uid after mounting, and reports what it got and what was left in both places.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.callers import Caller
from support.timing import cpu

from pysandbox._host import owners
from pysandbox._launch import codefile as _codefile

#: Run as root in the new mount namespace: refuses unless it really is another than the
#: test process's (whose inode number comes first), mounts the tiny tmpfs over /dev/shm,
#: fills it as the case says, runs ``CALLS`` as the caller, and reports, with what is
#: left in both places once that process is gone.
SET_UP = r"""
import json, os, subprocess, sys
outside, case, tmpdir, uid, python, package, calls, cpu = sys.argv[1:9]
uid = int(uid)
if os.stat("/proc/self/ns/mnt").st_ino == int(outside):
    sys.exit("not in a mount namespace of its own: refusing to mount over /dev/shm")


def mount(target, options):
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "pysandbox-test", target], check=True)


def fill(directory, leave=0):
    # Write until the tmpfs is full, then give back `leave` bytes of it.
    path = os.path.join(directory, "filler")
    with open(path, "wb", buffering=0) as filler:
        try:
            while True:
                filler.write(b"x" * 4096)
        except OSError:
            pass
        if leave:
            filler.truncate(os.fstat(filler.fileno()).st_size - leave)


if case == "no-inodes":
    mount("/dev/shm", "size=64k,nr_inodes=2,mode=1777")
    open("/dev/shm/filler", "w").close()
else:
    mount("/dev/shm", "size=64k,mode=1777")
    fill("/dev/shm", leave=4096 if case == "one-page-left" else 0)
if case == "all-full":
    mount(tmpdir, "size=64k,mode=1777")
    fill(tmpdir)


def ours(directory):
    return sorted(name for name in os.listdir(directory) if name.startswith("pysandbox-"))


env = {"PATH": "/usr/bin:/bin", "TMPDIR": tmpdir}
out = subprocess.run(
    [python, "-I", "-c", calls, package, cpu],
    user=uid, group=uid, extra_groups=[], cwd="/", env=env,
    capture_output=True, text=True, timeout=120,
)
print(json.dumps({
    "returncode": out.returncode,
    "stderr": out.stderr[-3000:],
    "calls": json.loads(out.stdout.splitlines()[-1]) if out.returncode == 0 else None,
    "left": {"/dev/shm": ours("/dev/shm"), "tmpdir": ours(tmpdir)},
}))
"""

#: Run as the caller: each API call once, what it returned or raised, and the private
#: directories that exist meanwhile.  Its temporary directory is ``TMPDIR`` whether that
#: has room or not (``tempfile.tempdir``, as an application may set it; else tempfile's
#: own probe would choose ``/tmp`` or the working directory when ``TMPDIR`` is full).
CALLS = r"""
import json, math, os, sys, tempfile
tempfile.tempdir = os.environ["TMPDIR"]
sys.path.insert(0, sys.argv[1])
from pysandbox import Limits, eval_in_sandbox, run_python

CPU = float(sys.argv[2])


def attempt(call):
    try:
        return {"stdout": call()}
    except Exception as exc:
        return {"error": type(exc).__name__, "message": str(exc)}


def ours(directory):
    return sorted(name for name in os.listdir(directory) if name.startswith("pysandbox-"))


report = {
    "eval_in_sandbox": attempt(
        lambda: eval_in_sandbox("print(6 * 7)", cpu_max_time_sec=math.ceil(CPU)).stdout
    ),
    "run_python": attempt(
        lambda: run_python("print(6 * 7)", limits=Limits(cpu_time=CPU)).stdout.decode()
    ),
    "during": {"/dev/shm": ours("/dev/shm"), "tmpdir": ours(os.environ["TMPDIR"])},
}
print(json.dumps(report))
"""


@pytest.fixture
def tmpdir_for(caller: Caller) -> Iterator[Path]:
    """The caller's temporary directory (``TMPDIR``): sticky and world-writable, as
    ``/tmp`` is, and removed after."""
    path = Path(tempfile.mkdtemp(prefix="pysandbox-test-tmpdir-")).resolve()
    try:
        path.chmod(0o1777)
        yield path
    finally:
        shutil.rmtree(path)


def _in_a_mount_namespace(caller: Caller, case: str, tmpdir: Path) -> Any:
    """``SET_UP`` for ``case`` under ``unshare -m`` as root; its report."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs over /dev/shm in a mount namespace needs root")
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("util-linux's unshare is not installed")
    outside = os.stat("/proc/self/ns/mnt").st_ino
    arguments = [str(outside), case, str(tmpdir), str(caller.uid), caller.python]
    arguments += [str(caller.package.parent), CALLS, str(cpu(1))]
    out = subprocess.run(
        [
            unshare,
            "--mount",
            "--propagation",
            "private",
            sys.executable,
            "-I",
            "-c",
            SET_UP,
            *arguments,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.splitlines()[-1])
    assert report["returncode"] == 0, report["stderr"]
    return report


@pytest.mark.parametrize("case", ["full", "one-page-left", "no-inodes"])
def test_a_full_dev_shm_falls_back_to_the_temporary_directory(
    caller: Caller, tmpdir_for: Path, case: str
) -> None:
    """``/dev/shm`` fails at making the directory (no inode), its owner file (full) or
    the code file (one page left, which the owner file takes): the calls run from the
    temporary directory, and nothing of theirs is left in ``/dev/shm``, nor in the
    temporary directory once the caller has exited."""
    report = _in_a_mount_namespace(caller, case, tmpdir_for)
    calls = report["calls"]
    assert calls["eval_in_sandbox"] == {"stdout": "42"}, calls
    assert calls["run_python"] == {"stdout": "42\n"}, calls
    assert calls["during"]["/dev/shm"] == [] and len(calls["during"]["tmpdir"]) == 1, calls
    assert report["left"] == {"/dev/shm": [], "tmpdir": []}, report
    assert list(tmpdir_for.iterdir()) == []


def test_no_place_with_room_is_a_sandbox_error_naming_them(
    caller: Caller, tmpdir_for: Path
) -> None:
    """``/dev/shm`` and the temporary directory both full: ``SandboxError`` naming each
    place, the errno and the fix, for both calls, and nothing left in either."""
    report = _in_a_mount_namespace(caller, "all-full", tmpdir_for)
    calls = report["calls"]
    for name in ("eval_in_sandbox", "run_python"):
        assert calls[name]["error"] == "SandboxError", calls
        message = calls[name]["message"]
        assert "/dev/shm: No space left on device (ENOSPC)" in message, message
        assert f"{tmpdir_for}: No space left on device (ENOSPC)" in message, message
        assert "free space in /dev/shm" in message and "set TMPDIR" in message, message
    assert calls["during"] == {"/dev/shm": [], "tmpdir": []}, calls
    assert report["left"] == {"/dev/shm": [], "tmpdir": []}, report
    assert list(tmpdir_for.iterdir()) == []


def _private_directory(place: Path, owner: bytes | None, age: float) -> Path:
    """A private directory in ``place`` as a caller would have left it: with ``owner`` as
    its owner file (none when None), last changed ``age`` seconds ago."""
    path = Path(tempfile.mkdtemp(prefix="pysandbox-", dir=place))
    if owner is not None:
        (path / "owner").write_bytes(owner)
    stamp = os.stat(path).st_mtime - age
    os.utime(path, (stamp, stamp))
    return path


@pytest.mark.no_bwrap
def test_the_sweep_removes_what_a_dying_caller_left_unowned(tmp_path: Path) -> None:
    """Directories with an empty, unreadable or missing owner file (a caller killed while
    it made one, or an older version on a full ``/dev/shm``) are removed once older than
    making one could take; younger ones may still be in the making, and stay."""
    stale = [
        _private_directory(tmp_path, owner, age=_codefile.UNOWNED_GRACE + 5)
        for owner in (b"", None, b"\xff\xfe", b"not an owner")
    ]
    fresh = [_private_directory(tmp_path, owner, age=0) for owner in (b"", None)]
    alive = _private_directory(
        tmp_path, owners.identity(os.getpid()).encode(), age=_codefile.UNOWNED_GRACE + 5
    )
    _codefile._sweep(str(tmp_path))
    assert [path for path in stale if path.exists()] == []
    assert all(path.exists() for path in [*fresh, alive])


#: Run as the caller: after one call of each kind (which imports and caches what they
#: need), every descriptor this process may have is taken but 0 to 29, so that the calls
#: run out at each of their steps in turn (the code file, the lifeline's pipe, the
#: cgroup's, the memfds...); then each kind once more: what each raised, or "ran".
FEW_DESCRIPTORS = r"""
import json, os, resource, sys
sys.path.insert(0, sys.argv[1])
from pysandbox import eval_in_sandbox, run_python

calls = {"eval_in_sandbox": eval_in_sandbox, "run_python": run_python}
for call in calls.values():
    call("pass")
resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
report = []
for free in range(30):
    held = []
    try:
        while True:
            held.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        pass
    for fd in held[:free]:
        os.close(fd)
    for name, call in calls.items():
        try:
            call("pass")
            report.append([free, name, "ran", ""])
        except Exception as exc:
            report.append([free, name, type(exc).__name__, str(exc)])
    for fd in held[free:]:
        os.close(fd)
print(json.dumps(report))
"""


def test_running_out_of_descriptors_at_any_step_is_named(caller: Caller) -> None:
    """No descriptor left (``EMFILE``), whichever step of a call finds it: every place
    would fail alike, so the call raises ``SandboxError`` naming the errno and the fix,
    never a bare ``OSError``."""
    report = caller.run_script(FEW_DESCRIPTORS, timeout=240)
    failures = [entry for entry in report if entry[2] != "ran"]
    assert failures, "no call ran out of descriptors: the test proves nothing"
    for free, name, kind, message in failures:
        assert kind == "SandboxError", (free, name, kind, message)
        assert "Too many open files (EMFILE)" in message, (free, name, message)
        assert "RLIMIT_NOFILE" in message, (free, name, message)
