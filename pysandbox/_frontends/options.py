"""Limit options with units for argparse parsers: the command line's and the notebook
magic's.

``add_limit_options(parser)`` adds one option per ``Limits`` field (``--wall-time 2``,
``--cpu-time 500ms``, ``--memory 256M``, ``--processes 16``, ``--truncate-output``...);
``limits_from(namespace)`` turns what was parsed into a ``Limits``.  Each value is
checked while it is parsed, so a bad one is an argparse usage error that names the
option: zero or a negative value is refused, never taken as "unlimited".

Sizes are bytes, or a number with a binary unit: ``K``/``KiB`` = 1024, ``M``/``MiB`` =
1024**2, ``G``/``GiB`` = 1024**3, ``T``/``TiB`` = 1024**4 (any case).  ``KB``, ``MB``...
are refused, since they could mean powers of 1000.  Times are seconds, with an optional
``s`` or ``ms`` suffix (``2``, ``0.5``, ``1.5s``, ``500ms``).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
from collections.abc import Callable

from .._model.limits import MAX_LIMIT, MIN_OPEN_FILES, MIN_PROCESSES, Limits

__all__ = [
    "LIMIT_OPTIONS",
    "LimitOption",
    "add_limit_options",
    "limits_from",
    "parse_count",
    "parse_seconds",
    "parse_size",
    "refuse_long",
]

_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_SIZE = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(?P<unit>[kmgt]?)(?P<suffix>i?b?)")
_SECONDS = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(?P<unit>s|ms)?")


#: Characters a number may have: more is refused before any conversion (``float`` of
#: 400 digits is ``inf``, ``int`` of 5000 raises on Python 3.11+).
MAX_NUMBER_CHARS = 40


def refuse_long(text: str) -> None:
    """Refuse a number written with more than ``MAX_NUMBER_CHARS`` characters."""
    if len(text.strip()) > MAX_NUMBER_CHARS:
        raise argparse.ArgumentTypeError(
            f"too long for a number ({len(text)} characters, at most {MAX_NUMBER_CHARS}); "
            f"got {text[:20]!r}..."
        )


def _refuse_negative(text: str) -> None:
    """Refuse ``-5`` and the like with the message that says why, not as a bad format,
    and a number too long to be one."""
    refuse_long(text)
    if text.strip().startswith("-"):
        raise argparse.ArgumentTypeError(
            f"must be greater than 0 (no value means unlimited), got {text!r}"
        )


def _positive(value: float, text: str, most: float, unit: str) -> None:
    """Refuse ``value`` (parsed from ``text``) unless it is in ``(0, most]``."""
    if not value > 0:
        raise argparse.ArgumentTypeError(
            f"must be greater than 0 (no value means unlimited), got {text!r}"
        )
    if value > most:
        raise argparse.ArgumentTypeError(f"must be at most {most:g} {unit}, got {text!r}")


def parse_size(text: str) -> int:
    """Bytes from ``"4096"``, ``"64k"``, ``"256M"``, ``"1.5GiB"``: binary units, > 0.

    Raises ``argparse.ArgumentTypeError`` (argparse prefixes the option's name).
    """
    _refuse_negative(text)
    match = _SIZE.fullmatch(text.strip().lower())
    if match is None or match["suffix"] not in ("", "ib"):
        raise argparse.ArgumentTypeError(
            f"expected bytes or a number with a binary unit K, M, G or T "
            f"(K = KiB = 1024), like 4096, 64K or 256M; got {text!r}"
        )
    if match["suffix"] == "ib" and not match["unit"]:
        raise argparse.ArgumentTypeError(f"'iB' needs a unit before it (KiB, MiB...); got {text!r}")
    if not match["unit"] and "." in match["number"]:
        raise argparse.ArgumentTypeError(f"a number of bytes must be whole; got {text!r}")
    exact = float(match["number"]) * _UNITS[match["unit"]]
    _positive(exact, text, MAX_LIMIT, "bytes")
    value = math.floor(exact)
    _positive(value, text, MAX_LIMIT, "bytes")
    return value


def parse_seconds(text: str) -> float:
    """Seconds from ``"2"``, ``"0.5"``, ``"1.5s"``, ``"500ms"``: finite and > 0.

    Raises ``argparse.ArgumentTypeError`` (argparse prefixes the option's name).
    """
    _refuse_negative(text)
    match = _SECONDS.fullmatch(text.strip().lower())
    if match is None:
        raise argparse.ArgumentTypeError(
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
            raise argparse.ArgumentTypeError(f"expected a whole number; got {text!r}") from None
        _positive(value, text, MAX_LIMIT, "")
        if value < minimum:
            raise argparse.ArgumentTypeError(
                f"must be at least {minimum} to start a program, got {text!r}"
            )
        return value

    return parse


@dataclasses.dataclass(frozen=True)
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
    LimitOption(
        "--processes", "processes", parse_count(MIN_PROCESSES), "N", "processes and threads"
    ),
    LimitOption(
        "--open-files", "open_files", parse_count(MIN_OPEN_FILES), "N", "descriptors per process"
    ),
)


def _shown(option: LimitOption, value: float) -> str:
    """A default as ``--help`` shows it: ``1 s``, ``256M``, ``64``."""
    if option.parse is parse_seconds:
        return f"{value:g} s"
    if option.parse is parse_size:
        for unit in "TGMK":
            if value % _UNITS[unit.lower()] == 0:
                return f"{int(value) // _UNITS[unit.lower()]}{unit}"
    return f"{value:g}"


def add_limit_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """Add the limit options of ``LIMIT_OPTIONS`` and ``--truncate-output`` to ``parser``
    (or an argument group), in a group of their own on a parser.

    Each option's ``dest`` is the ``Limits`` field it sets; unset options stay None.
    """
    group = (
        parser.add_argument_group("limits (sizes take K, M, G, T = powers of 1024)")
        if isinstance(parser, argparse.ArgumentParser)
        else parser
    )
    defaults = Limits()
    for option in LIMIT_OPTIONS:
        group.add_argument(
            option.flag,
            dest=option.field,
            type=option.parse,
            metavar=option.metavar,
            help=f"{option.what} (default {_shown(option, getattr(defaults, option.field))})",
        )
    group.add_argument(
        "--truncate-output",
        dest="truncate_output",
        action="store_true",
        default=None,
        help="keep the first bytes of stdout/stderr up to their limits and let the program "
        "run on (default: a byte past a limit kills it)",
    )


def limits_from(namespace: argparse.Namespace, base: Limits | None = None) -> Limits:
    """The ``Limits`` that the parsed limit options ask for: ``base`` (``Limits()`` when
    None) with every option that was given replacing its field."""
    given = {
        field: getattr(namespace, field)
        for field in [option.field for option in LIMIT_OPTIONS] + ["truncate_output"]
        if getattr(namespace, field, None) is not None
    }
    return dataclasses.replace(base if base is not None else Limits(), **given)
