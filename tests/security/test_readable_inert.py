# SPDX-License-Identifier: MIT
"""Issue 18 item 1: nothing of the host is reachable through a ``readable`` path.

A read-only bind refuses writes to regular files, but not ``connect()`` to a unix socket
nor ``open(O_WRONLY)`` of a FIFO below it (a caller's tmux socket ran a command on the
host).  Two mechanisms close it: the syscall filter leaves the sandbox no unix socket that
can address a path (``socket(AF_UNIX)`` and datagram pairs refused with ``EACCES``; stream
and seqpacket pairs are born connected), and the init puts the program in a Landlock
domain that may write only beneath the sandbox's own places, so a host FIFO cannot be
opened for writing.

The host sets a trap in a readable directory: a stream, a seqpacket and a datagram
unix socket, world-writable, and a FIFO with a reader, each once before the call and
once after the call started (``late``, made when the sandbox's program exists).  The
sandboxed code tries everything on both; the HOST checks that no listener accepted a
connection, no datagram arrived and the FIFO's reader got nothing.  Through ``run``,
``run_python``, ``Job.readable``, the command line's ``--readable`` and the notebook
magic's ``--readable``, as root and as a non-root caller.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.callers import Caller
from support.processes import pids_with_marker, unique_marker
from support.timing import ATTEMPT_SOURCE, cpu, slow

from pysandbox import Limits, Result, Status

#: The sandboxed attack: ``python -c ATTACK TRAP``; waits until the host made the late
#: objects (``late/ready``), tries each object, and prints a JSON report.
ATTACK = (
    r"""
import contextlib, errno, json, os, socket, sys, time
trap = sys.argv[1]
print("started", flush=True)
deadline = time.monotonic() + 60
while not os.path.exists(trap + "/late/ready") and time.monotonic() < deadline:
    time.sleep(0.02)
report = {}
"""
    + ATTEMPT_SOURCE
    + r"""
def write_fifo(path, flags):
    fd = os.open(path, flags | os.O_NONBLOCK)
    os.write(fd, b"escaped")
    os.close(fd)

def connect(path, kind):
    with socket.socket(socket.AF_UNIX, kind) as sock:
        sock.connect(path)
        sock.send(b"escaped")

def datagram(path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"escaped", path)

def drained(sock):
    sock.setblocking(False)
    count = 0
    with contextlib.suppress(BlockingIOError):
        while sock.recv(100):
            count += 1
    return count

for when in ("early", "late"):
    here = trap + "/" + when
    attempt(when + " fifo O_WRONLY", lambda: write_fifo(here + "/fifo", os.O_WRONLY))
    attempt(when + " fifo O_RDWR", lambda: write_fifo(here + "/fifo", os.O_RDWR))
    attempt(when + " stream connect", lambda: connect(here + "/stream", socket.SOCK_STREAM))
    attempt(when + " seqpacket connect",
            lambda: connect(here + "/seqpacket", socket.SOCK_SEQPACKET))
    attempt(when + " dgram sendto", lambda: datagram(here + "/dgram"))
    for kind in ("stream", "seqpacket"):
        mine, peer = socket.socketpair(socket.AF_UNIX, getattr(socket, "SOCK_" + kind.upper()))
        key = when + " " + kind + " pair "
        attempt(key + "connect", lambda: mine.connect(here + "/" + kind))
        attempt(key + "sendto", lambda: mine.sendto(b"escaped", here + "/dgram"))
        attempt(key + "sendmsg", lambda: mine.sendmsg([b"escaped"], [], 0, here + "/dgram"))
        report[key + "peer got"] = drained(peer)
        mine.close()
        peer.close()
    attempt(when + " dgram pair", lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM))
    attempt(when + " raw pair", lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_RAW))
print(json.dumps(report), flush=True)
"""
)


def expected_report() -> dict[str, object]:
    """What the attack must see: the host's objects refused, the pairs connected to each
    other only (a seqpacket pair ignores the address and sends to its own peer)."""
    report: dict[str, object] = {}
    for when in ("early", "late"):
        report |= {
            f"{when} fifo O_WRONLY": "EACCES",
            f"{when} fifo O_RDWR": "EACCES",
            f"{when} stream connect": "EACCES",
            f"{when} seqpacket connect": "EACCES",
            f"{when} dgram sendto": "EACCES",
            f"{when} stream pair connect": "EISCONN",
            f"{when} stream pair sendto": "EISCONN",
            f"{when} stream pair sendmsg": "EISCONN",
            f"{when} stream pair peer got": 0,
            f"{when} seqpacket pair connect": "EISCONN",
            f"{when} seqpacket pair sendto": "done",
            f"{when} seqpacket pair sendmsg": "done",
            f"{when} seqpacket pair peer got": 2,
            f"{when} dgram pair": "EACCES",
            f"{when} raw pair": "EACCES",
        }
    return report


class Trap:
    """A world-readable directory with the host's live objects, early and late."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.listeners: list[tuple[str, socket.socket]] = []
        self.fifo_readers: list[tuple[str, int]] = []
        for when in ("early", "late"):
            (root / when).mkdir()
            (root / when).chmod(0o755)
        self._make("early")
        self._late = threading.Lock()
        self.late_made = False

    def _make(self, when: str) -> None:
        place = self.root / when
        for kind, sock_type in (
            ("stream", socket.SOCK_STREAM),
            ("seqpacket", socket.SOCK_SEQPACKET),
            ("dgram", socket.SOCK_DGRAM),
        ):
            sock = socket.socket(socket.AF_UNIX, sock_type)
            sock.bind(str(place / kind))
            if sock_type != socket.SOCK_DGRAM:
                sock.listen(16)
            sock.setblocking(False)
            os.chmod(place / kind, 0o777)  # anyone may connect: only the sandbox stops it
            self.listeners.append((f"{when} {kind}", sock))
        os.mkfifo(place / "fifo", 0o666)
        os.chmod(place / "fifo", 0o666)
        reader = os.open(place / "fifo", os.O_RDONLY | os.O_NONBLOCK)
        self.fifo_readers.append((f"{when} fifo", reader))

    def make_late(self) -> None:
        """Make the late objects, then ``late/ready`` (what the attack waits for)."""
        with self._late:
            if self.late_made:
                return
            self._make("late")
            ready = self.root / "late" / "ready"
            ready.write_text("")
            ready.chmod(0o644)
            self.late_made = True

    def make_late_when_running(self, marker: str) -> threading.Thread:
        """A thread that makes the late objects once a process with ``marker`` in its
        command line (the sandbox's) exists."""

        def watch() -> None:
            deadline = time.monotonic() + slow(20)
            while not pids_with_marker(marker) and time.monotonic() < deadline:
                time.sleep(0.01)
            self.make_late()

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        return thread

    def reached(self) -> list[str]:
        """What of the host's objects the sandbox reached: a connection accepted, a
        datagram or bytes received."""
        seen = []
        for name, sock in self.listeners:
            with contextlib.suppress(BlockingIOError):
                if sock.type == socket.SOCK_DGRAM:
                    seen.append(f"{name} received {sock.recv(100)!r}")
                else:
                    sock.accept()[0].close()
                    seen.append(f"{name} accepted a connection")
        for name, fd in self.fifo_readers:
            with contextlib.suppress(BlockingIOError):
                if data := os.read(fd, 100):
                    seen.append(f"{name} read {data!r}")
        return seen

    def close(self) -> None:
        for _, sock in self.listeners:
            sock.close()
        for _, fd in self.fifo_readers:
            os.close(fd)


@pytest.fixture
def trap(world_readable_dir: Path) -> Iterator[Trap]:
    made = Trap(world_readable_dir)
    try:
        yield made
    finally:
        made.close()


def report_of(result: Result) -> dict[str, object]:
    assert result.status is Status.OK, (result.status, result.stdout[-2000:], result.stderr)
    report = json.loads(result.stdout.decode().strip().splitlines()[-1])
    assert isinstance(report, dict)
    return report


def late_on_start(trap: Trap) -> object:
    """A stdin callback that makes the late objects once the program says it started."""

    def callback(chunk: bytes) -> bytes | None:
        if b"started" in chunk:
            trap.make_late()
            return None
        return b""

    return callback


LIMITS = Limits(wall_time=60, cpu_time=cpu(20))


def test_run_reaches_no_host_socket_or_fifo(caller: Caller, trap: Trap) -> None:
    result = caller.run(
        [caller.python, "-c", ATTACK, str(trap.root)],
        readable=[str(trap.root)],
        stdin=late_on_start(trap),
        limits=LIMITS,
    )
    assert trap.late_made
    report = report_of(result)
    assert trap.reached() == []
    assert report == expected_report()


def test_run_python_reaches_no_host_socket_or_fifo(caller: Caller, trap: Trap) -> None:
    result = caller.run_python(
        ATTACK,
        args=[str(trap.root)],
        readable=[str(trap.root)],
        stdin=late_on_start(trap),
        limits=LIMITS,
    )
    assert trap.late_made
    report = report_of(result)
    assert trap.reached() == []
    assert report == expected_report()


#: A Job through a Runner (``Job.readable``), as the calling process of ``caller``.
JOB = """
import json, sys
sys.path.insert(0, sys.argv[1])
from pysandbox import Job, Limits, Runner
trap, attack, marker, budget = sys.argv[2:6]
job = Job(argv=[sys.executable, "-c", attack, trap, marker], readable=[trap],
          limits=Limits(wall_time=60, cpu_time=float(budget)))
with Runner() as runner:
    outcome = runner.run_job(job)
result = outcome.result
print(json.dumps({"error": outcome.error, "stdout": result and result.stdout.decode()}))
"""


def as_caller(caller: Caller, argv: list[str]) -> subprocess.Popen[str]:
    """``argv`` as the process of ``caller`` (its uid, its interpreter and package)."""
    # Only a caller of another uid needs the switch (a non-root test process may not
    # setgroups, so its own in-process caller runs as it is).
    same = caller.uid == os.geteuid()
    ids = {} if same else {"user": caller.uid, "group": caller.uid, "extra_groups": []}
    return subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd="/",
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        **ids,  # type: ignore[arg-type]
    )


def test_job_readable_reaches_no_host_socket_or_fifo(caller: Caller, trap: Trap) -> None:
    marker = unique_marker()
    watcher = trap.make_late_when_running(marker)
    process = as_caller(
        caller,
        [
            caller.python,
            "-I",
            "-c",
            JOB,
            str(caller.package.parent),
            str(trap.root),
            ATTACK,
            marker,
            str(cpu(20)),
        ],
    )
    stdout, stderr = process.communicate(timeout=slow(60))
    watcher.join()
    assert process.returncode == 0, stderr
    outcome = json.loads(stdout.strip().splitlines()[-1])
    assert outcome["error"] is None, outcome
    printed = outcome["stdout"]
    assert json.loads(printed.strip().splitlines()[-1]) == expected_report()
    assert trap.reached() == []


CLI = """
import sys
sys.path.insert(0, sys.argv[1])
from pysandbox._frontends.cli import main
sys.exit(main(sys.argv[2:]))
"""


def test_cli_readable_reaches_no_host_socket_or_fifo(caller: Caller, trap: Trap) -> None:
    process = as_caller(
        caller,
        [
            caller.python,
            "-I",
            "-c",
            CLI,
            str(caller.package.parent),
            "run",
            "--readable",
            str(trap.root),
            "--wall-time",
            "60",
            "--cpu-time",
            str(cpu(20)),
            "--",
            caller.python,
            "-c",
            ATTACK,
            str(trap.root),
        ],
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # the CLI passes the program's stdout through live
        assert first == "started\n", first
        trap.make_late()
        stdout, stderr = process.communicate(timeout=slow(60))
    finally:
        # A failed check must not leave the CLI (and its sandbox) to the next test.
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr
    assert json.loads(stdout.strip().splitlines()[-1]) == expected_report()
    assert trap.reached() == []


def test_magic_readable_reaches_no_host_socket_or_fifo(trap: Trap) -> None:
    """A smoke case in a real IPython shell, as the test process's own caller.  The cell's
    code is ``python -c ATTACK`` started by ``run_python``'s interpreter."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "pysandbox")
    marker = unique_marker()
    watcher = trap.make_late_when_running(marker)
    cell = (
        "import subprocess, sys\n"
        f"subprocess.run([sys.executable, '-c', {ATTACK!r}, {str(trap.root)!r}, {marker!r}])\n"
    )
    with capture_output() as captured:
        shell.run_cell_magic(
            "sandbox", f"--readable {trap.root} --wall-time 60 --cpu-time 20 --result result", cell
        )
    watcher.join()
    result = shell.user_ns.pop("result")
    assert json.loads(result.stdout.decode().strip().splitlines()[-1]) == expected_report(), (
        captured.stdout
    )
    assert trap.reached() == []


def test_socket_fifo_and_device_paths_are_refused(caller: Caller, trap: Trap) -> None:
    """A readable path that is itself a socket, FIFO or device: ``ValueError`` naming it,
    before anything runs."""
    refused = [
        (trap.root / "early" / "stream", "a socket"),
        (trap.root / "early" / "fifo", "a FIFO"),
    ]
    if os.geteuid() == 0:
        device = trap.root / "null"
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        refused.append((device, "a character device"))
    for path, kind in refused:
        with pytest.raises(ValueError, match=re.escape(f"{str(path)!r} is {kind}")):
            caller.run(["/bin/true"], readable=[str(path)])


def test_the_host_can_still_use_what_the_sandbox_could_not(trap: Trap) -> None:
    """The trap's objects work for the host: the refusals above were the sandbox's."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with client:
        client.connect(str(trap.root / "early" / "stream"))
        assert trap.reached() == ["early stream accepted a connection"]
    writer = os.open(trap.root / "early" / "fifo", os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(writer, b"host")
    finally:
        os.close(writer)
    assert trap.reached() == ["early fifo read b'host'"]


def test_without_landlock_a_readable_directory_is_refused(
    monkeypatch: pytest.MonkeyPatch, trap: Trap
) -> None:
    """Where the kernel has no Landlock (forced here by replacing the probe: this tests
    the refusal, not the safety), a readable directory raises ``SandboxError`` naming the
    cause and the fix before anything runs; a regular file is still fine."""
    from pysandbox import SandboxError, run
    from pysandbox._launch import readable as _readable

    monkeypatch.setattr(_readable, "landlock_abi", lambda: 0)
    with pytest.raises(SandboxError, match=r"no Landlock.*lsm="):
        run(["/bin/true"], readable=[str(trap.root)])
    plain = trap.root / "plain.txt"
    plain.write_text("plain")
    plain.chmod(0o644)
    result = run(["/bin/cat", str(plain)], readable=[str(plain)])
    assert result.stdout == b"plain"


def test_a_readable_fifo_opened_for_reading_is_the_documented_gap(trap: Trap) -> None:
    """What Landlock ABI 7 cannot refuse (docs/security.rst): opening a host FIFO
    below a readable directory for READING.  Kept as a test so that a kernel or a change
    that closes it is noticed, and docs/security.rst updated."""
    from pysandbox import run_python

    fifo = trap.root / "early" / "fifo"
    code = (
        "import errno, os\n"
        "try:\n"
        f"    os.close(os.open({str(fifo)!r}, os.O_RDONLY | os.O_NONBLOCK))\n"
        "    print('opened')\n"
        "except OSError as exc:\n"
        "    print(errno.errorcode[exc.errno])\n"
    )
    result = run_python(code, readable=[str(trap.root)])
    assert result.stdout.strip() == b"opened", (
        "reading a host FIFO is refused now: update the security model, docs/security.rst"
    )


def test_the_program_never_runs_unconfined_when_landlock_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fail closed: when the init cannot build the Landlock domain it was told to (here a
    writable place that does not exist in the sandbox), the program does not run and the
    call raises ``SandboxError`` naming the cause."""
    from pysandbox import SandboxError, run
    from pysandbox._launch import command as _command
    from pysandbox._launch.plan import Plan

    real = _command._landlock_options

    def broken(plan: Plan) -> list[str]:
        return [*real(plan), "--landlock-write", "/no/such/place"]

    monkeypatch.setattr(_command, "_landlock_options", broken)
    with pytest.raises(SandboxError, match=r"Landlock.*did not run"):
        run(["/bin/echo", "ran unconfined"])
