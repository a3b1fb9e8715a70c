# SPDX-License-Identifier: MIT
"""What bwrap and the init report, and the ``SandboxError`` for each way a launch can
fail: a spawn the C core could not make (by its stage and errno), a sandbox bwrap could
not build, a program the init could not start.  Each error names the cause and the fix."""

from __future__ import annotations

import errno
import os

from .. import _sandbox
from .._model.errors import PROCESS_WIDE_FIXES, SandboxError, errno_text, process_wide_fix
from .plan import InitReport

__all__ = [
    "bwrap_exited",
    "bwrap_report",
    "init_failure",
    "parse_init_report",
    "setup_failure",
    "spawn_failure",
]

#: Fixes for the host faults a user can do something about, by errno of the failed call.
_HOST_FIXES = {
    **PROCESS_WIDE_FIXES,
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


#: How bwrap writes the document that reports its child's exit (``{ "exit-code": 0 }``).
_EXIT_HEAD, _EXIT_TAIL = b'{ "exit-code": ', b" }"


def bwrap_exited(report: bytes) -> bool:
    """Whether bwrap reported its child's exit on its ``--json-status-fd`` (a document
    with ``exit-code``): at once when a line is that document as bwrap writes it, else
    from ``bwrap_report``, whose ``json`` (with ``re``) costs every run's start-up."""
    for line in report.split(b"\n"):
        if line.startswith(_EXIT_HEAD) and line.endswith(_EXIT_TAIL):
            code = line[len(_EXIT_HEAD) : -len(_EXIT_TAIL)]
            if code.removeprefix(b"-").isdigit():
                return True
    return "exit-code" in bwrap_report(report)


def bwrap_report(report: bytes) -> dict[str, object]:
    """Merge the JSON documents bwrap wrote on its ``--json-status-fd``."""
    import json

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
    errno.ENOENT: "give a path that exists inside the sandbox (see docs/services.rst, What the "
    "code sees), or bind the program's directory with readable=",
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


def spawn_failure(exc: OSError) -> SandboxError:
    fix = process_wide_fix(exc)
    if fix is None and getattr(exc, "stage", None) in _CGROUP_STAGES:
        fix = _CGROUP_FIXES.get(exc.errno or 0)
    if fix is None:
        fix = _HOST_FIXES.get(exc.errno or 0, "see the error above")
    return SandboxError(f"could not start bubblewrap: {errno_text(exc)}; {fix}")


def setup_failure(raw: _sandbox.RawResult) -> SandboxError:
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
