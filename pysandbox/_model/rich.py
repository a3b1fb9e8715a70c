# SPDX-License-Identifier: MIT
"""Rich outputs from a sandbox: ``Bundle``, a MIME bundle (what a notebook would show of
a figure, a ``display()`` call or a value) checked and made safe to show.

The raw bundle comes from code that may be hostile: a dict of MIME type to bytes (the
images) or str (everything else).  ``checked_bundle`` (or ``Bundle(raw)``) refuses the
whole of it with ``BundleRefused`` when it is not such a dict, has more than
``MAX_TYPES`` keys, or holds more than ``max_bytes`` (keys and data, UTF-8, before and
after the checks); otherwise each entry of a type in ``MIME_TYPES`` goes through its
check in ``rich_checks`` and is kept as it comes out, or left out (``Bundle.dropped``
says why), and every other type is left out.  Nothing is ever unpickled or evaluated.

A ``Bundle`` is immutable: bytes and str values in a fixed order (a notebook's
preference, ``MIME_TYPES``); ``application/json`` is kept as its compact JSON text and
parsed on request (``Bundle.json()``, ``Bundle.to_json()``), so no caller can change it.
The checks import what they need (``nh3``, ``pyexpat``, ``json``, ``re``) when a bundle
holds their type: importing this module loads none of them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from .rich_checks import CHECKS, EntryRefused
from .untrusted import UntrustedInputError, shown

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "MAX_BUNDLE_BYTES",
    "MAX_TYPES",
    "MIME_TYPES",
    "Bundle",
    "BundleRefused",
    "checked_bundle",
]

#: The MIME types a bundle keeps, in the order a notebook prefers them.
MIME_TYPES = tuple(CHECKS)
#: ``Bundle(raw)``'s default cap on a bundle's bytes.
MAX_BUNDLE_BYTES = 32 * 1024 * 1024
#: Keys a raw bundle may have (known types or not).
MAX_TYPES = 64
#: Reasons ``Bundle.dropped`` lists; more are counted.
_DROPPED_LISTED = 8


class BundleRefused(UntrustedInputError):
    """A raw bundle refused whole: not a dict of str to bytes or str, too many keys, or
    larger than its cap.  A ``ValueError``; the message says which."""


def _size(value: bytes | str) -> int:
    """Bytes of ``value``, a str counted as UTF-8 (lone surrogates as 3 bytes each)."""
    if isinstance(value, bytes) or value.isascii():
        return len(value)
    return len(value.encode("utf-8", "surrogatepass"))


def _entries(raw: object, max_bytes: int) -> list[tuple[str, bytes | str]]:
    """The raw bundle's items, or ``BundleRefused``: a dict of at most ``MAX_TYPES`` str
    keys to bytes or str (exactly those types), within ``max_bytes``."""
    if not isinstance(raw, dict):
        raise BundleRefused(f"a bundle must be a dict, not {type(raw).__name__}")
    # dict's own methods: a subclass's overrides are not asked.
    if dict.__len__(raw) > MAX_TYPES:
        raise BundleRefused(f"a bundle has {len(raw)} MIME types (at most {MAX_TYPES})")
    entries: list[tuple[str, bytes | str]] = []
    chars = 0
    for key, value in dict.items(raw):
        if type(key) is not str:
            raise BundleRefused(f"a MIME type must be a str, not {type(key).__name__}")
        if type(value) not in (bytes, str):
            raise BundleRefused(f"{shown(key)}: data must be bytes or str, not {shown(value)}")
        chars += len(key) + len(value)
        if chars > max_bytes:  # a str has at least as many bytes as characters
            raise BundleRefused(f"a bundle holds more than {max_bytes} bytes")
        entries.append((key, value))
    total = sum(_size(key) + _size(value) for key, value in entries)
    if total > max_bytes:
        raise BundleRefused(f"a bundle holds {total} bytes (at most {max_bytes})")
    return entries


def _checked(key: str, value: bytes | str) -> bytes | str:
    """The data of ``key`` kept, or ``EntryRefused``.  A check that fails in any other
    way leaves the data out too (fail closed), naming the error."""
    kind, check = CHECKS[key]
    if type(value) is not kind:
        raise EntryRefused(f"data must be {kind.__name__}, not {type(value).__name__}")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise EntryRefused("not UTF-8 text (a lone surrogate)") from None
    try:
        kept = check(value)
        if isinstance(kept, str):
            kept.encode("utf-8")
    except EntryRefused:
        raise
    except Exception as exc:
        raise EntryRefused(f"its check failed: {type(exc).__name__}") from None
    return kept


def _check(raw: object, max_bytes: int) -> tuple[dict[str, bytes | str], list[str]]:
    """The kept data by MIME type, in ``MIME_TYPES``' order, and why the rest was left
    out."""
    if type(max_bytes) is not int or max_bytes <= 0:
        raise ValueError(f"max_bytes must be a positive int, not {shown(max_bytes)}")
    kept: dict[str, bytes | str] = {}
    dropped: list[str] = []
    for key, value in _entries(raw, max_bytes):
        if key not in CHECKS:
            dropped.append(f"{shown(key, 60)}: not a MIME type pysandbox shows")
            continue
        try:
            kept[key] = _checked(key, value)
        except EntryRefused as exc:
            dropped.append(f"{key}: {exc}")
    total = sum(_size(key) + _size(value) for key, value in kept.items())
    if total > max_bytes:
        raise BundleRefused(f"a bundle holds {total} bytes once made safe (at most {max_bytes})")
    ordered = {key: kept[key] for key in MIME_TYPES if key in kept}
    return ordered, dropped


def _listed(reasons: list[str]) -> tuple[str, ...]:
    if len(reasons) <= _DROPPED_LISTED:
        return tuple(reasons)
    more = len(reasons) - _DROPPED_LISTED + 1
    return (*reasons[: _DROPPED_LISTED - 1], f"and {more} more")


class Bundle(Mapping[str, "bytes | str"]):
    """What a notebook would show of one output of sandboxed code, made safe: a
    read-only mapping of MIME type to data, in the order a notebook prefers
    (``image/png``, ``image/jpeg``, ``image/svg+xml``, ``text/html``, ``text/markdown``,
    ``text/latex``, ``application/json``, ``text/plain``).

    Images are bytes (a whole PNG or JPEG, each side at most 16384 pixels); the rest is
    str: SVG rebuilt from an allowlist of elements and attributes, HTML cleaned by
    ``nh3``, Markdown with its HTML escaped, LaTeX without MathJax's link and HTML
    commands, plain text as it is, JSON as its compact text (``json()`` parses it).

    ``Bundle(raw, max_bytes=...)`` checks ``raw`` (a dict of MIME type to bytes or str,
    as a sandbox sends it): ``ValueError`` (``BundleRefused``) when it is not one or
    holds more than ``max_bytes``; an entry that fails its check, or of another type, is
    left out, and ``dropped`` says why.  Bundles compare and hash by their items, and
    pickle as they are.
    """

    __slots__ = ("_data", "dropped")

    _data: dict[str, bytes | str]
    #: Why data was left out, one line per MIME type (at most 8 lines).
    dropped: tuple[str, ...]

    def __init__(self, raw: object = None, *, max_bytes: int = MAX_BUNDLE_BYTES) -> None:
        data, dropped = _check({} if raw is None else raw, max_bytes)
        object.__setattr__(self, "_data", data)
        object.__setattr__(self, "dropped", _listed(dropped))

    def __getitem__(self, mime_type: str) -> bytes | str:
        return self._data[mime_type]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Bundle is read-only: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"a Bundle is read-only: cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Bundle):
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == dict(other.items())
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._data.items()))

    def __repr__(self) -> str:
        parts = [
            f"{key}: {len(value)} {'bytes' if isinstance(value, bytes) else 'chars'}"
            for key, value in self._data.items()
        ]
        if self.dropped:
            parts.append(f"{len(self.dropped)} dropped")
        return f"Bundle({', '.join(parts)})"

    def __reduce__(self) -> tuple[type[Bundle], tuple[()], tuple[dict[str, Any], tuple[str, ...]]]:
        """Pickle and copy as they are (the data was checked when the bundle was made),
        naming ``pysandbox.Bundle`` alone: no pickle depends on the internal layout."""
        return type(self), (), (dict(self._data), self.dropped)

    def __setstate__(self, state: tuple[dict[str, Any], tuple[str, ...]]) -> None:
        """A pickled bundle's items, as they were: still only known MIME types, bytes for
        the images and str for the rest."""
        data, dropped = state
        for key, value in data.items():
            if key not in CHECKS or type(value) is not CHECKS[key][0]:
                raise BundleRefused(f"a pickled bundle holds {shown(key)}: {shown(value)}")
        object.__setattr__(self, "_data", {key: data[key] for key in MIME_TYPES if key in data})
        object.__setattr__(self, "dropped", tuple(str(line) for line in dropped))

    def json(self) -> Any:
        """The ``application/json`` data, parsed anew on each call; ``KeyError`` without
        it."""
        import json

        return json.loads(self._data["application/json"])

    def to_json(self) -> dict[str, Any]:
        """The bundle as Jupyter's ``display_data`` holds it (its ``data``): images as
        base64 text, JSON parsed, the rest as it is.  Base64 makes images a third
        larger than ``max_bytes`` counted them."""
        import base64

        shown: dict[str, Any] = {}
        for key, value in self._data.items():
            if isinstance(value, bytes):
                shown[key] = base64.b64encode(value).decode("ascii")
            elif key == "application/json":
                shown[key] = self.json()
            else:
                shown[key] = value
        return shown

    @classmethod
    def from_json(cls, data: object, *, max_bytes: int = MAX_BUNDLE_BYTES) -> Bundle:
        """The bundle ``to_json()`` wrote, checked again as a raw bundle is (so a file
        of results can be trusted no more than a sandbox): ``BundleRefused`` when it is
        not such a dict, base64 that does not decode or JSON nested too deep."""
        return cls(_from_json(data, max_bytes), max_bytes=max_bytes)

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, Any]:
        """How IPython and Jupyter show a bundle: as the output it is."""
        return self.to_json()


def _from_json(data: object, max_bytes: int) -> dict[str, object]:
    """``to_json()``'s dict as a raw bundle: images decoded, JSON written as text."""
    if not isinstance(data, dict):
        raise BundleRefused(f"a bundle must be a dict, not {type(data).__name__}")
    if len(data) > MAX_TYPES:
        raise BundleRefused(f"a bundle has {len(data)} MIME types (at most {MAX_TYPES})")
    import base64
    import binascii
    import json

    raw: dict[str, object] = {}
    for key, value in data.items():
        if key in ("image/png", "image/jpeg") and isinstance(value, str):
            if len(value) > max_bytes * 4 // 3 + 4:
                raise BundleRefused(f"a bundle holds more than {max_bytes} bytes")
            try:
                raw[key] = base64.b64decode(value.encode("ascii"), validate=True)
            except (binascii.Error, UnicodeEncodeError):
                raise BundleRefused(f"{key}: invalid base64") from None
        elif key == "application/json":
            try:
                raw[key] = json.dumps(value, ensure_ascii=False, allow_nan=False)
            except (TypeError, ValueError, RecursionError) as exc:
                raise BundleRefused(f"{key}: not JSON data ({type(exc).__name__})") from None
        else:
            raw[key] = value
    return raw


def checked_bundle(raw: object, *, max_bytes: int) -> Bundle | None:
    """The bundle a sandbox sent, checked and made safe (``Bundle(raw,
    max_bytes=max_bytes)``), or None when nothing of it is left; ``BundleRefused`` (a
    ``ValueError``) when it is refused whole."""
    if raw is None:  # Bundle() is empty, but a sandbox's None is no bundle
        raise BundleRefused("a bundle must be a dict, not NoneType")
    bundle = Bundle(raw, max_bytes=max_bytes)
    return bundle if bundle else None
