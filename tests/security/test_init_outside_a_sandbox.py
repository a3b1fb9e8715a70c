# SPDX-License-Identifier: MIT
"""Issue 18, item 11: the init never harms the host outside a sandbox.

``pysandbox/_init`` is an executable of the installed package.  Its ``kill(-1, SIGKILL)``
ends the sandbox where pysandbox launched it, but started by hand as root on a host it
killed every process but pid 1.  It must refuse (a message, exit status 2) unless it is
pid 1 of a pid namespace and holds what pysandbox's launch hands it (the lifeline's read
end, a writable report fd).

Never run an init that does not refuse as root in the host's pid namespace, not even to
see it fail: here it runs in the host's pid namespace only as a test uid whose one other
process is a sleeper (all a broken init could kill), and as root only in a pid namespace
of its own made by ``unshare`` (pid 1 without pysandbox's set-up), after the shell that
starts it has checked it is pid 1 there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.callers import processes_of

import pysandbox

#: How the init says no, and with what status.
REFUSAL = "pysandbox-init: refusing to run"
REFUSED = 2


def _installed_init() -> Path:
    return Path(pysandbox.__file__).parent / "_init"


@pytest.fixture
def lone_uid(_nonroot_uids: range) -> int:
    """A test uid that has no process (the last of this test process's block)."""
    uid = _nonroot_uids[-1]
    assert processes_of(range(uid, uid + 1)) == []
    return uid


@pytest.fixture
def sleeper(lone_uid: int) -> Iterator[subprocess.Popen[bytes]]:
    """The only process of ``lone_uid``: what a ``kill(-1)`` of that uid would end."""
    with subprocess.Popen(
        ["sleep", "300"], user=lone_uid, group=lone_uid, extra_groups=[], cwd="/"
    ) as process:
        try:
            yield process
        finally:
            process.kill()


def _run_as(
    uid: int, argv: list[str], pass_fds: tuple[int, ...] = ()
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        user=uid,
        group=uid,
        extra_groups=[],
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
        pass_fds=pass_fds,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_started_by_hand_on_the_host_it_refuses_and_kills_nothing(
    unprivileged_pysandbox: tuple[str, Path],
    lone_uid: int,
    sleeper: subprocess.Popen[bytes],
) -> None:
    """Not pid 1: refused before anything, even with pipes where the launch puts them.
    Its program would kill the sleeper, and so would the init's ``kill(-1)``."""
    _, shared = unprivileged_pysandbox
    init = str(shared / "pysandbox" / "_init")
    program = ["--", "/bin/kill", "-KILL", str(sleeper.pid)]
    lifeline_read, lifeline_write = os.pipe()
    report_read, report_write = os.pipe()
    try:
        bare = _run_as(lone_uid, [init, *program])
        launch_like = _run_as(
            lone_uid,
            [init, "--lifeline-fd", str(lifeline_read), "--report-fd", str(report_write), *program],
            pass_fds=(lifeline_read, report_write),
        )
    finally:
        for fd in (lifeline_read, lifeline_write, report_read, report_write):
            os.close(fd)
    for out in (bare, launch_like):
        assert out.returncode == REFUSED, out
        assert REFUSAL in out.stderr and "not pid 1" in out.stderr, out.stderr
    assert sleeper.poll() is None, "the init killed a process of its uid"
    assert processes_of(range(lone_uid, lone_uid + 1)) == [sleeper.pid]


#: Run by ``unshare --pid --fork --mount-proc``: the shell checks that it is pid 1 of the
#: new pid namespace (else nothing runs), starts a sleeper there and becomes the init,
#: whose program would print ``ran``.
AS_PID_1 = """
[ "$$" = 1 ] || { echo "not pid 1 but $$" >&2; exit 99; }
sleep 300 &
exec "$@" -- /bin/echo ran
"""


@pytest.mark.parametrize(
    "options",
    [
        [],
        ["--lifeline-fd", "0", "--report-fd", "1"],
        ["--lifeline-fd", "3", "--report-fd", "4"],
    ],
    ids=["bare", "standard-streams", "closed-fds"],
)
def test_pid_1_without_pysandboxs_set_up_refuses(options: list[str]) -> None:
    """pid 1 of a pid namespace of its own, as a container's entrypoint is, but without
    the fds pysandbox's launch hands it: refused, its program never started."""
    if os.geteuid() != 0:
        pytest.skip("unshare --pid needs root")
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("util-linux's unshare is not installed")
    shell = ["/bin/sh", "-c", AS_PID_1, "sh", str(_installed_init()), *options]
    out = subprocess.run(
        [unshare, "--pid", "--fork", "--mount-proc", *shell],
        stdin=subprocess.PIPE,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert out.returncode == REFUSED, out
    assert REFUSAL in out.stderr and "ran" not in out.stdout, out


def test_the_init_and_the_copy_client_are_the_only_programs_the_package_installs() -> None:
    """So the init's refusal and the copy client's (below) cover every helper: the rest
    is Python and the extension module (loaded by the interpreter, never run)."""
    package = Path(pysandbox.__file__).parent
    programs = {
        path.name
        for path in package.iterdir()
        if path.is_file() and os.access(path, os.X_OK) and not path.name.endswith(".so")
    }
    assert programs == {"_init", "_copy"}


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--control-fd", "0", "--status-fd", "1", "--forward", "0", "--", "--keep", "0"],
        ["--template", "--", "/bin/true"],
        ["--template", "--userns-fd", "0", "--", "/bin/true"],
    ],
    ids=["bare", "no-template-socket", "no-user-namespace", "not-a-user-namespace"],
)
def test_the_copy_client_started_by_hand_does_nothing(argv: list[str], lone_uid: int) -> None:
    """``pysandbox/_copy`` (``src/copy_client.c``) started by hand, as root and as a
    uid with nothing else, without the template's control socket or a user namespace
    from the launch: it says why and exits 1, having run nothing."""
    client = Path(pysandbox.__file__).parent / "_copy"
    for user in (None, lone_uid):
        out = subprocess.run(
            [str(client), *argv],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            user=user,
            timeout=10,
            check=False,
        )
        assert out.returncode == 1 and out.stderr.startswith("pysandbox-copy: "), out
        assert out.stdout == "", out
