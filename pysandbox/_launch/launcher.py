"""The one launch path: every public API builds a ``Plan`` and reads the ``Facts``.

This module is the only caller of ``_sandbox.run``.  It owns what every sandbox gets,
whichever API asked for it, so that a safety default is added here once:

* the fd layout inside bwrap (``FdLayout``): the syscall filter, the lifeline (the
  sandbox ends when this process does, see ``_lifeline``), the API's payloads, bwrap's
  status pipe, the init's report pipe, the API's own captures;
* the bwrap command line around the API's part: the cached base options (namespaces,
  filter, read-only system, ``/proc``, devices, the init), bwrap's status report, the
  read-only root, the init with its identity and its report;
* the always-on resource limits (``ALWAYS_RLIMITS``) and the clamp of a non-root
  caller's limits to its own hard limits;
* the process and memory caps of the whole sandbox (``confine``: a cgroup, or
  ``RLIMIT_NPROC``), the cgroup's CPU counter for the C core's watcher, and its v2
  group's directory, which the C core creates bwrap in;
* the mapping of a failed spawn, a sandbox bwrap could not build and a program the
  init could not start to a ``SandboxError`` naming the cause and the fix.

``eval_in_sandbox`` and ``run``/``run_python`` differ only in their ``Plan`` (mounts,
payloads, pump options) and in how they read the ``Facts``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import resource
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from .. import _sandbox
from .._cgroups.usage import CgroupUsage
from .._host import mountinfo, programs
from .._model.cancel import CancelEvent, Cancelled
from .._model.errors import SandboxError
from . import bwrap
from .codefile import CodeFile
from .confine import Confinement, confine
from .lifeline import init_options as lifeline_options
from .lifeline import lifeline
from .readable import landlock_abi, open_readable

__all__ = [
    "ALWAYS_RLIMITS",
    "Facts",
    "FdLayout",
    "InitReport",
    "Launched",
    "Plan",
    "bwrap_report",
    "command_line",
    "launch",
    "parse_init_report",
    "start",
    "within_own_limits",
]

#: bwrap's status reports are a few dozen bytes; keep no more than this.
REPORT_CAP = 64 * 1024
#: The init's report is one short line.
INIT_REPORT_CAP = 4096
#: The syscall filter is always the first passed fd (``bwrap.base_options`` names it),
#: the read end of the lifeline (``_lifeline``) the second; the payloads follow.
LIFELINE_FD = bwrap.SECCOMP_FD + 1
FIRST_PAYLOAD_FD = LIFELINE_FD + 1

#: Queued signals (``sigqueue``, and one per POSIX timer) each sandbox may hold: POSIX
#: asks at least 32 of each, and 1024 was Linux's own limit for the whole system before
#: 2.6.8, so real programs with timers and real-time signals fit.  The kernel charges a
#: non-root caller's sandbox to the caller's uid as well (``kernel/ucount.c``), and lets
#: the sandbox queue one only while that uid's total is within this bound: whatever the
#: number of its sandboxes, the caller keeps all of its own limit but 1024.
SIGPENDING_BOUND = 1024
#: Bytes of locked memory (``mlock``, ``SHM_LOCK``): Python and numpy lock none
#: (``VmLck`` 0 kB); 64 KiB was the kernel's default before 5.16.  ``SHM_LOCK`` is
#: charged to a non-root caller's uid like queued signals.
MEMLOCK_BOUND = 64 * 1024
#: Microseconds of CPU a real-time task may use without blocking, SIGXCPU past the soft
#: limit and SIGKILL past the hard one.  No task of a sandbox is real-time: its
#: ``RLIMIT_RTPRIO`` is 0, and the C core leaves a real-time caller's policy for
#: ``SCHED_OTHER`` before bwrap starts; this bounds one that ever got through.
RTTIME_BOUND = (100_000, 200_000)

#: Set on every sandbox whatever the API, instead of inherited from the caller: a crash
#: inside must not hand its memory to the host's core-dump handler (``kernel.core_pattern``
#: may pipe it to a host program); no POSIX message queue bytes (``mq_open`` is refused
#: anyway), queued signals and locked memory bounded as above, no real-time priority and
#: no nice value below the caller's.  Budgets counted per uid are then bounded per
#: sandbox (README, "Kernel budgets").
ALWAYS_RLIMITS: tuple[tuple[int, int, int], ...] = (
    (resource.RLIMIT_CORE, 0, 0),
    (resource.RLIMIT_MSGQUEUE, 0, 0),
    (resource.RLIMIT_SIGPENDING, SIGPENDING_BOUND, SIGPENDING_BOUND),
    (resource.RLIMIT_MEMLOCK, MEMLOCK_BOUND, MEMLOCK_BOUND),
    (resource.RLIMIT_RTPRIO, 0, 0),
    (resource.RLIMIT_RTTIME, *RTTIME_BOUND),
    (resource.RLIMIT_NICE, 0, 0),
)

#: Fixes for the host faults a user can do something about, by errno of the failed call.
_HOST_FIXES = {
    errno.EMFILE: "this process is out of file descriptors: close some or raise `ulimit -n`",
    errno.ENFILE: "the system is out of file descriptors: raise fs.file-max",
    errno.ENOMEM: "the host is out of memory",
    errno.EAGAIN: "the host refused a new process: check `ulimit -u` and kernel.pid_max",
    errno.ENOENT: "the bwrap executable vanished: reinstall bubblewrap",
    errno.EACCES: "bwrap is not executable by this user: check its permissions",
    errno.ENOSPC: "the host is out of space for the sandbox's code: free memory or disk",
}

#: The C core's steps that put bwrap in the sandbox's cgroup (the ``stage`` of its
#: ``OSError``); the errno of a spawn that failed there means the group's fault.
_CGROUP_STAGES = (
    _sandbox.STAGE_CGROUP_CLONE,
    _sandbox.STAGE_CGROUP_OPEN,
    _sandbox.STAGE_CGROUP_JOIN,
)
_NOT_ALLOWED_TO_MOVE = (
    "this process may not move processes into the group: it needs write access to "
    "cgroup.procs (cgroup v1: tasks) in the group and in the nearest group above both it "
    "and this process"
)
_CGROUP_FIXES = {
    errno.EBUSY: "the group has controllers enabled for groups below it, and cgroup v2 "
    "puts no process in such a group",
    errno.EACCES: _NOT_ALLOWED_TO_MOVE,
    errno.EPERM: _NOT_ALLOWED_TO_MOVE,
    errno.ENOENT: "the group was removed while the sandbox started",
    errno.EAGAIN: "the group's pids.max refused the sandbox's first process",
}

_USERNS_FIX = (
    "enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 and "
    "user.max_user_namespaces > 0); on Ubuntu 24.04 and later, allow them for bwrap in "
    "AppArmor (an AppArmor profile for /usr/bin/bwrap, or sysctl "
    "kernel.apparmor_restrict_unprivileged_userns=0)"
)


#: bwrap binds an fd's file by its path, then compares the mount with the fd: a readable
#: path that another user replaced between the two is refused.
_RACE_FIX = (
    "a readable path was replaced while bubblewrap bound it, so it refused it; keep the "
    "path's directories out of other users' hands"
)


@dataclasses.dataclass(frozen=True)
class FdLayout:
    """The fd numbers inside bwrap, as the C core maps them: ``pass_fds[i]`` becomes
    ``3 + i`` (the syscall filter first, the lifeline's read end, the payloads, the code
    file, then the readable paths), and the capture pipes follow (bwrap's status, the
    init's report, then the API's own captures)."""

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

    @classmethod
    def of(
        cls, *, payloads: int = 0, captures: int = 0, code: bool = False, binds: int = 0
    ) -> FdLayout:
        """The layout for that many payloads, API captures and readable paths, and a code
        file or not."""
        code_fd = FIRST_PAYLOAD_FD + payloads
        first_bind = code_fd + int(code)
        status = first_bind + binds
        return cls(
            payloads=tuple(range(FIRST_PAYLOAD_FD, code_fd)),
            code=code_fd if code else None,
            status=status,
            report=status + 1,
            captures=tuple(range(status + 2, status + 2 + captures)),
            binds=tuple(range(first_bind, status)),
        )


@dataclasses.dataclass(frozen=True)
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
    #: Inodes (hard links included) the tmpfs at ``bwrap.WORKDIR`` may hold; past them
    #: the C core kills the sandbox.  0: not watched (a plan without that tmpfs).
    disk_inodes: int = 0
    stdin: bytes = b""
    #: Called with each chunk of stdout while stdin is open: bytes to write, None to close.
    stdin_callback: Callable[[bytes], bytes | None] | None = None
    #: Shown every kept byte of stdout and stderr, in order, as it is read.
    on_stdout: Callable[[bytes], object] | None = None
    on_stderr: Callable[[bytes], object] | None = None
    cancel: CancelEvent | None = None
    #: stdout and stderr as stripped str (None where not UTF-8): eval_in_sandbox's way.
    text: bool = False
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

    def start_key(self) -> tuple[object, ...]:
        """What its sandbox is made of before the code runs: two plans with the same key
        may share a warm sandbox (their stdin, callbacks, caps, deadlines and code are
        applied at the hand-over)."""
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
        )


@dataclasses.dataclass(frozen=True)
class InitReport:
    """What pysandbox's init said when the program ended."""

    #: The program's raw wait status (exit code or signal).
    wait_status: int
    #: CPU seconds (user + system) of every process the init reaped.
    cpu_time: float
    #: Peak resident set of the largest of them, in bytes.
    max_rss: int


@dataclasses.dataclass(frozen=True)
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


def bwrap_report(report: bytes) -> dict[str, object]:
    """Merge the JSON documents bwrap wrote on its ``--json-status-fd``."""
    merged: dict[str, object] = {}
    text = report.decode("utf-8", "replace")
    decoder = json.JSONDecoder()
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            return merged
        try:
            document, position = decoder.raw_decode(text, position)
        except ValueError:
            return merged
        if isinstance(document, dict):
            merged.update(document)


#: What to do about a program the init could not start, by the errno of the failure.
_START_FIXES = {
    errno.ENOENT: "give a path that exists inside the sandbox (see README, What the code "
    "sees), or bind the program's directory with readable=",
    errno.EACCES: "the program is not executable inside the sandbox: check its mode",
    errno.ENOEXEC: "the program is not an executable this kernel can run",
    errno.ENOSPC: "the input files do not fit in the sandbox's working directory: raise "
    "Limits.disk",
    errno.EDQUOT: "the input files do not fit in the sandbox's working directory: raise "
    "Limits.disk",
    errno.EAGAIN: "the process cap leaves no room for the program: raise Limits.processes",
    errno.EMFILE: "the open-files cap leaves no room for the program: raise Limits.open_files",
    errno.ENOMEM: "the memory limit leaves no room for the program: raise Limits.memory",
    errno.E2BIG: "the arguments and environment are too large",
    errno.EFBIG: "an input file is larger than Limits.file_size: raise it",
}


#: How the init says it could not put the program in its Landlock domain (``init.c``).
_LANDLOCK_STAGE = "restricting the program with Landlock"
_LANDLOCK_FAILED = (
    "the kernel refused the Landlock domain that keeps the program from writing to host "
    "files, so the program did not run; `python -m pysandbox --selftest` shows what this "
    "kernel offers"
)


def init_failure(report: bytes) -> SandboxError | None:
    """The error for the init's ``fail ERRNO WHY`` line (it could not start the
    program: unpacking the input files, forking, executing), or None."""
    for line in report.splitlines():
        fields = line.split(b" ", 2)
        if len(fields) == 3 and fields[0] == b"fail" and fields[1].isdigit():
            why = fields[2].decode("utf-8", "replace")
            fix = _START_FIXES.get(int(fields[1]), "see the cause above")
            if why.startswith(_LANDLOCK_STAGE):
                fix = _LANDLOCK_FAILED
            return SandboxError(f"the sandbox could not start the program: {why}; {fix}")
    return None


def parse_init_report(report: bytes) -> InitReport | None:
    """The init's ``exit STATUS USER_US SYSTEM_US MAX_RSS_KB`` line, or None."""
    fields = report.split()
    if len(fields) != 5 or fields[0] != b"exit":
        return None
    try:
        status, user_us, system_us, max_rss_kb = (int(f) for f in fields[1:])
    except ValueError:
        return None
    return InitReport(status, (user_us + system_us) / 1e6, max_rss_kb * 1024)


def _spawn_failure(exc: OSError) -> SandboxError:
    if getattr(exc, "stage", None) in _CGROUP_STAGES:
        fix = _CGROUP_FIXES.get(exc.errno or 0, "see the error above")
    else:
        fix = _HOST_FIXES.get(exc.errno or 0, "see the error above")
    return SandboxError(f"could not start bubblewrap: {exc.strerror}; {fix}")


def _setup_failure(raw: _sandbox.RawResult) -> SandboxError:
    stderr = raw["stderr"]
    words = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else stderr or ""
    words = words.strip() or "no message"
    status = os.waitstatus_to_exitcode(raw["wait_status"]) if raw["status_known"] else "lost"
    lowered = words.lower()
    if "race condition binding" in lowered:
        fix = _RACE_FIX
    elif "namespace" in lowered or "uid map" in lowered or "operation not permitted" in lowered:
        fix = _USERNS_FIX
    else:
        fix = "check that bubblewrap works on this host: `bwrap --ro-bind / / true`"
    return SandboxError(
        f"bubblewrap could not build the sandbox (exit status {status}): {words}; to fix: {fix}"
    )


def within_own_limits(rlimits: Sequence[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Every limit, plus ``ALWAYS_RLIMITS``; for a non-root caller, who cannot raise a
    hard limit, each at most the caller's own."""
    chosen = {which: (soft, hard) for which, soft, hard in rlimits}
    chosen.update({which: (soft, hard) for which, soft, hard in ALWAYS_RLIMITS})
    if os.geteuid() != 0:
        for which, (soft, hard) in chosen.items():
            ceiling = resource.getrlimit(which)[1]
            if ceiling != resource.RLIM_INFINITY:
                chosen[which] = (min(soft, ceiling), min(hard, ceiling))
    return [(which, soft, hard) for which, (soft, hard) in chosen.items()]


def _write_memfd(data: bytes) -> int:
    """A memfd holding ``data``, positioned at its start.

    Payloads never touch the host's filesystem, so the sandbox cannot be pointed at a
    host path the caller would later trust.
    """
    try:
        fd = os.memfd_create("pysandbox-data", os.MFD_CLOEXEC)
    except OSError as exc:
        raise SandboxError(f"cannot create a memfd for the sandbox: {exc.strerror}") from exc
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError as exc:
        os.close(fd)
        raise SandboxError(f"cannot write to the sandbox memfd: {exc.strerror}") from exc
    return fd


def _pass_fds(plan: Plan, lifeline_read: int, code_file: CodeFile | None) -> list[int]:
    """The fds for the C core's ``pass_fds`` (``_close_pass_fds`` closes them): the
    syscall filter in a memfd, the read end of the lifeline, each payload in a memfd,
    the code file's ``O_PATH`` fd, then each readable path's, opened and checked once
    (``open_readable``)."""
    fds: list[int] = []
    try:
        fds.append(_write_memfd(bwrap.seccomp_program()))
        fds.append(lifeline_read)
        for data in plan.payloads:
            fds.append(_write_memfd(data))
        if code_file is not None:
            fds.append(code_file.path_fd())
        if plan.readable:
            kernel_mounts = mountinfo.kernel_mount_points()
            for path in plan.readable:
                fds.append(open_readable(path, kernel_mounts))
    except BaseException:
        for fd in fds:
            if fd != lifeline_read:
                os.close(fd)
        raise
    return fds


def _code_options(plan: Plan) -> list[str]:
    """bwrap's options that show the code file at ``plan.code_path``, read-only."""
    if plan.code_path is None:
        return []
    return ["--ro-bind-fd", str(plan.layout.code), plan.code_path]


def _landlock_options(plan: Plan) -> list[str]:
    """The init's options that confine the program's writes to the sandbox's own places
    (the API's, the device nodes, ``/proc``) with Landlock, when the kernel has it: then
    no host file the sandbox shows, a FIFO below a readable path included, can be opened
    for writing.  Without Landlock, ``check_readable`` refuses readable directories."""
    if landlock_abi() < 1:
        return []
    options = []
    for path in (*plan.writable, *bwrap.DEVICES, "/proc"):
        options += ["--landlock-write", path]
    return options


def command_line(plan: Plan) -> list[str]:
    """bwrap's whole command line for ``plan``: the common part around the API's."""
    layout = plan.layout
    return [
        programs.find_bwrap(),
        *bwrap.base_options(plan.python, os.geteuid(), plan.moved),
        "--json-status-fd",
        str(layout.status),
        *plan.options,
        *_code_options(plan),
        "--remount-ro",
        "/",
        *bwrap.init_prefix(bwrap.sandbox_identity()),
        *lifeline_options(LIFELINE_FD),
        "--report-fd",
        str(layout.report),
        *plan.init_options,
        *_landlock_options(plan),
        "--",
        *plan.program,
    ]


class _HookRaised(Exception):
    """What one of a plan's callbacks raised, carried through the C core.

    The core raises ``OSError`` for its own faults, which ``launch`` maps to a
    ``SandboxError``; a callback's own ``OSError`` (a closed pipe it writes to) must
    reach the caller unchanged instead, so every callback's exception travels in this
    wrapper and is unwrapped once the core has killed and reaped the sandbox.
    """

    def __init__(self, error: BaseException) -> None:
        super().__init__(repr(error))
        self.error = error


_Reply = TypeVar("_Reply")


def _guarded(hook: Callable[[bytes], _Reply] | None) -> Callable[[bytes], _Reply] | None:
    """``hook`` with whatever it raises wrapped in ``_HookRaised`` (None stays None)."""
    if hook is None:
        return None
    call = hook

    def guarded(chunk: bytes) -> _Reply:
        try:
            return call(chunk)
        except BaseException as error:  # KeyboardInterrupt too: unwrapped by launch
            raise _HookRaised(error) from None

    return guarded


@dataclasses.dataclass
class _Setup:
    """What a sandbox needs around its bwrap: the command line, the confinement, the
    code file, the fds to pass; ``resources`` releases them all."""

    argv: list[str]
    confinement: Confinement
    code_file: CodeFile | None
    pass_fds: list[int]
    resources: contextlib.ExitStack

    def spawn_options(self, plan: Plan) -> dict[str, object]:
        """The C core's spawn keywords for ``plan`` (``_sandbox.start``'s)."""
        confinement = self.confinement
        return {
            "rlimits": within_own_limits(confinement.rlimits),
            "cgroup_procs": confinement.cgroup_procs,
            "cgroup_dir_fd": confinement.cgroup_dir_fd,
            "pass_fds": self.pass_fds,
            "captures": [REPORT_CAP, INIT_REPORT_CAP, *plan.capture_caps],
        }

    def pump_options(self, plan: Plan, cpu_baseline: float = 0.0) -> dict[str, object]:
        """The C core's run keywords for ``plan`` (``Sandbox.pump``'s but ``since`` and
        ``release_fd``); the CPU limit counts from ``cpu_baseline``."""
        return {
            "cgroup_cpu_fd": self.confinement.cpu_counter,
            "stdin": plan.stdin,
            "stdin_callback": _guarded(plan.stdin_callback),
            "on_stdout": _guarded(plan.on_stdout),
            "on_stderr": _guarded(plan.on_stderr),
            "stdout_cap": plan.stdout_cap,
            "stderr_cap": plan.stderr_cap,
            "kill_on_cap": plan.kill_on_cap,
            "timeout": plan.timeout,
            "cpu_limit": plan.cpu_limit + cpu_baseline if plan.cpu_limit > 0 else 0.0,
            "cancel": plan.cancel,
            "text": plan.text,
            "disk_inodes": plan.disk_inodes,
            "disk_dir": bwrap.WORKDIR if plan.disk_inodes > 0 else None,
        }


def _set_up(plan: Plan, *, held: bool) -> _Setup:
    """Everything around ``plan``'s bwrap, the code file held (empty) or holding
    ``plan.code``; on a failure nothing is left."""
    if len(plan.payloads) != len(plan.layout.payloads) or len(plan.capture_caps) != len(
        plan.layout.captures
    ):
        raise ValueError("the plan's payloads and captures do not match its fd layout")
    if (plan.code_path is None) != (plan.layout.code is None):
        raise ValueError("the plan's code path does not match its fd layout")
    if len(plan.readable) != len(plan.layout.binds):
        raise ValueError("the plan's readable paths do not match its fd layout")
    argv = command_line(plan)
    resources = contextlib.ExitStack()
    try:
        code_file = None
        if plan.code_path is not None:
            code_file = CodeFile(plan.code_mode, held=held, data=plan.code or b"")
            resources.callback(code_file.close)
        lifeline_read, _lifeline_write = resources.enter_context(lifeline())
        confinement = resources.enter_context(
            confine(processes=plan.processes, memory_total=plan.memory_total, rlimits=plan.rlimits)
        )
        pass_fds = _pass_fds(plan, lifeline_read, code_file)
    except BaseException:
        resources.close()
        raise
    return _Setup(argv, confinement, code_file, pass_fds, resources)


def _close_pass_fds(setup: _Setup) -> None:
    """Close the passed fds of this process once bwrap has its own (the lifeline's read
    end stays with the lifeline)."""
    for fd in setup.pass_fds[:1] + setup.pass_fds[2:]:
        os.close(fd)
    setup.pass_fds = []


def _facts(raw: _sandbox.RawResult, setup: _Setup, cpu_baseline: float) -> Facts:
    """The facts of a run that ended, or the ``SandboxError``/``Cancelled`` it means."""
    usage = setup.confinement.usage()
    if raw["cancelled"]:
        raise Cancelled("the run was cancelled; the sandbox was killed")
    failure = init_failure(raw["captures"][1])
    if failure is not None:
        raise failure
    facts = Facts(
        raw=raw,
        init=parse_init_report(raw["captures"][1]),
        captures=raw["captures"][2:],
        captures_truncated=raw["captures_truncated"][2:],
        usage=usage,
        cpu_baseline=cpu_baseline,
    )
    if "exit-code" not in bwrap_report(raw["captures"][0]) and not facts.killed:
        raise _setup_failure(raw)
    return facts


_Core = TypeVar("_Core")


def _run_core(call: Callable[[], _Core]) -> _Core:
    """``call()`` of the C core, its failures mapped: a callback's exception unwrapped
    and raised as it was, the core's own ``OSError`` as a ``SandboxError``."""
    try:
        return call()
    except _HookRaised as raised:
        error = raised.error
    except OSError as exc:
        raise _spawn_failure(exc) from exc
    raise error


class Launched:
    """A sandbox started ahead of its code (``start``), until ``finish`` runs it to its
    end or ``close`` ends it unrun.  Owns the sandbox, its lifeline, its confinement
    (cgroup) and its code file; ``close`` releases them all and is idempotent."""

    def __init__(self, sandbox: _sandbox.Sandbox, setup: _Setup) -> None:
        self._sandbox = sandbox
        self._setup = setup
        self._baseline = 0.0
        self._handed_over = False
        self.started_at = time.monotonic()

    def waiting(self) -> bool:
        """Its interpreter has started and waits for its code."""
        code_file = self._setup.code_file
        return code_file is not None and code_file.waiting()

    def exited(self) -> bool:
        """It ended by itself (or was run or closed): it can run nothing now."""
        return self._sandbox.exited()

    def hand_over(self, code: bytes) -> None:
        """Write the code into its file (``finish`` then lets the interpreter read it).
        Raises ``SandboxError`` when the sandbox cannot take it (the caller then closes
        it and uses another)."""
        code_file = self._setup.code_file
        assert code_file is not None
        baseline = self._sandbox.cpu_time(cgroup_cpu_fd=self._setup.confinement.cpu_counter)
        if baseline < 0 or self._sandbox.exited():
            raise SandboxError("the warm sandbox ended before its code came")
        code_file.write_held(code)
        self._baseline = baseline
        self._handed_over = True

    def finish(self, plan: Plan) -> Facts:
        """Run the sandbox, handed its code, to its end under ``plan``'s stdin, callbacks,
        caps, deadline and CPU limit, and return the facts; raises as ``launch`` does.
        The C core starts the clock and only then lets the interpreter read its code, so
        the wall time and the limits count from there, and no Python code of this
        process (a signal handler) runs between the two.  Closes it."""
        if not self._handed_over:
            raise RuntimeError("hand_over the code first")
        setup = self._setup
        try:
            code_file = setup.code_file
            assert code_file is not None
            try:
                raw = _run_core(
                    lambda: self._sandbox.pump(
                        **setup.pump_options(plan, self._baseline),  # type: ignore[arg-type]
                        release_fd=code_file.fileno(),
                    )
                )
            except SandboxError as exc:
                cause = exc.__cause__
                if getattr(cause, "stage", None) == _sandbox.STAGE_RELEASE:
                    raise SandboxError(
                        f"the warm sandbox could not be handed its code ({cause}); it was "
                        "killed before its code ran"
                    ) from cause
                raise
        finally:
            self.close()
        # After the clean-up: the cgroup's counters were read once, when it ended.
        return _facts(raw, setup, self._baseline)

    def close(self) -> None:
        """Kill and reap the sandbox if it still runs, then release the rest."""
        self._setup.resources.close()


def start(plan: Plan) -> Launched:
    """Start ``plan``'s sandbox without its code: bwrap, the init and the interpreter
    begin at once, and the interpreter waits at its empty, held code file
    (``_codefile``) until ``Launched.hand_over`` and ``Launched.finish``.  Raises
    ``SandboxError`` when bwrap cannot be started."""
    if plan.code_path is None:
        raise ValueError("only a plan with code can start before its code")
    setup = _set_up(plan, held=True)
    try:
        try:
            options = setup.spawn_options(plan)
            sandbox = _run_core(lambda: _sandbox.start(setup.argv, [], **options))  # type: ignore[arg-type]
        finally:
            _close_pass_fds(setup)
        setup.resources.callback(sandbox.kill)
    except BaseException:
        setup.resources.close()
        raise
    return Launched(sandbox, setup)


def launch(plan: Plan) -> Facts:
    """Run ``plan``'s sandbox to its end and return the facts.

    Raises ``SandboxError`` when bwrap cannot be started, when it could not build the
    sandbox (it reports an exit code only for a sandbox it finished building), when the
    init could not start the program (a program that never ran is never blamed), or when
    the exit status was lost and nobody reported it; ``Cancelled`` when ``plan.cancel``
    fired.  An exception from one of the plan's callbacks or a ``KeyboardInterrupt``
    propagates.
    In every case the sandbox is killed and reaped first.
    """
    setup = _set_up(plan, held=False)
    with setup.resources:
        try:
            raw = _run_core(
                lambda: _sandbox.run(
                    setup.argv,
                    [],
                    **setup.spawn_options(plan),  # type: ignore[arg-type]
                    **setup.pump_options(plan),  # type: ignore[arg-type]
                )
            )
        finally:
            _close_pass_fds(setup)
    # After the clean-up: the cgroup's counters were read once, when it ended.
    return _facts(raw, setup, 0.0)
