# SPDX-License-Identifier: MIT
"""The keyword options of ``run``, ``run_python`` and their async forms, as ``TypedDict``\\ s
for type checkers: a wrapper that passes them on (the pytest fixture) declares
``**options: Unpack[RunOptions]``, so a misspelled keyword is an error where it is
written, not a ``TypeError`` at run time.  Imported only under ``TYPE_CHECKING``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TypedDict

from .._model.cancel import CancelEvent
from .._model.file import File
from .call import OnOutput, Stdin

__all__ = ["AsyncPythonOptions", "AsyncRunOptions", "PythonOptions", "RunOptions"]


class AsyncRunOptions(TypedDict, total=False):
    """``run_async``'s keywords but ``limits``."""

    stdin: Stdin
    files: Mapping[str, bytes | File] | None
    readable: Sequence[str]
    env: Mapping[str, str] | None
    on_stdout: OnOutput
    on_stderr: OnOutput
    files_include: Iterable[str] | None
    files_exclude: Iterable[str] | None


class AsyncPythonOptions(AsyncRunOptions, total=False):
    """``run_python_async``'s keywords but ``limits``."""

    args: Sequence[str]


class RunOptions(AsyncRunOptions, total=False):
    """``run``'s keywords but ``limits``."""

    cancel: CancelEvent | None


class PythonOptions(RunOptions, total=False):
    """``run_python``'s keywords but ``limits``."""

    args: Sequence[str]
