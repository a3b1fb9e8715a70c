# SPDX-License-Identifier: MIT
"""Parsing input that may be hostile: a JSON line of bounded size, nesting and numbers,
and whole numbers of bounded digits.

Python's own parsers are not bounded: ``json.loads`` recurses once per level of nesting
(``RecursionError`` past about a thousand), turns a 400-digit number into an int that
later overflows a C type (``OverflowError``), ``1e400`` into ``inf``, accepts ``NaN``,
and ``int()`` of more than 4300 digits raises ``ValueError`` on 3.11+.  Every parser of
a job line, a results line, a limit or a count goes through here instead, so each of
those cases is one ``UntrustedInputError`` (a ``ValueError``) naming the cause, before
anything is built from the input.
"""

from __future__ import annotations

import functools
import itertools
import math
import reprlib
from collections.abc import Iterator

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from typing import Any, BinaryIO

__all__ = [
    "MAX_DEPTH",
    "MAX_DIGITS",
    "MAX_INT",
    "UntrustedInputError",
    "bounded_lines",
    "check_int",
    "loads",
    "shown",
]

#: Levels of arrays and objects a JSON line may nest (a job needs 3).
MAX_DEPTH = 32
#: Digits a whole number may have (``2**63`` has 19).
MAX_DIGITS = 19
#: The largest magnitude of a JSON integer (a C ``int64_t`` holds it).
MAX_INT = 2**63 - 1

#: Every byte but the four brackets, deleted before the brackets are counted.
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
#: How each bracket moves the depth.
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


@functools.cache
def _string() -> re.Pattern[bytes]:
    """A JSON string, escapes included: runs of plain bytes and each escape between them,
    up to its closing quote or the end of the data.  It always matches where it starts,
    so the regex engine never backtracks or retries: one linear pass over any input.
    Compiled on first use (``re`` costs every run's start-up, and a run parses no JSON).
    """
    import re

    return re.compile(rb'"[^"\\]*(?:\\(?:.|\Z)[^"\\]*)*(?:"|\Z)', re.DOTALL)


class UntrustedInputError(ValueError):
    """Input refused before it was parsed further: too long, too deep, a number out of
    range, not UTF-8.  The message says which."""


def _depth(data: bytes) -> int:
    """The deepest nesting of arrays and objects in the JSON text ``data``, counted in
    C-speed passes (strings first removed, so brackets inside them do not count)."""
    brackets = _string().sub(b"", data).translate(None, _NOT_BRACKETS)
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _int(text: str) -> int:
    """``parse_int`` of ``json.loads``: at most ``MAX_DIGITS`` digits, within
    ``MAX_INT``."""
    digits = text.lstrip("-")
    if len(digits) > MAX_DIGITS or int(text) > MAX_INT or int(text) < -MAX_INT:
        shown = text if len(text) <= 24 else f"{text[:20]}... ({len(digits)} digits)"
        raise UntrustedInputError(f"the number {shown} is out of range (at most {MAX_INT})")
    return int(text)


def _float(text: str) -> float:
    """``parse_float`` of ``json.loads``: finite (``1e400`` is refused, not ``inf``)."""
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 24 else f"{text[:20]}..."
        raise UntrustedInputError(f"the number {shown} is out of range (not finite)")
    return value


def _constant(text: str) -> object:
    """``parse_constant`` of ``json.loads``: ``NaN`` and the infinities are not JSON."""
    raise UntrustedInputError(f"{text} is not a JSON number")


def loads(data: bytes, *, max_bytes: int | None) -> Any:
    """The JSON value of ``data`` (UTF-8), refused with ``UntrustedInputError`` when it
    is longer than ``max_bytes`` (None: any length), nests deeper than ``MAX_DEPTH``,
    has an integer beyond ``MAX_INT``, a float that is not finite, ``NaN`` or
    ``Infinity``, or is not UTF-8; ``json.JSONDecodeError`` (also a ``ValueError``) when
    it is not JSON.  Strings may hold any code point JSON can escape, lone surrogates
    included: the callers check their fields."""
    if max_bytes is not None and len(data.rstrip(b"\r\n")) > max_bytes:
        raise UntrustedInputError(f"longer than {max_bytes} bytes")
    depth = _depth(data)
    if depth > MAX_DEPTH:
        raise UntrustedInputError(f"nested {depth} levels deep (at most {MAX_DEPTH})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UntrustedInputError(f"not UTF-8 text: {exc}") from None
    import json  # a run parses no JSON: json and re cost every run's start-up

    return json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)


def shown(value: object, width: int = 80) -> str:
    """``repr(value)`` for an error message, cut at ``width`` characters: a hostile value
    (a huge list, a string of megabytes, an int past Python's digit limit, whose
    ``repr`` raises) never makes the message huge or the formatting fail."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an int of {value.bit_length()} bits"
    text = reprlib.repr(value)
    return text if len(text) <= width else f"{text[: width - 3]}..."


def check_int(value: object, what: str) -> None:
    """``ValueError`` naming ``what`` unless ``value``, when an int, is within
    ``MAX_INT`` (an int from a caller's dict, not a JSON line, e.g. a job's id)."""
    if isinstance(value, int) and not -MAX_INT <= value <= MAX_INT:
        raise ValueError(f"{what} is out of range: an int must be within +-(2**63 - 1)")


def bounded_lines(stream: BinaryIO, max_bytes: int) -> Iterator[bytes]:
    """The lines of the binary ``stream``, each at most ``max_bytes + 1`` bytes: the
    rest of a longer line is read and dropped a chunk at a time, so a line of any length
    costs at most that much memory and still counts as one line (too long for
    ``loads``)."""
    while True:
        line = stream.readline(max_bytes + 1)
        if not line:
            return
        rest = line
        while not rest.endswith(b"\n"):
            rest = stream.readline(max_bytes + 1)
            if not rest:
                break
        yield line
