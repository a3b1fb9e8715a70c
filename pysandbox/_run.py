"""``run`` and ``run_python``: any program in the sandbox, with stdin, files, limits and a
``Result`` that says exactly how it ended."""

from __future__ import annotations

import os
import resource
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, Union

from . import _bwrap, _sandbox
from ._cgroup import CgroupUsage
from ._classify import classify
from ._confine import Confinement, confine
from ._errors import SandboxError
from ._files import decode_files, encode_files
from ._launch import REPORT_CAP, bwrap_report, setup_failure, spawn_failure, write_memfd
from ._lifeline import lifeline
from ._limits import Limits
from ._types import Result

__all__ = ["WORKDIR", "CancelEvent", "Cancelled", "Stdin", "run", "run_python"]

#: The program's working directory: a writable tmpfs of ``Limits.disk`` bytes.
WORKDIR = "/sandbox"
#: Where ``run_python`` puts the code, read-only, inside ``WORKDIR``.
MAIN_NAME = "main.py"
MAIN_PATH = f"{WORKDIR}/{MAIN_NAME}"
#: The PATH a program sees, and where a bare ``argv[0]`` is looked up.
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
#: The init's report is one short line.
INIT_REPORT_CAP = 4096
#: Room in the files stream for the record headers and names, beyond the contents.
FILES_OVERHEAD = 4 * 2**20

#: What ``stdin`` may be: data, a callback for interactive programs, or None (closed).
Stdin = Union[bytes, str, Callable[[bytes], Union[bytes, str, None]], None]


class Cancelled(Exception):
    """The run was cancelled through its ``cancel`` event; the sandbox is gone."""


class CancelEvent(Protocol):
    """What the C core asks each tick (``threading.Event`` fits)."""

    def is_set(self) -> bool: ...


def _check_argv(argv: object) -> list[str]:
    if isinstance(argv, (str, bytes)) or not isinstance(argv, Sequence):
        raise TypeError(f"argv must be a sequence of str, not {type(argv).__name__}")
    items = list(argv)
    if not items:
        raise ValueError("argv must not be empty")
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"argv items must be str, not {type(item).__name__}")
        if "\0" in item:
            raise ValueError("argv items must not contain NUL")
    if not items[0]:
        raise ValueError("argv[0] must not be empty")
    return items


def _check_readable(readable: object) -> list[str]:
    if isinstance(readable, (str, bytes)) or not isinstance(readable, Sequence):
        raise TypeError(f"readable must be a sequence of paths, not {type(readable).__name__}")
    paths = []
    for path in readable:
        if not isinstance(path, str):
            raise TypeError(f"readable items must be str, not {type(path).__name__}")
        if "\0" in path or not os.path.isabs(path):
            raise ValueError(f"readable paths must be absolute: {path!r}")
        if not os.path.exists(path):
            raise ValueError(f"readable path does not exist: {path!r}")
        paths.append(os.path.normpath(path))
    return paths


def _check_env(env: object) -> list[str]:
    if env is None:
        return []
    if not isinstance(env, Mapping):
        raise TypeError(f"env must be a mapping of str to str, not {type(env).__name__}")
    options = []
    for key, value in env.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError("env keys and values must be str")
        if not key or "=" in key or "\0" in key or "\0" in value:
            raise ValueError(f"env has an invalid variable: {key!r}")
        options += ["--setenv", key, value]
    return options


def _as_bytes(data: bytes | str, what: str) -> bytes:
    if isinstance(data, str):
        try:
            return data.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"{what} is not encodable as UTF-8: {exc.reason}") from None
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"{what} must be bytes, str or None, not {type(data).__name__}")


def _stdin_plan(
    stdin: Stdin,
) -> tuple[bytes, Callable[[bytes], bytes | None] | None]:
    """The initial stdin bytes and the C core's stdout hook for ``stdin``."""
    if stdin is None:
        return b"", None
    if not callable(stdin):
        return _as_bytes(stdin, "stdin"), None
    callback = stdin

    def on_stdout(chunk: bytes) -> bytes | None:
        reply = callback(chunk)
        return None if reply is None else _as_bytes(reply, "the stdin callback's reply")

    first = on_stdout(b"")
    if first is None:
        return b"", None
    return first, on_stdout


def _within_own_limits(rlimits: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """A non-root caller cannot raise a hard limit: each limit is at most its own."""
    if os.geteuid() == 0:
        return rlimits
    capped = []
    for which, soft, hard in rlimits:
        ceiling = resource.getrlimit(which)[1]
        if ceiling != resource.RLIM_INFINITY:
            soft, hard = min(soft, ceiling), min(hard, ceiling)
        capped.append((which, soft, hard))
    return capped


def _parse_init_report(report: bytes) -> tuple[int, float, int] | None:
    """``(raw wait status, cpu seconds, max rss bytes)`` from the init's report line."""
    fields = report.split()
    if len(fields) != 5 or fields[0] != b"exit":
        return None
    try:
        status, user_us, system_us, max_rss_kb = (int(f) for f in fields[1:])
    except ValueError:
        return None
    return status, (user_us + system_us) / 1e6, max_rss_kb * 1024


def _sandbox_argv(
    program: list[str],
    *,
    python: str,
    limits: Limits,
    readable: list[str],
    env_options: list[str],
    n_pass_fds: int,
    files_in: bool,
    code: bool,
    lifeline_fd: int | None,
) -> list[str]:
    """The bwrap command line: the sandbox of ``base_options`` plus a writable working
    directory, the extra read-only paths, and the init supervising ``program``.  The
    passed fds are the syscall filter (3), then the input files and the code if any,
    then the lifeline's read end (``lifeline_fd``; None: none, for the shell variant of
    the benchmark)."""
    options = _bwrap.base_options(python, os.geteuid())
    status_fd = 3 + n_pass_fds
    report_fd, files_out_fd = status_fd + 1, status_fd + 2
    argv = [_bwrap.find_bwrap(), *options]
    for path in _bwrap.parent_dirs(readable):
        argv += ["--perms", "0755", "--dir", path]
    for path in readable:
        argv += ["--ro-bind", path, path]
    argv += ["--json-status-fd", str(status_fd)]
    argv += ["--perms", "0777", "--size", str(limits.disk), "--tmpfs", WORKDIR]
    if code:
        argv += ["--perms", "0444", "--ro-bind-data", str(4 + int(files_in)), MAIN_PATH]
    argv += ["--setenv", "PATH", SANDBOX_PATH, "--setenv", "HOME", WORKDIR, *env_options]
    argv += [
        "--chdir",
        WORKDIR,
        "--remount-ro",
        "/",
        *_bwrap.init_prefix(_bwrap.sandbox_identity(), lifeline_fd=lifeline_fd),
    ]
    argv += ["--report-fd", str(report_fd), "--files-out-fd", str(files_out_fd)]
    argv += ["--files-dir", WORKDIR, "--files-max", str(limits.files_out)]
    if files_in:
        argv += ["--files-in-fd", "4"]
    if code:
        argv += ["--skip", MAIN_NAME]
    return [*argv, "--", *program]


def _execute(
    program: list[str],
    *,
    stdin: Stdin,
    limits: Limits | None,
    files: Mapping[str, bytes] | None,
    readable: Sequence[str],
    env: Mapping[str, str] | None,
    code: bytes | None,
    cancel: CancelEvent | None,
) -> Result:
    """Validate everything, run ``program`` under the init, and classify the outcome."""
    if limits is None:
        limits = Limits()
    elif not isinstance(limits, Limits):
        raise TypeError(f"limits must be a Limits or None, not {type(limits).__name__}")
    files_stream = encode_files(files) if files else None
    input_bytes = sum(memoryview(data).nbytes for data in files.values()) if files else 0
    if input_bytes > limits.disk:
        raise ValueError(f"files: {input_bytes} bytes do not fit in Limits.disk ({limits.disk})")
    if files and code is not None and MAIN_NAME in files:
        raise ValueError(f"files: {MAIN_NAME!r} is where run_python puts the code")
    paths = _check_readable(readable)
    env_options = _check_env(env)
    initial, on_stdout = _stdin_plan(stdin)
    python = _bwrap.find_python()

    fds: list[int] = []
    try:
        for data in (_bwrap.seccomp_program(), files_stream, code):
            if data is not None:
                fds.append(write_memfd(data))
        # LIFELINE: its read end is passed last, so it is fd 3 + len(fds) inside.
        argv = _sandbox_argv(
            program,
            python=python,
            limits=limits,
            readable=paths,
            env_options=env_options,
            n_pass_fds=len(fds) + 1,
            files_in=files_stream is not None,
            code=code is not None,
            lifeline_fd=3 + len(fds),
        )
        with confine(
            processes=limits.processes,
            memory_total=limits.memory + limits.disk,
            rlimits=limits.rlimits(),
        ) as confinement:
            with lifeline() as (lifeline_read, _lifeline_write):
                pass_fds = [*fds, lifeline_read]
                raw = _spawn(argv, pass_fds, limits, initial, on_stdout, cancel, confinement)
            usage = confinement.usage()
    finally:
        for fd in fds:
            os.close(fd)
    return _result(raw, limits, usage)


def _spawn(
    argv: list[str],
    fds: list[int],
    limits: Limits,
    initial: bytes,
    on_stdout: Callable[[bytes], bytes | None] | None,
    cancel: CancelEvent | None,
    confinement: Confinement,
) -> _sandbox.RawResult:
    """One call of the C core for ``_execute``; a failed spawn is a ``SandboxError``."""
    try:
        return _sandbox.run(
            argv,
            [],
            rlimits=_within_own_limits(confinement.rlimits),
            cgroup_procs=confinement.cgroup_procs,
            pass_fds=fds,
            captures=[REPORT_CAP, INIT_REPORT_CAP, limits.files_out + FILES_OVERHEAD],
            stdin=initial,
            on_stdout=on_stdout,
            stdout_cap=limits.stdout,
            stderr_cap=limits.stderr,
            kill_on_cap=not limits.truncate_output,
            timeout=limits.wall_time,
            cpu_limit=limits.cpu_time,
            cancel=cancel,
        )
    except OSError as exc:
        raise spawn_failure(exc) from exc


def _result(raw: _sandbox.RawResult, limits: Limits, usage: CgroupUsage | None) -> Result:
    """Turn the C core's facts into a ``Result``, or raise for a sandbox that never ran."""
    if raw["cancelled"]:
        raise Cancelled("the run was cancelled; the sandbox was killed")
    stdout, stderr = raw["stdout"], raw["stderr"]
    assert isinstance(stdout, bytes) and isinstance(stderr, bytes)
    killed = raw["timed_out"] or raw["killed_on_cap"] or raw["cpu_exceeded"]
    if "exit-code" not in bwrap_report(raw["captures"][0]) and not killed:
        raise setup_failure(raw)
    report = _parse_init_report(raw["captures"][1])
    if report is not None:
        report_status, cpu_time, max_rss = report
    else:
        report_status = None
        cpu_time = max(raw["tree_cpu_time"], raw["user_time"] + raw["system_time"])
        max_rss = raw["max_rss"]
    files, files_left_out = decode_files(raw["captures"][2])
    try:
        status, returncode, signal = classify(
            timed_out=raw["timed_out"],
            killed_on_cap=raw["killed_on_cap"],
            cpu_exceeded=raw["cpu_exceeded"],
            report_wait_status=report_status,
            bwrap_wait_status=raw["wait_status"] if raw["status_known"] else None,
            cpu_time=cpu_time,
            cpu_limit=limits.cpu_time,
            stderr=stderr,
            max_rss=max_rss,
            memory_limit=limits.memory,
            memory_limit_hit=usage is not None and usage.memory_exceeded,
        )
    except ValueError as exc:
        raise SandboxError(f"the sandbox ended without telling how: {exc}") from None
    return Result(
        status=status,
        returncode=returncode,
        signal=signal,
        stdout=stdout,
        stderr=stderr,
        stdout_truncated=raw["stdout_truncated"],
        stderr_truncated=raw["stderr_truncated"],
        wall_time=raw["wall_time"],
        cpu_time=cpu_time,
        max_rss=max_rss,
        files=files,
        files_truncated=files_left_out or raw["captures_truncated"][2],
    )


def run(
    argv: Sequence[str],
    *,
    stdin: Stdin = None,
    limits: Limits | None = None,
    files: Mapping[str, bytes] | None = None,
    readable: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cancel: CancelEvent | None = None,
) -> Result:
    """Run a program in a fresh sandbox and say exactly how it ended.

    :param argv: the program and its arguments; ``argv[0]`` is an absolute path inside
        the sandbox or a name looked up on its ``PATH`` (``/usr/local/bin:/usr/bin:/bin``).
        A program that cannot be executed ends with exit code 127 and says why on stderr.
    :param stdin: None (closed), bytes or str (UTF-8) fed completely, then closed; or a
        callable for interactive programs, called once with ``b""`` and then with each
        chunk of stdout as it arrives (what the pipe delivered: part of a line, or
        several lines), returning bytes or str to write, ``b""`` for nothing now, or
        None to close stdin.  If it raises, the sandbox is killed and
        reaped and the exception propagates.
    :param limits: the limits (``Limits()`` when None).
    :param files: input files placed in the working directory ``/sandbox``, by relative
        path; ``Result.files`` holds the regular files left there at the end.
    :param readable: host paths the program may read, bound read-only at the same path.
    :param env: environment variables added to ``PATH`` and ``HOME`` (``/sandbox``).
    :param cancel: an object whose ``is_set()`` is asked every 50 ms; once true, the
        sandbox is killed and ``Cancelled`` is raised (``threading.Event`` fits).
    :raises TypeError, ValueError: a bad argument, before anything runs.
    :raises SandboxError: the sandbox could not run the program at all.
    """
    return _execute(
        _check_argv(argv),
        stdin=stdin,
        limits=limits,
        files=files,
        readable=readable,
        env=env,
        code=None,
        cancel=cancel,
    )


def run_python(
    code: str,
    *,
    args: Sequence[str] = (),
    stdin: Stdin = None,
    limits: Limits | None = None,
    files: Mapping[str, bytes] | None = None,
    readable: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cancel: CancelEvent | None = None,
) -> Result:
    """Run Python source with the caller's own interpreter, as ``python -u main.py ARGS``.

    The code is ``/sandbox/main.py`` (read-only, and not returned in ``Result.files``);
    everything else is as for ``run``.
    """
    if not isinstance(code, str):
        raise TypeError(f"code must be str, not {type(code).__name__}")
    if "\0" in code:
        raise ValueError("code must not contain NUL characters")
    try:
        source = code.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"code is not encodable as UTF-8: {exc.reason}") from exc
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        raise TypeError(f"args must be a sequence of str, not {type(args).__name__}")
    for arg in args:
        if not isinstance(arg, str):
            raise TypeError(f"args items must be str, not {type(arg).__name__}")
        if "\0" in arg:
            raise ValueError("args items must not contain NUL")
    extra = list(args)
    return _execute(
        [_bwrap.find_python(), "-u", MAIN_PATH, *extra],
        stdin=stdin,
        limits=limits,
        files=files,
        readable=readable,
        env=env,
        code=source,
        cancel=cancel,
    )
