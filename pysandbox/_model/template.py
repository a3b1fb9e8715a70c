# SPDX-License-Identifier: MIT
"""``Template``: what a Runner's warm sandboxes do before they wait for a call."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from .file import File
from .filestream import encode_files
from .record import record

__all__ = ["Template"]


def _check_imports(imports: object) -> tuple[str, ...]:
    """``imports`` as a tuple of dotted module names, or an error naming it."""
    if isinstance(imports, (str, bytes)) or not isinstance(imports, Sequence):
        raise TypeError(f"Template.imports must be a sequence of str, not {type(imports).__name__}")
    names = tuple(imports)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"Template.imports items must be str, not {type(name).__name__}")
        if not all(part.isidentifier() for part in name.split(".")):
            raise ValueError(f"Template.imports: {name!r} is not a module name")
    return names


@record(unhashed=("files",))
class Template:
    """What each warm sandbox of a ``Runner`` does before it waits for its call
    (docs/services.rst, *Templates*): the interpreter imports ``imports``, in order,
    then runs ``setup`` (trusted Python source, in a namespace of its own, not the
    code's), with ``files`` already in ``/sandbox``.  A call then finds the modules
    loaded (``import numpy`` costs nothing), the files in place, and ``__main__`` as
    fresh as in a new sandbox.

    The set-up runs in the sandbox, under the call's limits but its wall time and CPU
    time (its memory counts, as the modules stay loaded), and nothing it holds is
    secret from the code.  A set-up that fails, or has not finished within
    ``timeout`` seconds when a call needs its sandbox, makes that call raise
    ``SandboxError`` with its traceback.
    """

    #: Modules to import, by name (``"numpy"``, ``"xml.dom.minidom"``).
    imports: Sequence[str] = ()
    #: Python source run after the imports (``""``: none).
    setup: str = ""
    #: Files placed in ``/sandbox`` before the set-up (as ``run``'s ``files``); they stay
    #: there for every call (and come back in ``Result.files``).
    files: Mapping[str, bytes | File] | None = None
    #: Seconds a call waits for a sandbox whose set-up has not finished yet.
    timeout: float = 60.0
    #: Make each warm sandbox a copy of one sandbox that did the set-up once (a fork
    #: taken after it, in namespaces, a cgroup and a working directory of its own;
    #: docs/services.rst, *Copies of a template*), rather than a sandbox that does the
    #: set-up itself: a call's sandbox then costs milliseconds, whatever the set-up.
    copies: bool = False

    def __post_init__(self) -> None:
        """Check every field."""
        object.__setattr__(self, "imports", _check_imports(self.imports))
        if not isinstance(self.setup, str):
            raise TypeError(f"Template.setup must be str, not {type(self.setup).__name__}")
        if "\0" in self.setup:
            raise ValueError("Template.setup must not contain NUL characters")
        try:
            self.setup.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"Template.setup is not encodable as UTF-8: {exc.reason}") from None
        if self.files is not None:
            encode_files(self.files)
            object.__setattr__(self, "files", dict(self.files))
        timeout = self.timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise TypeError(f"Template.timeout must be a number, not {type(timeout).__name__}")
        if not (math.isfinite(timeout) and timeout > 0):
            raise ValueError(f"Template.timeout must be finite and > 0, got {timeout!r}")
        object.__setattr__(self, "timeout", float(timeout))
        if not isinstance(self.copies, bool):
            raise TypeError(f"Template.copies must be a bool, not {type(self.copies).__name__}")
