# SPDX-License-Identifier: MIT
"""Limits written as text, for people: sizes and times with units, and one row per limit.

Sizes are bytes, or a number with a binary unit: ``K``/``KiB`` = 1024, ``M``/``MiB`` =
1024**2, ``G``/``GiB`` = 1024**3, ``T``/``TiB`` = 1024**4 (any case).  ``KB``, ``MB``...
are refused, since they could mean powers of 1000.  Times are seconds, with an optional
``s`` or ``ms`` suffix (``2``, ``0.5``, ``1.5s``, ``500ms``).  Zero or a negative value is
refused, never taken as "unlimited".  ``LIMIT_OPTIONS`` is the one table of them that
the command line, the notebook magic, Job JSON and the pytest markers all read.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

from .limits import MAX_LIMIT, MIN_OPEN_FILES, MIN_PROCESSES
from .record import record

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import re

__all__ = [
    "LIMIT_OPTIONS",
    "MAX_NUMBER_CHARS",
    "UNITS",
    "LimitOption",
    "parse_count",
    "parse_seconds",
    "parse_size",
    "refuse_long",
]

#: The binary units of a size, by their lower-case letter.
UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A size and a time, compiled on first use (``re`` costs every run's start-up)."""
    import re

    return (
        re.compile(r"(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(?P<unit>[kmgt]?)(?P<suffix>i?b?)"),
        re.compile(r"(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(?P<unit>s|ms)?"),
    )


#: Characters a number may have: more is refused before any conversion (``float`` of
#: 400 digits is ``inf``, ``int`` of 5000 raises on Python 3.11+).
MAX_NUMBER_CHARS = 40


def refuse_long(text: str) -> None:
    """Refuse a number written with more than ``MAX_NUMBER_CHARS`` characters."""
    if len(text.strip()) > MAX_NUMBER_CHARS:
        raise ValueError(
            f"too long for a number ({len(text)} characters, at most {MAX_NUMBER_CHARS}); "
            f"got {text[:20]!r}..."
        )


def _refuse_negative(text: str) -> None:
    """Refuse ``-5`` and the like with the message that says why, not as a bad format,
    and a number too long to be one."""
    refuse_long(text)
    if text.strip().startswith("-"):
        raise ValueError(f"must be greater than 0 (no value means unlimited), got {text!r}")


def _positive(value: float, text: str, most: float, unit: str) -> None:
    """Refuse ``value`` (parsed from ``text``) unless it is in ``(0, most]``."""
    if not value > 0:
        raise ValueError(f"must be greater than 0 (no value means unlimited), got {text!r}")
    if value > most:
        raise ValueError(f"must be at most {most:g} {unit}, got {text!r}")


def parse_size(text: str) -> int:
    """Bytes from ``"4096"``, ``"64k"``, ``"256M"``, ``"1.5GiB"``: binary units, > 0.

    Raises ``ValueError`` with a message that reads after the option's name.
    """
    _refuse_negative(text)
    match = _patterns()[0].fullmatch(text.strip().lower())
    if match is None or match["suffix"] not in ("", "ib"):
        raise ValueError(
            f"expected bytes or a number with a binary unit K, M, G or T "
            f"(K = KiB = 1024), like 4096, 64K or 256M; got {text!r}"
        )
    if match["suffix"] == "ib" and not match["unit"]:
        raise ValueError(f"'iB' needs a unit before it (KiB, MiB...); got {text!r}")
    if not match["unit"] and "." in match["number"]:
        raise ValueError(f"a number of bytes must be whole; got {text!r}")
    exact = float(match["number"]) * UNITS[match["unit"]]
    _positive(exact, text, MAX_LIMIT, "bytes")
    value = math.floor(exact)
    _positive(value, text, MAX_LIMIT, "bytes")
    return value


def parse_seconds(text: str) -> float:
    """Seconds from ``"2"``, ``"0.5"``, ``"1.5s"``, ``"500ms"``: finite and > 0.

    Raises ``ValueError`` with a message that reads after the option's name.
    """
    _refuse_negative(text)
    match = _patterns()[1].fullmatch(text.strip().lower())
    if match is None:
        raise ValueError(
            f"expected seconds, optionally with s or ms, like 2, 0.5, 1.5s or 500ms; got {text!r}"
        )
    value = float(match["number"]) / (1000 if match["unit"] == "ms" else 1)
    _positive(value, text, MAX_LIMIT, "seconds")
    return value


def parse_count(minimum: int) -> Callable[[str], int]:
    """A parser of whole numbers of at least ``minimum`` (and at most ``MAX_LIMIT``)."""

    def parse(text: str) -> int:
        refuse_long(text)
        try:
            if not text.isascii():  # int() takes any script's digits
                raise ValueError(text)
            value = int(text.strip())
        except ValueError:
            raise ValueError(f"expected a whole number; got {text!r}") from None
        _positive(value, text, MAX_LIMIT, "")
        if value < minimum:
            raise ValueError(f"must be at least {minimum} to start a program, got {text!r}")
        return value

    return parse


@record
class LimitOption:
    """One command-line option and the ``Limits`` field it sets (also its ``dest``)."""

    flag: str
    field: str
    parse: Callable[[str], float]
    metavar: str
    what: str


def _size(flag: str, field: str, what: str) -> LimitOption:
    return LimitOption(flag, field, parse_size, "SIZE", what)


#: Every limit option, in the order ``--help`` lists them.
LIMIT_OPTIONS = (
    LimitOption("--wall-time", "wall_time", parse_seconds, "SECONDS", "wall-clock time"),
    LimitOption("--cpu-time", "cpu_time", parse_seconds, "SECONDS", "CPU time of the tree"),
    _size("--memory", "memory", "address space of each process"),
    _size("--stdout-limit", "stdout", "bytes of stdout kept"),
    _size("--stderr-limit", "stderr", "bytes of stderr kept"),
    _size("--file-size", "file_size", "largest file written"),
    _size("--disk", "disk", "size of the writable /sandbox"),
    _size("--files-out", "files_out", "bytes of output files returned"),
    LimitOption(
        "--files-out-count", "files_out_count", parse_count(1), "N", "output files returned"
    ),
    _size("--displays", "displays", "bytes of rich outputs returned (sessions)"),
    LimitOption("--displays-count", "displays_count", parse_count(1), "N", "rich outputs returned"),
    _size("--values", "values", "bytes of variables passed in or out (sessions)"),
    LimitOption(
        "--processes", "processes", parse_count(MIN_PROCESSES), "N", "processes and threads"
    ),
    LimitOption(
        "--open-files", "open_files", parse_count(MIN_OPEN_FILES), "N", "descriptors per process"
    ),
)
