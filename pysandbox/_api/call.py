# SPDX-License-Identifier: MIT
"""``Call``: one call of ``run`` or ``run_python`` as its caller gave it.

The public functions (``run``, ``run_python``, their async forms, a ``Runner``'s) each
spell the keywords out, for their signatures; everything below them passes this one
record, so a new keyword is added to the record and to the signatures, never to a chain
of internal calls.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence

from .._model.cancel import CancelEvent
from .._model.file import File
from .._model.limits import Limits
from .._model.record import record

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Union

    #: What ``stdin`` may be: data, a callback for interactive programs, or None (closed).
    Stdin = Union[bytes, str, Callable[[bytes], Union[bytes, str, None]], None]

    #: An ``on_stdout``/``on_stderr`` callback: shown each chunk of output; its result is
    #: ignored.
    OnOutput = Optional[Callable[[bytes], object]]
elif sys.version_info >= (3, 10):
    # The same at run time, for typing.get_type_hints, without importing typing.
    Stdin = bytes | str | Callable[[bytes], bytes | str | None] | None
    OnOutput = Callable[[bytes], object] | None
else:
    # Python 3.9 evaluates no ``X | Y``: there they stay text, as the annotations do.
    Stdin = "bytes | str | Callable[[bytes], bytes | str | None] | None"
    OnOutput = "Callable[[bytes], object] | None"

__all__ = ["Call", "OnOutput", "Stdin"]


@record
class Call:
    """The program (checked: ``check_argv`` or ``python_program``) and the keywords of
    ``run``, unchecked; ``code`` is ``run_python``'s source as UTF-8 (None for ``run``).
    ``build_plan`` checks the rest and turns it into a ``Plan``."""

    program: list[str]
    code: bytes | None = None
    stdin: Stdin = None
    limits: Limits | None = None
    files: Mapping[str, bytes | File] | None = None
    readable: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cancel: CancelEvent | None = None
    on_stdout: OnOutput = None
    on_stderr: OnOutput = None
    files_include: Iterable[str] | None = None
    files_exclude: Iterable[str] | None = None
    #: ``run_python``'s ``displays``: the display hook runs the code (``display_hook.py``).
    displays: bool = False
