# SPDX-License-Identifier: MIT
"""``eval_in_sandbox``: the reference implementation's contract, read off the one launch
path (``_launch``) that ``run`` uses too."""

from __future__ import annotations

import math
import operator
import os
import resource

from .._host import interpreter, programs
from .._launch import bwrap
from .._launch.launcher import launch
from .._launch.plan import Facts, FdLayout, Plan
from .._model.cancel import CancelEvent
from .._model.errors import SandboxError
from .._model.result import ProcessOutput

__all__ = ["eval_in_sandbox", "eval_plan", "read_output"]

#: Larger limits than these overflow the kernel's types or mean nothing on any host.
_MAX_BYTES = 2**62
#: The processes (threads included) one eval_in_sandbox sandbox may have at once: the
#: reference set no cap, which let a fork bomb exhaust the host's pids.  A cgroup of the
#: sandbox's own where the caller can make one, else RLIMIT_NPROC (see ``_confine``).
PROCESSES = 64
#: Open files per process: the reference passed on the caller's, which may be huge.
OPEN_FILES = 256
#: The exit code of a sandbox killed for CPU time, as the reference's RLIMIT_CPU gives it
#: (bwrap's 128 + SIGKILL).
CPU_KILLED = 137


def _validate_code(python_code: object) -> bytes:
    if not isinstance(python_code, str):
        raise TypeError(f"python_code must be str, not {type(python_code).__name__}")
    if "\0" in python_code:
        raise ValueError("python_code must not contain NUL characters")
    try:
        return python_code.encode("utf-8") + b"\n"
    except UnicodeEncodeError as exc:
        raise ValueError(f"python_code is not encodable as UTF-8: {exc.reason}") from exc


def _positive_int(name: str, value: object, unit: int = 1) -> int:
    """``value`` as an int > 0 whose product with ``unit`` fits the kernel's limits."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not bool")
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be an int, not {type(value).__name__}") from None
    if number <= 0:
        raise ValueError(f"{name} must be > 0, got {number}")
    if number * unit > _MAX_BYTES:
        raise ValueError(f"{name} is too large: {number}")
    return number


def _positive_seconds(name: str, value: object) -> float:
    """``value`` as a finite number of seconds > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return seconds


def eval_in_sandbox(
    python_code: str,
    mem_max_mb: int = 100,
    cpu_max_time_sec: int = 1,
    timeout_max_time_sec: float = 10,
    io_max_kb: int = 128,
) -> ProcessOutput:
    """Run ``python_code`` with the caller's interpreter in an isolated sandbox.

    The code runs as ``/home/code.py`` (read-only, also the working directory) with no
    network, no capabilities, an empty environment and stdin closed.

    :param python_code: the Python source to run.
    :param mem_max_mb: address-space limit of each process in MiB (``RLIMIT_AS``); it
        includes the interpreter itself, so leave room.  Where the caller can make a
        memory cgroup, also the memory of the whole sandbox (every process, pipe and
        socket buffers; cgroup v1 caps socket buffers apart, at the same size); a
        process the cgroup kills ends the run with 137.
    :param cpu_max_time_sec: CPU seconds each process may use (``RLIMIT_CPU``), and
        the whole process tree together; past either the sandbox is killed and the
        return code is 137.
    :param timeout_max_time_sec: wall-clock seconds for the whole run, start-up included.
    :param io_max_kb: KiB that stdout and stderr may each hold; one byte more raises.
    :return: the return code and the stdout and stderr, decoded and stripped.
    :raises SandboxError: ``Process timed out``, ``I/O buffer size exceeded``,
        ``Subprocess did not produce valid UTF-8``, or the host cannot build a sandbox.
    :raises TypeError, ValueError: an argument is of the wrong type or out of range.
    """
    return read_output(
        launch(
            eval_plan(python_code, mem_max_mb, cpu_max_time_sec, timeout_max_time_sec, io_max_kb)
        )
    )


def eval_plan(
    python_code: object,
    mem_max_mb: object,
    cpu_max_time_sec: object,
    timeout_max_time_sec: object,
    io_max_kb: object,
    cancel: CancelEvent | None = None,
    *,
    waiter: bool = False,
) -> Plan:
    """Check ``eval_in_sandbox``'s arguments and build its ``Plan``; ``cancel`` is for a
    caller that may end the run early (``Runner``), the reference has none; with
    ``waiter``, its fds are numbered for a warm sandbox's waiter (``waiting_plan``)."""
    code = _validate_code(python_code)
    mem_mb = _positive_int("mem_max_mb", mem_max_mb, 2**20)
    cpu_sec = _positive_int("cpu_max_time_sec", cpu_max_time_sec)
    timeout = _positive_seconds("timeout_max_time_sec", timeout_max_time_sec)
    io_bytes = _positive_int("io_max_kb", io_max_kb, 1024) * 1024

    python = programs.find_python()
    # CODE_DIR holds only the code: an interpreter that lives there on the host (a venv
    # in a user's home) is shown below MOVED_ROOT, its pyvenv.cfg pointed at its base;
    # in place only when it cannot start from there.
    moved = bwrap.CODE_DIR if interpreter.movable(python, bwrap.CODE_DIR) else None
    venv_config = None if moved is None else interpreter.moved_venv_config(python, moved)
    payloads = [] if venv_config is None else [venv_config[1]]
    layout = FdLayout.of(payloads=len(payloads), code=True, waiter=waiter)
    mem_bytes = mem_mb * 2**20
    return Plan(
        layout=layout,
        python=python,
        options=bwrap.eval_options(
            None if venv_config is None else (venv_config[0], layout.payloads[0]),
        ),
        init_options=[],
        program=[interpreter.shown_at(python, moved), "-u", bwrap.CODE_PATH],
        code=code,
        code_path=bwrap.CODE_PATH,
        code_mode=bwrap.CODE_MODE,
        payloads=payloads,
        capture_caps=[],
        rlimits=[
            (resource.RLIMIT_CPU, cpu_sec, cpu_sec),
            (resource.RLIMIT_AS, mem_bytes, mem_bytes),
            (resource.RLIMIT_FSIZE, mem_bytes, mem_bytes),
            (resource.RLIMIT_NOFILE, OPEN_FILES, OPEN_FILES),
        ],
        processes=PROCESSES,
        memory_total=mem_bytes,
        stdout_cap=io_bytes,
        stderr_cap=io_bytes,
        kill_on_cap=True,
        timeout=timeout,
        cpu_limit=cpu_sec,
        text=True,
        counters=False,
        moved=moved,
        cancel=cancel,
    )


def read_output(facts: Facts) -> ProcessOutput:
    """What ``eval_in_sandbox`` returns for the ``facts`` of its plan's run, or the
    reference's ``SandboxError``."""
    raw = facts.raw
    if raw["timed_out"]:
        raise SandboxError("Process timed out")
    if raw["killed_on_cap"] or raw["stdout_truncated"] or raw["stderr_truncated"]:
        raise SandboxError("I/O buffer size exceeded")
    stdout, stderr = raw["stdout"], raw["stderr"]
    if not (isinstance(stdout, str) and isinstance(stderr, str)):
        raise SandboxError("Subprocess did not produce valid UTF-8")
    if raw["cpu_exceeded"]:
        returncode = CPU_KILLED
    elif raw["status_known"]:
        returncode = os.waitstatus_to_exitcode(raw["wait_status"])
    elif facts.init is not None:
        # The host reaped bwrap behind our back (SIGCHLD ignored): the init still told.
        returncode = _exit_code(facts.init.wait_status)
    else:
        raise SandboxError("the sandbox ended without telling how: its exit status was lost")
    # The core already left out the ASCII white space at both ends without a copy;
    # strip() removes the rest of what str.strip() counts as white space.
    return ProcessOutput(returncode=returncode, stdout=stdout.strip(), stderr=stderr.strip())


def _exit_code(wait_status: int) -> int:
    """The code bwrap exits with for the program's wait status: its exit code, or
    128 + the signal that killed it (the init passes that on, and bwrap passes the
    init's on)."""
    if os.WIFSIGNALED(wait_status):
        return 128 + os.WTERMSIG(wait_status)
    return os.WEXITSTATUS(wait_status)
