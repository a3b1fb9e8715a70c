# SPDX-License-Identifier: MIT
"""A launch's facts, read as a ``Result``: the files and displays decoded, the status
classified, and what the facts tell besides (the process cap reached, files a kill kept
from being collected)."""

from __future__ import annotations

from .._launch.plan import Facts
from .._model.classify import classify
from .._model.errors import SandboxError
from .._model.filestream import decode_files
from .._model.limits import Limits
from .._model.result import Result

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .._model.rich import Bundle

__all__ = ["result_of"]


def result_of(facts: Facts, limits: Limits) -> Result:
    """Turn the launch's facts into a ``Result``."""
    raw = facts.raw
    stdout, stderr = raw["stdout"], raw["stderr"]
    assert isinstance(stdout, bytes) and isinstance(stderr, bytes)
    max_rss = facts.init.max_rss if facts.init is not None else raw["max_rss"]
    files, executables, files_left_out = decode_files(facts.captures[0], limits.files_out_count)
    displays: tuple[Bundle, ...] = ()
    displays_left_out = False
    if len(facts.captures) > 1:
        from .._model.display_frames import stream_displays

        displays, displays_left_out = stream_displays(
            facts.captures[1], facts.captures_truncated[1], limits.displays, limits.displays_count
        )
    try:
        status, returncode, signal = classify(
            timed_out=raw["timed_out"],
            killed_on_cap=raw["killed_on_cap"],
            cpu_exceeded=raw["cpu_exceeded"],
            disk_exceeded=raw["disk_exceeded"],
            report_wait_status=facts.init.wait_status if facts.init is not None else None,
            bwrap_wait_status=raw["wait_status"] if raw["status_known"] else None,
            cpu_time=facts.cpu_time,
            cpu_limit=limits.cpu_time,
            stderr=stderr,
            max_rss=max_rss,
            memory_limit=limits.memory,
            memory_limit_hit=facts.usage is not None and facts.usage.memory_exceeded,
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
        cpu_time=facts.cpu_time,
        max_rss=max_rss,
        files=files,
        files_truncated=files_left_out or facts.captures_truncated[0],
        executables=executables,
        displays=displays,
        displays_truncated=displays_left_out,
        processes_exceeded=facts.processes_exceeded,
        # Killed before the program ended: the init, which collects the files once it
        # has, never did.
        files_not_collected=facts.killed and facts.init is None,
    )
