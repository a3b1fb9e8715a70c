# SPDX-License-Identifier: MIT
"""Pure-Python baseline sandbox used as the yardstick in the benchmarks.

It works the way the original pure-Python ``eval_in_sandbox`` does: the code is
written to a fresh temporary directory, ``prlimit`` + ``bwrap`` are started
through :class:`subprocess.Popen` with pipes for stdout/stderr, and a
``select.select`` loop drains both pipes 1 KiB at a time, enforcing the
wall-clock timeout and the output cap.  The only addition is read-only binds of
``sys.base_prefix`` (e.g. a pyenv build in ``/root/.pyenv``) and, in a venv, of
``sys.prefix`` when they are not under ``/usr``, so that the sandbox runs the
caller's own interpreter with the caller's site-packages, as pysandbox does.
"""

from __future__ import annotations

import dataclasses
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

_CHUNK = 1024
_SELECT_TIMEOUT_SEC = 0.1


@dataclasses.dataclass
class ProcessOutput:
    returncode: int = 0
    stdout: str = ""
    stderr: str = ""

    def __bool__(self) -> bool:
        return self.returncode == 0


class SandboxError(Exception):
    pass


def _which(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise SandboxError(f"Cannot find the `{name}` executable")
    return path


def _python_exe() -> str:
    """The caller's interpreter (a venv's python stays a venv's python), as the reference."""
    exe = sys.executable
    if not exe or not os.access(exe, os.X_OK):
        exe = shutil.which("python3") or ""
    if not exe:
        raise SandboxError("Cannot find the Python executable")
    return os.path.abspath(exe)


def _extra_binds() -> list[str]:
    """Read-only binds of the installation and the venv, unless they are under /usr."""
    binds: list[str] = []
    for prefix in dict.fromkeys((sys.base_prefix, sys.prefix)):
        if prefix and not prefix.startswith("/usr/"):
            binds += ["--ro-bind", prefix, prefix]
    return binds


def sandbox_argv(tmp_dir: str, mem_max_mb: int, cpu_max_time_sec: int) -> list[str]:
    """The prlimit + bwrap command line that runs ``tmp_dir/code.py`` as /home/code.py."""
    python_exe = _python_exe()
    mem_max_bytes = mem_max_mb * 2**20
    return [
        _which("prlimit"),
        f"--cpu={cpu_max_time_sec}:{cpu_max_time_sec}",
        f"--as={mem_max_bytes}:{mem_max_bytes}",
        _which("bwrap"),
        "--new-session",
        "--unshare-all",
        "--clearenv",
        "--chdir",
        "/home",
        "--ro-bind",
        tmp_dir,
        "/home",
        "--ro-bind",
        "/usr",
        "/usr",
        "--ro-bind",
        "/lib",
        "/lib",
        "--ro-bind",
        "/lib64",
        "/lib64",
        *_extra_binds(),
        "--remount-ro",
        "/",
        python_exe,
        "-u",
        "/home/code.py",
    ]


def _drain(
    proc: subprocess.Popen[bytes], timeout_sec: float, io_max_bytes: int
) -> tuple[int, bytes, bytes]:
    """Read stdout/stderr 1 KiB at a time until both close and the child exits."""
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    bufs = {out_fd: bytearray(), err_fd: bytearray()}
    for fd in bufs:
        os.set_blocking(fd, False)
    open_fds = [out_fd, err_fd]
    t_start = time.monotonic()
    while True:
        if time.monotonic() - t_start > timeout_sec:
            raise SandboxError("Process timed out")
        if not open_fds:
            try:
                returncode = proc.wait(_SELECT_TIMEOUT_SEC)
            except subprocess.TimeoutExpired:
                continue
            return returncode, bytes(bufs[out_fd]), bytes(bufs[err_fd])
        readable, _, _ = select.select(open_fds, [], [], _SELECT_TIMEOUT_SEC)
        for fd in readable:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                open_fds.remove(fd)
                continue
            bufs[fd] += chunk
            if len(bufs[fd]) > io_max_bytes:
                raise SandboxError("I/O buffer size exceeded")


def eval_in_sandbox(
    python_code: str,
    mem_max_mb: int = 100,
    cpu_max_time_sec: int = 1,
    timeout_max_time_sec: int = 10,
    io_max_kb: int = 128,
) -> ProcessOutput:
    """Run ``python_code`` under prlimit + bwrap; see the module docstring."""
    with tempfile.TemporaryDirectory() as tmp_dir:
        with open(os.path.join(tmp_dir, "code.py"), "w", encoding="utf-8") as f:
            f.write(python_code)
            f.write("\n")
        args = sandbox_argv(tmp_dir, mem_max_mb, cpu_max_time_sec)
        with subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        ) as proc:
            try:
                returncode, out, err = _drain(proc, timeout_max_time_sec, io_max_kb * 1024)
            except BaseException:
                proc.kill()
                raise
    try:
        stdout, stderr = out.decode("utf-8"), err.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SandboxError("Subprocess did not produce valid UTF-8") from exc
    return ProcessOutput(returncode, stdout.strip(), stderr.strip())
