"""Run one bwrap command line through the C core and tell a sandbox that ran from one that
could not be built.  Shared by every public entry point."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import resource
from collections.abc import Callable, Sequence

from . import _sandbox
from ._bwrap import seccomp_program
from ._errors import SandboxError
from ._lifeline import lifeline

__all__ = [
    "REPORT_CAP",
    "Ran",
    "bwrap_report",
    "launch",
    "setup_failure",
    "spawn_failure",
    "write_memfd",
]

#: bwrap's status reports are a few dozen bytes; keep no more than this.
REPORT_CAP = 64 * 1024

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

_USERNS_FIX = (
    "enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 and "
    "user.max_user_namespaces > 0); on Ubuntu 24.04 and later, allow them for bwrap in "
    "AppArmor (an AppArmor profile for /usr/bin/bwrap, or sysctl "
    "kernel.apparmor_restrict_unprivileged_userns=0)"
)


def write_memfd(code: bytes) -> int:
    """A memfd holding ``code``, positioned at its start: the code or the input files.

    They never touch the host's filesystem, so the sandbox cannot be pointed at a host
    path the caller would later trust.
    """
    try:
        fd = os.memfd_create("pysandbox-data", os.MFD_CLOEXEC)
    except OSError as exc:
        raise SandboxError(f"cannot create a memfd for the sandbox: {exc.strerror}") from exc
    try:
        view = memoryview(code)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError as exc:
        os.close(fd)
        raise SandboxError(f"cannot write to the sandbox memfd: {exc.strerror}") from exc
    return fd


@dataclasses.dataclass(frozen=True)
class Ran:
    """What eval_in_sandbox needs to know of one sandbox that was built and ran (or was
    killed while running)."""

    #: The exit status as ``subprocess`` reports it: the exit code, or -N for signal N.
    returncode: int
    #: bytes, or with ``text`` the stripped str (None when it is not UTF-8).
    stdout: bytes | str | None
    stderr: bytes | str | None
    stdout_truncated: bool
    stderr_truncated: bool
    timed_out: bool
    killed_on_cap: bool


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


def spawn_failure(exc: OSError) -> SandboxError:
    fix = _HOST_FIXES.get(exc.errno or 0, "see the error above")
    return SandboxError(f"could not start bubblewrap: {exc.strerror}; {fix}")


def setup_failure(raw: _sandbox.RawResult) -> SandboxError:
    stderr = raw["stderr"]
    words = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else stderr or ""
    words = words.strip() or "no message"
    status = os.waitstatus_to_exitcode(raw["wait_status"]) if raw["status_known"] else "lost"
    lowered = words.lower()
    if "namespace" in lowered or "uid map" in lowered or "operation not permitted" in lowered:
        fix = _USERNS_FIX
    else:
        fix = "check that bubblewrap works on this host: `bwrap --ro-bind / / true`"
    return SandboxError(
        f"bubblewrap could not build the sandbox (exit status {status}): {words}; to fix: {fix}"
    )


def launch(
    argv: Sequence[str],
    *,
    code: bytes,
    rlimits: Sequence[tuple[int, int, int]],
    stdout_cap: int,
    stderr_cap: int,
    kill_on_cap: bool,
    timeout: float,
    stdin: bytes = b"",
    on_stdout: Callable[[bytes], bytes | None] | None = None,
    text: bool = False,
    cgroup_procs: Sequence[int] = (),
) -> Ran:
    """Run ``argv`` (a bwrap command line from ``_bwrap``) and return the C core's facts.

    The filter is served on ``SECCOMP_FD``, ``code`` on ``CODE_FD``, the read end of a
    fresh lifeline on ``LIFELINE_FD``; bwrap's status goes to ``STATUS_FD``.  Raises
    ``SandboxError`` when bwrap cannot be started or cannot build the sandbox, or when
    the exit status is lost and bwrap did not report it either; an
    exception from ``on_stdout`` or a ``KeyboardInterrupt`` propagates after the sandbox
    is killed and reaped.  The core always adds ``RLIMIT_CORE=0``: a crash inside must not
    hand its memory to the host's core-dump handler.
    """
    code_fd = write_memfd(code)
    try:
        seccomp_fd = write_memfd(seccomp_program())
    except BaseException:
        os.close(code_fd)
        raise
    try:
        # LIFELINE: its write end stays here until the C core has returned.
        with lifeline() as (lifeline_read, _lifeline_write):
            raw = _sandbox.run(
                argv,
                [],
                rlimits=[*rlimits, (resource.RLIMIT_CORE, 0, 0)],
                cgroup_procs=cgroup_procs,
                pass_fds=[seccomp_fd, code_fd, lifeline_read],
                captures=[REPORT_CAP],
                stdin=stdin,
                on_stdout=on_stdout,
                stdout_cap=stdout_cap,
                stderr_cap=stderr_cap,
                kill_on_cap=kill_on_cap,
                timeout=timeout,
                text=text,
            )
    except OSError as exc:
        raise spawn_failure(exc) from exc
    finally:
        os.close(code_fd)
        os.close(seccomp_fd)
    report = bwrap_report(raw["captures"][0])
    killed = raw["timed_out"] or raw["killed_on_cap"]
    # bwrap reports an exit code only for a sandbox it finished building.
    if "exit-code" not in report and not killed:
        raise setup_failure(raw)
    if raw["status_known"]:
        returncode = os.waitstatus_to_exitcode(raw["wait_status"])
    elif isinstance(report.get("exit-code"), int):
        returncode = int(report["exit-code"])  # type: ignore[call-overload]
    else:
        returncode = -9  # killed by us before it could report: the status is moot
    return Ran(
        returncode=returncode,
        stdout=raw["stdout"],
        stderr=raw["stderr"],
        stdout_truncated=raw["stdout_truncated"],
        stderr_truncated=raw["stderr_truncated"],
        timed_out=raw["timed_out"],
        killed_on_cap=raw["killed_on_cap"],
    )
