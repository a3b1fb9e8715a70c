# SPDX-License-Identifier: MIT
"""The records of one launch: the fd layout inside bwrap, the ``Plan`` an API hands the
launcher, and the ``Facts`` it gets back (with the init's report).

No I/O: the launcher (``launcher.py``) acts on these, the APIs build and read them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .. import _sandbox
from .._cgroups.group import SandboxCgroup
from .._cgroups.usage import CgroupUsage
from .._model.cancel import CancelEvent
from .._model.record import record
from . import bwrap

__all__ = [
    "FIRST_PAYLOAD_FD",
    "LIFELINE_FD",
    "WAITER_FDS",
    "Facts",
    "FdLayout",
    "InitReport",
    "Plan",
]

#: bwrap's status reports are a few dozen bytes; keep no more than this.
REPORT_CAP = 64 * 1024


#: The init's report is one short line.
INIT_REPORT_CAP = 4096


#: The syscall filter is always the first passed fd (``bwrap.base_options`` names it),
#: the read end of the lifeline (``_lifeline``) the second; the payloads follow.
LIFELINE_FD = bwrap.SECCOMP_FD + 1


FIRST_PAYLOAD_FD = LIFELINE_FD + 1
#: A waiter's fds: the go pipe's read end, the ready pipe's write end, the payload memfd.
WAITER_FDS = 3
#: A copy client's fds: the template's control socket, then the files that join the
#: copy's cgroup (v2: one ``cgroup.procs``; v1: a ``tasks`` per hierarchy, at most the
#: pids, memory and cpuacct ones), ``/dev/null`` in the slots left over.  A root
#: caller's template has the same slots: its end of the control socket, then the
#: host paths its bwrap binds that its unprivileged ids cannot reach
#: (``copies.blocked_sources``).
CLIENT_FDS = 8
#: Where a copy client keeps a pidfd of its copy's init once built, for the C core to
#: pin the init by (``src/copy_client.c``'s ``INIT_PIDFD``).
CLIENT_INIT_PIDFD = 3


@record
class FdLayout:
    """The fd numbers inside bwrap, as the C core maps them: ``pass_fds[i]`` becomes
    ``3 + i`` (the syscall filter first, the lifeline's read end, the payloads, the
    channels, a warm sandbox's waiter fds, the code file, then the readable paths), and
    the capture pipes follow (bwrap's status, the init's report, then the API's own
    captures)."""

    #: The fds of the API's payloads (input files, a moved ``pyvenv.cfg``), in order.
    payloads: tuple[int, ...]
    #: The code file's (``--ro-bind-fd``), after the payloads; None without code.
    code: int | None
    #: bwrap's ``--json-status-fd``.
    status: int
    #: The init's ``--report-fd``.
    report: int
    #: The fds of the API's own capture pipes, in the order given.
    captures: tuple[int, ...]
    #: The readable paths' (``--ro-bind-fd``), after the code file, in ``Plan.readable``'s
    #: order.
    binds: tuple[int, ...] = ()
    #: The channels' (``Plan.channels``), after the payloads: open in the program.
    channels: tuple[int, ...] = ()
    #: A warm sandbox's waiter fds (``waiter.WaiterEnds``: go, ready, payload), after
    #: the channels: open in the waiter, which closes them before the code runs.
    waiter: tuple[int, ...] = ()
    #: A template's copy's (``copies.py``): the copy client's control socket and the
    #: files that join its cgroup (``CLIENT_FDS``), after the readable paths; in the
    #: template itself, its end of the control socket, then unused ``/dev/null``.
    client: tuple[int, ...] = ()

    @classmethod
    def of(
        cls,
        *,
        payloads: int = 0,
        captures: int = 0,
        code: bool = False,
        binds: int = 0,
        channels: int = 0,
        waiter: bool = False,
        client: bool = False,
    ) -> FdLayout:
        """The layout for that many payloads, channels, API captures and readable paths,
        a code file or not, a waiter's fds or not, and a copy client's fds or not."""
        first_channel = FIRST_PAYLOAD_FD + payloads
        first_waiter = first_channel + channels
        code_fd = first_waiter + (WAITER_FDS if waiter else 0)
        first_bind = code_fd + int(code)
        first_client = first_bind + binds
        status = first_client + (CLIENT_FDS if client else 0)
        return cls(
            payloads=tuple(range(FIRST_PAYLOAD_FD, first_channel)),
            code=code_fd if code else None,
            status=status,
            report=status + 1,
            captures=tuple(range(status + 2, status + 2 + captures)),
            binds=tuple(range(first_bind, first_client)),
            channels=tuple(range(first_channel, first_waiter)),
            waiter=tuple(range(first_waiter, code_fd)),
            client=tuple(range(first_client, status)),
        )


@record
class Plan:
    """One sandbox, as an API wants it.  The API numbers its fds with ``layout`` (made by
    ``FdLayout.of`` for its payloads and captures) and gives the rest of the command line:
    ``options`` for bwrap after the common ones, ``init_options`` for the init after the
    common ones, and ``program``."""

    layout: FdLayout
    #: The interpreter whose directories the sandbox shows (see ``bwrap.base_options``).
    python: str
    options: Sequence[str]
    init_options: Sequence[str]
    program: Sequence[str]
    #: Data served read-only on ``layout.payloads``, one memfd each.
    payloads: Sequence[bytes]
    #: Caps of the API's capture pipes, on ``layout.captures``.
    capture_caps: Sequence[int]
    #: The API's resource limits; ``RLIMIT_NPROC`` here is replaced by ``confine``'s choice.
    rlimits: Sequence[tuple[int, int, int]]
    #: The cap on processes and threads, and on the whole sandbox's memory (None: none).
    processes: int
    memory_total: int | None
    stdout_cap: int
    stderr_cap: int
    kill_on_cap: bool
    timeout: float
    #: CPU seconds of the whole tree; 0: not watched.
    cpu_limit: float = 0.0
    #: Inodes (hard links included) the tmpfs of ``writable`` (``bwrap.WORKDIR`` and
    #: ``bwrap.CACHE_DIR``) may hold together; past them the C core kills the sandbox.
    #: 0: not watched (a plan without those tmpfs).
    disk_inodes: int = 0
    stdin: bytes = b""
    #: Called with each chunk of stdout while stdin is open: bytes to write, None to close.
    stdin_callback: Callable[[bytes], bytes | None] | None = None
    #: Shown every kept byte of stdout and stderr, in order, as it is read.
    on_stdout: Callable[[bytes], object] | None = None
    on_stderr: Callable[[bytes], object] | None = None
    cancel: CancelEvent | None = None
    #: Shown the run's group (None without one) once it is made, before the sandbox
    #: starts: a session reads its counters while it lives.
    on_cgroup: Callable[[SandboxCgroup | None], object] | None = None
    #: stdout and stderr as stripped str (None where not UTF-8): eval_in_sandbox's way.
    text: bool = False
    #: The API reads the cgroup's counters from the facts (``eval_in_sandbox`` does not:
    #: then a warm run whose facts come before its teardown leaves them unread).
    counters: bool = True
    #: A directory the sandbox keeps for the API: the interpreter's files within it are
    #: shown below ``interpreter.MOVED_ROOT`` (see ``interpreter.shown_at``).
    moved: str | None = None
    #: Where the Python code is shown, read-only, with ``code_mode`` (None: no code): a
    #: code file (``_codefile``) on ``layout.code``.
    code_path: str | None = None
    code_mode: int = 0o444
    #: The code; None for a plan whose sandbox starts before its code exists (warm).
    code: bytes | None = None
    #: Host paths bound read-only at the same path, each from the fd on ``layout.binds``
    #: that the launch opens (``_readable.open_readable``); checked by ``check_readable``.
    readable: Sequence[str] = ()
    #: The API's own writable places inside the sandbox (a tmpfs), beside the devices and
    #: ``/proc``: the only places the program may write when the kernel has Landlock.
    writable: Sequence[str] = ()
    #: Host fds the program gets open on ``layout.channels`` (a session's pipes to its
    #: keeper); the launch passes copies, the caller keeps and closes its own.
    channels: Sequence[int] = ()
    #: A warm sandbox's (``layout.waiter``): the template its waiter runs before it
    #: waits (``waiter.encode_template``); b"": none.
    template: bytes = b""
    #: A warm plan whose sandboxes are copies of one sandbox of its kind that ran the
    #: template (``copies.py``; its layout has the copy client's fds).
    copies: bool = False

    def start_key(self) -> tuple[object, ...]:
        """What its sandbox is made of before the code runs: two warm plans
        (``waiter.waiting_plan``) with the same key may share a warm sandbox (their
        stdin, callbacks, caps, deadlines and ``waiter.Handover`` are applied at the
        hand-over)."""
        return (
            self.layout,
            self.python,
            tuple(self.options),
            tuple(self.init_options),
            tuple(self.program),
            tuple(self.payloads),
            tuple(self.capture_caps),
            tuple(tuple(item) for item in self.rlimits),
            self.processes,
            self.memory_total,
            self.moved,
            self.code_path,
            self.code_mode,
            tuple(self.readable),
            tuple(self.writable),
            self.template,
            self.copies,
        )


@record
class InitReport:
    """What pysandbox's init said when the program ended."""

    #: The program's raw wait status (exit code or signal).
    wait_status: int
    #: CPU seconds (user + system) of every process the init reaped.
    cpu_time: float
    #: Peak resident set of the largest of them, in bytes.
    max_rss: int


@record
class Facts:
    """What happened to one sandbox that bwrap built (or that was killed while it ran)."""

    raw: _sandbox.RawResult
    #: The init's report; None when the sandbox was killed before the program ended.
    init: InitReport | None
    #: The contents of the API's capture pipes, and whether each passed its cap.
    captures: list[bytes]
    captures_truncated: list[bool]
    #: The cgroup's counters, when the sandbox had a cgroup.
    usage: CgroupUsage | None
    #: CPU seconds the sandbox had used when its code was handed over (a warm sandbox's
    #: start-up), left out of ``cpu_time``.
    cpu_baseline: float = 0.0
    #: A fork or clone was refused at ``Limits.processes`` (``Result.processes_exceeded``).
    processes_exceeded: bool = False

    @property
    def joined_at_clone(self) -> bool:
        """The kernel created the sandbox in its cgroup v2 group (clone3 with
        ``CLONE_INTO_CGROUP``), rather than bwrap moving itself there before its exec."""
        return self.raw["cgroup_joined_at_clone"]

    @property
    def killed(self) -> bool:
        """The C core killed the sandbox: wall time, an output cap, the CPU watcher, or the
        count of the working directory's inodes."""
        return (
            self.raw["timed_out"]
            or self.raw["killed_on_cap"]
            or self.raw["cpu_exceeded"]
            or self.raw["disk_exceeded"]
        )

    @property
    def cpu_time(self) -> float:
        """CPU seconds of the whole sandbox: the cgroup's counter where there is one (it
        counts every task that ever ran, also children nobody reaped), else the init's
        report, else the C core's last sample of the tree."""
        candidates = [self.raw["tree_cpu_time"], self.raw["user_time"] + self.raw["system_time"]]
        if self.init is not None:
            candidates.append(self.init.cpu_time)
        if self.usage is not None and self.usage.cpu_time is not None:
            candidates.append(self.usage.cpu_time)
        return max(0.0, max(candidates) - self.cpu_baseline)
