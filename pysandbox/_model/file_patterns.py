# SPDX-License-Identifier: MIT
"""``files_include`` and ``files_exclude``: which of the files a run leaves in its
working directory come back.

Each is an iterable of glob patterns, matched against a file's path relative to
``/sandbox`` with ``fnmatch`` rules where ``*`` also matches ``/`` (glibc's
``fnmatch(3)`` with flags 0 in the init, ``fnmatch.fnmatchcase`` in a session's keeper);
a pattern also matches a file below a directory it matches.  A file comes back iff
there is no include pattern or one matches it, and no exclude pattern matches it.

The checks refuse what the two matchers would read differently: a backslash (an escape
for glibc, a plain character for Python) and the bracket forms ``[^``, ``[:``, ``[=``
and ``[.`` (negation, classes, equivalence classes and collating symbols for glibc;
plain characters for Python).  Pure; imported only by the calls that are given
patterns.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["MAX_PATTERNS", "MAX_PATTERN_LENGTH", "check_patterns"]

#: Patterns of each kind at most.
MAX_PATTERNS = 64
#: Characters of one pattern at most.
MAX_PATTERN_LENGTH = 1024
#: What the two matchers read differently, refused.
_AMBIGUOUS = ("\\", "[^", "[:", "[=", "[.")


def check_patterns(patterns: object, name: str) -> tuple[str, ...]:
    """``patterns`` (``files_include`` or ``files_exclude``, as ``name``) as a tuple:
    None gives ``()``.  ``TypeError`` naming ``name`` for a bare str (a common mistake:
    it would be its characters) or bytes, a non-iterable or an item not a str;
    ``ValueError`` for more than ``MAX_PATTERNS`` patterns, or one empty, longer than
    ``MAX_PATTERN_LENGTH``, holding NUL, a backslash, or ``[^``, ``[:``, ``[=`` or
    ``[.``, or not encodable as UTF-8."""
    if patterns is None:
        return ()
    if isinstance(patterns, (str, bytes, bytearray)):
        raise TypeError(
            f"{name} must be an iterable of str patterns, not a bare "
            f"{type(patterns).__name__} (write [{patterns!r}] for one pattern)"
        )
    if not isinstance(patterns, Iterable):
        raise TypeError(
            f"{name} must be an iterable of str patterns, not {type(patterns).__name__}"
        )
    items = []
    for pattern in patterns:
        if not isinstance(pattern, str):
            raise TypeError(f"{name} items must be str, not {type(pattern).__name__}")
        items.append(pattern)
        if len(items) > MAX_PATTERNS:
            raise ValueError(f"{name} has more than {MAX_PATTERNS} patterns")
    for pattern in items:
        _check_one(pattern, name)
    return tuple(items)


def _check_one(pattern: str, name: str) -> None:
    """``ValueError`` naming ``name`` unless ``pattern`` is one both matchers read alike."""
    if not pattern:
        raise ValueError(f"{name} has an empty pattern")
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise ValueError(f"{name} has a pattern longer than {MAX_PATTERN_LENGTH} characters")
    if "\0" in pattern:
        raise ValueError(f"{name} has a pattern holding NUL: {pattern!r}")
    try:
        pattern.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{name} has a pattern not encodable as UTF-8: {exc.reason}") from None
    for form in _AMBIGUOUS:
        if form in pattern:
            raise ValueError(
                f"{name} has a pattern holding {form!r}, which glibc's fnmatch and "
                f"Python's read differently: {pattern!r}"
            )
