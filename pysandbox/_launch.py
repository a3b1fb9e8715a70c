"""Run one bwrap command line through the C core and tell a sandbox that ran from one that
could not be built.  Shared by every public entry point."""

from __future__ import annotations

import errno
import os
import resource
from collections.abc import Callable, Sequence

from . import _sandbox
from ._bwrap import CODE_FD, STATUS_FD
from ._errors import SandboxError

__all__ = ["launch"]

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


def _write_code(code: bytes) -> int:
    """A memfd holding ``code``, positioned at its start, for bwrap's ``--ro-bind-data``.

    The code never touches the host's filesystem, so the sandbox cannot be pointed at a
    host path the caller would later trust.
    """
    try:
        fd = os.memfd_create("pysandbox-code", os.MFD_CLOEXEC)
    except OSError as exc:
        raise SandboxError(f"cannot create a memfd for the code: {exc.strerror}") from exc
    try:
        view = memoryview(code)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError as exc:
        os.close(fd)
        raise SandboxError(f"cannot write the code to its memfd: {exc.strerror}") from exc
    return fd


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _spawn_failure(exc: OSError) -> SandboxError:
    fix = _HOST_FIXES.get(exc.errno or 0, "see the error above")
    return SandboxError(f"could not start bubblewrap: {exc.strerror}; {fix}")


def _setup_failure(raw: _sandbox.RawResult) -> SandboxError:
    words = raw["stderr"].decode("utf-8", "replace").strip() or "no message"
    status = os.waitstatus_to_exitcode(raw["wait_status"])
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
) -> _sandbox.RawResult:
    """Run ``argv`` (a bwrap command line from ``_bwrap``) and return the C core's facts.

    ``code`` is served on ``CODE_FD``; bwrap's status goes to ``STATUS_FD``.  Raises
    ``SandboxError`` when bwrap cannot be started or cannot build the sandbox; an
    exception from ``on_stdout`` or a ``KeyboardInterrupt`` propagates after the sandbox
    is killed and reaped.  The core always adds ``RLIMIT_CORE=0``: a crash inside must not
    hand its memory to the host's core-dump handler.
    """
    code_fd = _write_code(code)
    status_r = status_w = -1
    try:
        status_r, status_w = os.pipe2(os.O_CLOEXEC)
        fds = {CODE_FD: code_fd, STATUS_FD: status_w}
        try:
            raw = _sandbox.run(
                argv,
                [],
                rlimits=[*rlimits, (resource.RLIMIT_CORE, 0, 0)],
                pass_fds=[fds[n] for n in sorted(fds)],
                stdin=stdin,
                on_stdout=on_stdout,
                stdout_cap=stdout_cap,
                stderr_cap=stderr_cap,
                kill_on_cap=kill_on_cap,
                timeout=timeout,
            )
        except OSError as exc:
            raise _spawn_failure(exc) from exc
        os.close(status_w)
        status_w = -1
        started = b'"child-pid"' in _read_all(status_r)
    finally:
        for fd in (code_fd, status_r, status_w):
            if fd >= 0:
                os.close(fd)
    if not started and not raw["timed_out"] and not raw["killed_on_cap"]:
        raise _setup_failure(raw)
    return raw
