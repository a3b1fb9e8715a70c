# SPDX-License-Identifier: MIT
"""Limit options with units for argparse parsers: the command line's and the notebook
magic's.

``add_limit_options(parser)`` adds one option per ``Limits`` field (``--wall-time 2``,
``--cpu-time 500ms``, ``--memory 256M``, ``--processes 16``, ``--truncate-output``...);
``limits_from(namespace)`` turns what was parsed into a ``Limits``.  Each value is
checked while it is parsed, so a bad one is an argparse usage error that names the
option: zero or a negative value is refused, never taken as "unlimited".  The units and
the table of options are the model's (``_model/units.py``); this is the argparse glue.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .._model.limits import Limits
from .._model.record import replace
from .._model.units import LIMIT_OPTIONS, UNITS, LimitOption, parse_seconds, parse_size

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import NoReturn, Protocol, TypeVar

    T = TypeVar("T")

    class Usage(Protocol):
        """What a command needs of its parser: usage errors (argparse's, or the stand-in
        for it of a command line parsed without argparse, which makes argparse's)."""

        def error(self, message: str) -> NoReturn: ...


__all__ = [
    "add_limit_options",
    "argparse_type",
    "limits_from",
    "pairs",
]


def argparse_type(parse: Callable[[str], T]) -> Callable[[str], T]:
    """``parse`` as an argparse type: its ``ValueError`` becomes the usage error argparse
    prints after the option's name, with the same message."""

    def parse_option(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            import argparse  # loaded already by whoever made the parser

            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse_option


def _shown(option: LimitOption, value: float) -> str:
    """A default as ``--help`` shows it: ``1 s``, ``256M``, ``64``."""
    if option.parse is parse_seconds:
        return f"{value:g} s"
    if option.parse is parse_size:
        for unit in "TGMK":
            if value % UNITS[unit.lower()] == 0:
                return f"{int(value) // UNITS[unit.lower()]}{unit}"
    return f"{value:g}"


def add_limit_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """Add the limit options of ``LIMIT_OPTIONS`` and ``--truncate-output`` to ``parser``
    (or an argument group), in a group of their own on a parser.

    Each option's ``dest`` is the ``Limits`` field it sets; unset options stay None.
    """
    import argparse  # only parsers need it: loaded already by whoever made this one

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
            type=argparse_type(option.parse),
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
    return replace(base if base is not None else Limits(), **given)


def pairs(parser: Usage, option: str, specs: Sequence[str]) -> dict[str, str]:
    """``NAME=VALUE`` strings as a dict; a usage error naming ``option`` otherwise."""
    pairs: dict[str, str] = {}
    for spec in specs:
        name, equals, value = spec.partition("=")
        if not equals or not name:
            parser.error(f"argument {option}: expected NAME=VALUE, got {spec!r}")
        pairs[name] = value
    return pairs
