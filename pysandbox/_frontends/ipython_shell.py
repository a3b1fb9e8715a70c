# SPDX-License-Identifier: MIT
"""What both ``%%sandbox`` magics (one-shot, ``ipython.py``, and with sessions,
``session_magic.py``) share: the shell they are given, usage errors, and the writing of
a program's output to the kernel's streams."""

from __future__ import annotations

import codecs
import sys
from collections.abc import Callable, Mapping, MutableMapping
from typing import NoReturn, Protocol

from .._model.escape import escape_controls

__all__ = ["MAGIC_NAME", "LiveStream", "Shell", "usage"]

#: The cell magic's name: ``%%sandbox``.
MAGIC_NAME = "sandbox"


class _DisplayPublisher(Protocol):
    def publish(self, data: Mapping[str, object]) -> None:
        """Show ``data`` (MIME type to content) in the cell's output."""


class _MagicsManager(Protocol):
    #: The magics by kind (``"line"``, ``"cell"``), then by name.
    magics: dict[str, dict[str, object]]


class Shell(Protocol):
    """What the extension uses of IPython's ``InteractiveShell`` (typed here: IPython
    is not imported to type-check pysandbox)."""

    user_ns: MutableMapping[str, object]
    display_pub: _DisplayPublisher
    magics_manager: _MagicsManager

    def register_magic_function(
        self, func: Callable[..., None], magic_kind: str, magic_name: str
    ) -> None:
        """Make ``func`` the magic ``magic_name`` of kind ``magic_kind``."""


def usage(message: str, prog: str = f"%%{MAGIC_NAME}") -> NoReturn:
    """Raise IPython's ``UsageError`` (shown as one line, without a traceback)."""
    from IPython.core.error import UsageError

    raise UsageError(f"{prog}: {message}")


class LiveStream:
    """Writes each chunk of the program's output to ``sys.<name>`` as it arrives,
    decoded incrementally (a character split between chunks stays whole; invalid UTF-8
    becomes U+FFFD).  The stream is looked up at each write: the kernel may swap it.
    On a terminal (a terminal IPython) the control characters are escaped, as the
    command line does, so the output cannot hide or fake the verdict after it."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        #: The program ran and wrote: an error now is not about the options.
        self.called = False

    def __call__(self, chunk: bytes) -> None:
        self.called = True
        self.write(self._decoder.decode(chunk))

    def close(self) -> None:
        """Write what the decoder still holds (an incomplete character at the end)."""
        self.write(self._decoder.decode(b"", final=True))

    def write(self, text: str) -> None:
        """Write ``text`` to the stream, escaped on a terminal."""
        if text:
            stream = getattr(sys, self._name)
            if callable(getattr(stream, "isatty", None)) and stream.isatty():
                text = escape_controls(text)
            stream.write(text)
            stream.flush()
