# SPDX-License-Identifier: MIT
"""The checks of a ``Session``'s arguments and of each call's, before anything runs:
each bad one is a ``TypeError`` or ``ValueError`` naming it."""

from __future__ import annotations

import math
from collections.abc import Mapping

from .._model.file import File
from .._model.filestream import encode_files
from .._model.limits import MIN_OPEN_FILES, Limits
from .._model.record import replace

__all__ = ["call_files", "call_limits", "call_order", "positive_seconds", "session_limits"]


def session_limits(limits: object, channels: int) -> Limits:
    """A session's ``limits`` (None: ``Limits()``), or a ``TypeError``/``ValueError``
    naming it: ``open_files`` must leave room for its ``channels`` pipes to the host."""
    if limits is None:
        return Limits()
    if not isinstance(limits, Limits):
        raise TypeError(f"limits must be a Limits or None, not {type(limits).__name__}")
    if limits.open_files < MIN_OPEN_FILES + channels:
        raise ValueError(
            f"limits.open_files must be at least {MIN_OPEN_FILES + channels} for a "
            "session (its three pipes to the host)"
        )
    return limits


def positive_seconds(value: object, name: str) -> float:
    """``value`` as finite seconds > 0, or a ``TypeError``/``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number of seconds > 0, not {value!r}")
    return float(value)


def call_files(files: object) -> list[tuple[str, int, bytes]]:
    """``files`` as ``(name, mode, content)``, checked as ``run``'s ``files`` are."""
    if files is None:
        return []
    if not isinstance(files, Mapping):
        raise TypeError(f"files must be a mapping of str to bytes, not {type(files).__name__}")
    encode_files(files)
    return [
        (
            name,
            0o755 if isinstance(value, File) and value.executable else 0o644,
            bytes(value.content if isinstance(value, File) else value),
        )
        for name, value in files.items()
    ]


def call_order(
    limits: Limits,
    code: object,
    wall_time: float | None,
    cpu_time: float | None,
    stdout: int | None,
    stderr: int | None,
    truncate_output: bool | None,
    files: object,
) -> tuple[Limits, list[tuple[str, int, bytes]]]:
    """A call's limits and input files, or a ``TypeError``/``ValueError`` naming the
    argument."""
    if not isinstance(code, str):
        raise TypeError(f"code must be str, not {type(code).__name__}")
    if "\0" in code:
        raise ValueError("code must not contain NUL characters")
    changes = {
        "wall_time": wall_time,
        "cpu_time": cpu_time,
        "stdout": stdout,
        "stderr": stderr,
        "truncate_output": truncate_output,
    }
    given = {name: value for name, value in changes.items() if value is not None}
    limits = replace(limits, **given) if given else limits
    return limits, call_files(files)


def call_limits(limits: Limits, *, pull: bool) -> dict[str, object]:
    """A call's ``limits`` as its request to the keeper gives them (``pull``: variables
    are to be sent back)."""
    return {
        "wall": limits.wall_time,
        "cpu": limits.cpu_time,
        "stdout": limits.stdout,
        "stderr": limits.stderr,
        "truncate": limits.truncate_output,
        "files_max": limits.files_out,
        "files_count": limits.files_out_count,
        "displays_max": limits.displays,
        "displays_count": limits.displays_count,
        "values_max": limits.values,
        "pull": pull,
    }
