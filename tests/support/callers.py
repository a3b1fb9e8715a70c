# SPDX-License-Identifier: MIT
"""Who calls pysandbox: the test process itself, or a non-root process made for the test.

The attack suite runs each attack for both callers (fixture ``caller`` in ``conftest.py``),
through ``run``, ``run_python`` and ``eval_in_sandbox``:

* ``root``: the test process (CI runs as root) calls ``run``/``run_python`` in-process.
  Its sandboxes run as a uid of their own, with per-sandbox cgroups where the host has them.
* ``nonroot``: a driver script under the system Python, as an unprivileged uid with no other
  process, imports a world-readable copy of the installed package and makes the same
  call; the ``Result`` comes back as JSON and is rebuilt here.  Its sandboxes run in
  bwrap's user namespace as that uid, with ``RLIMIT_NPROC`` of that uid for the process
  cap and no total memory cap unless the host delegates a cgroup to it.  When the test
  process is not root itself, it IS a non-root caller and calls in-process.

Options go through unchanged, a ``stdin`` callback included: the driver forwards each
chunk of stdout to the test process, which calls the callback and sends the reply back.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import fcntl
import json
import os
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, Union

import pytest

import pysandbox
from pysandbox import CellResult, File, Limits, ProcessOutput, Result, SandboxError, Status
from pysandbox._cgroups.probe import probe as cgroup_probe
from support.timing import slow

#: The record a call returns.
Record = TypeVar("Record", Result, ProcessOutput)

#: What may stand in a JSON request or answer.
Json = Union[None, bool, int, float, str, list["Json"], dict[str, "Json"]]

#: The first uid of the non-root callers.  Each test process (a pytest-xdist worker)
#: reserves a block of ``UIDS_PER_WORKER``: callers of one uid share ``RLIMIT_NPROC``,
#: so two workers, two test sessions running at once on one machine, or the peers of one
#: test must never share one.  Far from the 54321 of older fixtures.
NONROOT_UID_BASE = 61000
UIDS_PER_WORKER = 32
#: Blocks to choose from: uids up to 61000 + 32 * 256 = 69192.
UID_BLOCKS = 256

#: The time a driver may take beyond the wall limit of its call: starting the system
#: interpreter, importing pysandbox, and reporting, on a slow machine.
DRIVER_SLACK = slow(20)

#: The exceptions of the API that the driver's caller re-raises as they are.
RAISED: dict[str, type[Exception]] = {
    "SandboxError": SandboxError,
    "TypeError": TypeError,
    "ValueError": ValueError,
}

DRIVER = r"""
import base64, enum, json, os, struct, sys
from collections.abc import Mapping

sys.path.insert(0, sys.argv[1])
import pysandbox

# The pipes to the test process, for a stdin callback.
FORWARD, REPLY = map(int, sys.argv[2:4]) if len(sys.argv) > 2 else (-1, -1)


def read_exact(fd, size):
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            raise EOFError("the test process closed the reply pipe")
        data += chunk
    return data


class CallbackRaised(Exception):
    # The test process's callback raised: the call must end as pysandbox ends it then.
    pass


def forward(chunk):
    os.write(FORWARD, struct.pack("!I", len(chunk)) + chunk)
    tag, size = struct.unpack("!cI", read_exact(REPLY, 5))
    data = read_exact(REPLY, size)
    if tag == b"E":
        raise CallbackRaised(data.decode())
    return None if tag == b"N" else data


def decode(value):
    if isinstance(value, dict) and set(value) == {"__bytes__"}:
        return base64.b64decode(value["__bytes__"])
    if isinstance(value, dict) and set(value) == {"__file__"}:
        content, executable = value["__file__"]
        return pysandbox.File(base64.b64decode(content), executable=executable)
    if isinstance(value, dict):
        return {key: decode(item) for key, item in value.items()}
    return value


def encode(value):
    if isinstance(value, bytes):
        return {"__bytes__": base64.b64encode(value).decode()}
    if isinstance(value, enum.Enum):
        return {"__enum__": value.name}
    if isinstance(value, Mapping):
        return {"__map__": {key: encode(item) for key, item in value.items()}}
    if isinstance(value, frozenset):
        return {"__set__": sorted(value)}
    return value


def through_a_copy(code, **options):
    # run_python in a copy of a template sandbox, as a Runner with copies makes one.
    template = pysandbox.Template(copies=True)
    with pysandbox.Runner(warm=1, limits=options.pop("limits", None), template=template) as runner:
        return runner.run_python(code, **options)


request = json.loads(sys.stdin.read())
options = {key: decode(value) for key, value in request["options"].items()}
if request["limits"] is not None:
    options["limits"] = pysandbox.Limits(**request["limits"])
if request["callback"]:
    options["stdin"] = forward
answer = {"uid": os.getuid(), "euid": os.geteuid(), "pid": os.getpid()}
try:
    if request.get("copies") and request["function"] == "run_python":
        result = through_a_copy(request["target"], **options)
    else:
        result = getattr(pysandbox, request["function"])(request["target"], **options)
except Exception as exc:
    answer["error"] = [type(exc).__name__, str(exc)]
else:
    answer["result"] = {name: encode(getattr(result, name)) for name in request["fields"]}
print(json.dumps(answer), flush=True)
"""

PROBE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from pysandbox._cgroups.probe import probe
support = probe()
print(json.dumps({"memory": support.memory, "pids": support.pids, "reason": support.reason}))
"""


@dataclasses.dataclass(frozen=True)
class Installation:
    """A system interpreter of our version and ABI, and a world-readable copy of the
    installed pysandbox that it can import."""

    python: str
    path: Path


def _decode_field(value: object) -> object:
    """The inverse of the driver's ``encode``."""
    if isinstance(value, dict) and set(value) == {"__bytes__"}:
        return base64.b64decode(value["__bytes__"])
    if isinstance(value, dict) and set(value) == {"__enum__"}:
        return Status[value["__enum__"]]
    if isinstance(value, dict) and set(value) == {"__map__"}:
        return {key: _decode_field(item) for key, item in value["__map__"].items()}
    if isinstance(value, dict) and set(value) == {"__set__"}:
        return frozenset(value["__set__"])
    return value


def _encode_option(value: object) -> Json:
    """An option for the request: bytes as base64, mappings and sequences item by item."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"__bytes__": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, File):
        return {"__file__": [base64.b64encode(value.content).decode(), value.executable]}
    if isinstance(value, Mapping):
        return {str(key): _encode_option(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode_option(item) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"the non-root driver cannot pass a {type(value).__name__}")


def _read_exact(fd: int, size: int) -> bytes | None:
    """``size`` bytes from ``fd``; None at EOF."""
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


class Caller:
    """One caller of the API: ``run`` and ``run_python`` with the library's signature."""

    #: "root" or "nonroot", as in the test ids.
    name: str
    #: The uid the calls run as.
    uid: int
    #: The interpreter of the calling process (whose sandboxes run it for ``run_python``).
    python: str
    #: The directory of the pysandbox package the calling process imports.
    package: Path

    @property
    def is_root(self) -> bool:
        return self.uid == 0

    def run(self, argv: Sequence[str], **options: object) -> Result:
        raise NotImplementedError

    def run_python(self, code: str, **options: object) -> Result:
        raise NotImplementedError

    def eval_in_sandbox(self, code: str, **options: object) -> ProcessOutput:
        raise NotImplementedError

    def memory_cgroup(self) -> tuple[bool, str]:
        """Whether this caller's sandboxes get a memory cgroup (a total memory cap), and
        why not when they do not: the probe ``run`` itself consults, made as this caller."""
        raise NotImplementedError

    def peers(self, count: int) -> list[Caller]:
        """``count`` callers to run sandboxes at the same moment, each counted on its own
        by the process cap: this caller for root (each sandbox has a uid of its own), and
        callers of distinct uids for a non-root caller (whose cap is per uid)."""
        raise NotImplementedError

    def run_script(self, script: str, *, timeout: float) -> Any:
        """The JSON that ``script`` prints last, run in a fresh process of this caller
        (its uid, its interpreter), for what only a process of its own can measure
        (its memory).  ``sys.argv[1]`` is the directory to put first on ``sys.path`` to
        import this caller's pysandbox.  Fails the test if the script fails."""
        raise NotImplementedError


class InProcessCaller(Caller):
    """The test process calls the API itself."""

    def __init__(self) -> None:
        self.uid = os.geteuid()
        self.name = "root" if self.uid == 0 else "nonroot"
        self.python = sys.executable
        self.package = Path(pysandbox.__file__).parent

    def run(self, argv: Sequence[str], **options: object) -> Result:
        return pysandbox.run(argv, **options)  # type: ignore[arg-type]

    def run_python(self, code: str, **options: object) -> Result:
        return pysandbox.run_python(code, **options)  # type: ignore[arg-type]

    def eval_in_sandbox(self, code: str, **options: object) -> ProcessOutput:
        return pysandbox.eval_in_sandbox(code, **options)  # type: ignore[arg-type]

    def memory_cgroup(self) -> tuple[bool, str]:
        support = cgroup_probe()
        return support.memory, support.reason

    def peers(self, count: int) -> list[Caller]:
        if not self.is_root:
            pytest.skip("sandboxes of one non-root uid share its process count (docs/security.rst)")
        return [self] * count

    def run_script(self, script: str, *, timeout: float) -> Any:
        out = subprocess.run(
            [self.python, "-I", "-c", script, str(self.package.parent)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])


class SessionCaller(InProcessCaller):
    """The test process calls the API, and ``run_python`` runs the code as the one call
    of a fresh ``Session`` with the same limits, paths and environment: the attack suite
    through the session's keeper, state and call processes.  The ``CellResult`` reads as
    the ``Result`` of a ``python`` that ran the same code (an exception: exit code 1 and
    its traceback on stderr)."""

    def __init__(self) -> None:
        super().__init__()
        self.name = "session"

    def run_python(self, code: str, **options: object) -> Result:
        args = options.pop("args", ())
        assert isinstance(args, (list, tuple))
        limits = options.pop("limits", None) or Limits()
        assert isinstance(limits, Limits)
        argv = f"import sys\nsys.argv = {['main.py', *args]!r}\n"
        with pysandbox.Session(limits=limits, **options) as session:  # type: ignore[arg-type]
            cell = session.run(argv + code)
        return result_of_cell(cell)


class CopyCaller(InProcessCaller):
    """The test process calls the API, and ``run_python`` runs the code in a copy of a
    template sandbox (``Template(copies=True)``) of a ``Runner`` with the call's limits:
    the attack suite through a copy's namespaces, mounts, identity and confinement,
    which the copy made itself inside the template's sandbox."""

    def __init__(self) -> None:
        super().__init__()
        self.name = "copy"

    def run_python(self, code: str, **options: object) -> Result:
        limits = options.pop("limits", None)
        assert limits is None or isinstance(limits, Limits)
        template = pysandbox.Template(copies=True)
        with pysandbox.Runner(warm=1, limits=limits, template=template) as runner:
            return runner.run_python(code, **options)  # type: ignore[arg-type]


def result_of_cell(cell: CellResult) -> Result:
    """``cell`` as the ``Result`` of ``python`` running the same code."""
    status, returncode, stderr = cell.status, cell.returncode, cell.stderr
    if cell.committed:
        status = Status.NONZERO_EXIT if cell.error is not None else Status.OK
        returncode = 1 if cell.error is not None else 0
        stderr += (cell.error.traceback if cell.error is not None else "").encode()
    return Result(
        status=status,
        returncode=returncode,
        signal=cell.signal,
        stdout=cell.stdout,
        stderr=stderr,
        stdout_truncated=cell.stdout_truncated,
        stderr_truncated=cell.stderr_truncated,
        wall_time=cell.wall_time,
        cpu_time=cell.cpu_time,
        max_rss=cell.max_rss,
        files=cell.files,
        files_truncated=cell.files_truncated,
    )


class DriverCaller(Caller):
    """A process of an unprivileged uid calls the API through ``DRIVER``."""

    def __init__(
        self, installation: Installation, uid: int, first_peer: int, copies: bool = False
    ) -> None:
        self.name = "copy-nonroot" if copies else "nonroot"
        self._copies = copies
        self.uid = uid
        self.python = installation.python
        self.package = installation.path / "pysandbox"
        self._installation = installation
        self._first_peer = first_peer

    def run(self, argv: Sequence[str], **options: object) -> Result:
        return self._call(Result, "run", list(argv), options)

    def run_python(self, code: str, **options: object) -> Result:
        return self._call(Result, "run_python", code, options)

    def eval_in_sandbox(self, code: str, **options: object) -> ProcessOutput:
        return self._call(ProcessOutput, "eval_in_sandbox", code, options)

    def memory_cgroup(self) -> tuple[bool, str]:
        out = self._subprocess(PROBE, input_text="", pass_fds=(), timeout=DRIVER_SLACK)
        support = json.loads(out.stdout)
        return bool(support["memory"]), str(support["reason"])

    def peers(self, count: int) -> list[Caller]:
        if count > UIDS_PER_WORKER - 1:
            raise ValueError(f"at most {UIDS_PER_WORKER - 1} peers")
        return [
            DriverCaller(self._installation, self._first_peer + i, self._first_peer, self._copies)
            for i in range(count)
        ]

    def run_script(self, script: str, *, timeout: float) -> Any:
        out = self._subprocess(script, input_text="", pass_fds=(), timeout=timeout)
        return json.loads(out.stdout.strip().splitlines()[-1])

    def _subprocess(
        self,
        script: str,
        *,
        input_text: str,
        pass_fds: Sequence[int],
        timeout: float,
        extra_args: Sequence[str] = (),
    ) -> subprocess.CompletedProcess[str]:
        """``script`` under the system interpreter as this caller's uid, with the test
        process's environment (a caller's secrets included) and working directory."""
        out = subprocess.run(
            [self.python, "-I", "-c", script, str(self._installation.path), *extra_args],
            input=input_text,
            capture_output=True,
            text=True,
            user=self.uid,
            group=self.uid,
            extra_groups=[],
            env=dict(os.environ),
            pass_fds=pass_fds,
            timeout=timeout,
            check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(f"the non-root driver failed ({out.returncode}): {out.stderr}")
        return out

    def _call(
        self, record: type[Record], function: str, target: object, options: dict[str, object]
    ) -> Record:
        """``pysandbox.function(target, **options)`` in the driver; its ``record``."""
        if options.get("cancel") is not None:
            raise TypeError("the non-root driver cannot pass a cancel event")
        limits = options.pop("limits", None)
        stdin = options.get("stdin")
        callback = stdin if callable(stdin) else None
        if callback is not None:
            del options["stdin"]
        request = {
            "function": function,
            "target": target,
            "options": _encode_option(options),
            "limits": None if limits is None else dataclasses.asdict(limits),  # type: ignore[call-overload]
            "callback": callback is not None,
            "fields": [field.name for field in dataclasses.fields(record)],
            "copies": self._copies,
        }
        wall = limits.wall_time if isinstance(limits, Limits) else Limits().wall_time
        wall = max(wall, float(options.get("timeout_max_time_sec", 0)))  # type: ignore[arg-type]
        with _forwarding(callback) as (fds, raised):
            out = self._subprocess(
                DRIVER,
                input_text=json.dumps(request),
                pass_fds=fds,
                timeout=wall + DRIVER_SLACK,
                extra_args=[str(fd) for fd in fds],
            )
        answer = json.loads(out.stdout.strip().splitlines()[-1])
        assert (answer["uid"], answer["euid"]) == (self.uid, self.uid), answer
        if raised:
            raise raised[0]
        if "error" in answer:
            name, message = answer["error"]
            if name not in RAISED:
                raise RuntimeError(f"the non-root call raised {name}: {message}")
            raise RAISED[name](message)
        fields = {name: _decode_field(value) for name, value in answer["result"].items()}
        return record(**fields)


@contextlib.contextmanager
def _forwarding(
    callback: Callable[[bytes], bytes | str | None] | None,
) -> Iterator[tuple[tuple[int, ...], list[BaseException]]]:
    """Two pipes to the driver (chunks of stdout in, replies out) and a thread that calls
    ``callback`` for each chunk; yields the driver's ends and the exception the callback
    raised, if it did.  Without a callback, no pipes."""
    raised: list[BaseException] = []
    if callback is None:
        yield (), raised
        return
    chunks_r, chunks_w = os.pipe()
    replies_r, replies_w = os.pipe()

    def serve() -> None:
        while True:
            header = _read_exact(chunks_r, 4)
            if header is None:
                return
            chunk = _read_exact(chunks_r, struct.unpack("!I", header)[0]) or b""
            try:
                reply = callback(chunk)
            except BaseException as exc:
                raised.append(exc)
                tag, data = b"E", repr(exc).encode()
            else:
                tag = b"N" if reply is None else b"D"
                data = reply.encode() if isinstance(reply, str) else reply or b""
            with contextlib.suppress(BrokenPipeError):
                os.write(replies_w, struct.pack("!cI", tag, len(data)) + data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield (chunks_w, replies_r), raised
    finally:
        for fd in (chunks_w, replies_r):
            os.close(fd)
        thread.join(timeout=30)
        for fd in (chunks_r, replies_w):
            os.close(fd)


@contextlib.contextmanager
def reserved_uids() -> Iterator[range]:
    """A block of uids that no other test process on this machine holds while the block
    runs: the first block whose lock file (in the temporary directory) this process can
    ``flock`` and whose uids have no process (a session that takes no lock may use them).
    The lock goes with the process, so a crashed session frees its block."""
    for index in range(UID_BLOCKS):
        first = NONROOT_UID_BASE + UIDS_PER_WORKER * index
        block = range(first, first + UIDS_PER_WORKER)
        path = os.path.join(tempfile.gettempdir(), f"pysandbox-test-uids-{index}.lock")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except PermissionError:
            continue  # another user's session made this block's lock: not ours to take
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        if processes_of(block):
            os.close(fd)
            continue
        try:
            yield block
        finally:
            os.close(fd)
        return
    raise RuntimeError(f"all {UID_BLOCKS} blocks of test uids are taken")


#: The uid of a one-off non-root caller made by a single test (the ``caller`` fixture's
#: drivers reserve uids of their own, see ``reserved_uids``).
UNPRIVILEGED_UID = 54321


def run_unprivileged(
    python: str, script: str, *, uid: int = UNPRIVILEGED_UID, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with ``python`` as ``uid`` (group ``uid``, no other groups), from
    ``/``, with only ``PATH`` in its environment: a non-root caller of pysandbox."""
    return subprocess.run(
        [python, "-c", script],
        user=uid,
        group=uid,
        extra_groups=[],
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_installed(script: str, *args: str, timeout: float = 60) -> Any:
    """The JSON that ``script`` prints last, run as root with this test's interpreter and
    the installed pysandbox (which may live where no other uid can read it): a script that
    imports first and then drops to another uid itself.  Fails the test if it fails."""
    result = subprocess.run(
        [sys.executable, "-c", script, *args],
        env={**os.environ, "PYTHONPATH": str(Path(pysandbox.__file__).parents[1])},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def processes_of(uids: range) -> list[int]:
    """Live pids (zombies included) whose real uid is in ``uids``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.stat(f"/proc/{entry}").st_uid in uids:
                found.append(int(entry))
    return found


#: For a test of the attack suite whose attacks hold for a session's calls and a
#: template's copies too: run it as root, as a non-root caller, through a ``Session``
#: (``SessionCaller``), and through a copy of a template, as root (``CopyCaller``) and as
#: a non-root caller.
THROUGH_EVERY_PATH = pytest.mark.parametrize(
    "caller", ["root", "nonroot", "session", "copy", "copy-nonroot"], indirect=True
)
