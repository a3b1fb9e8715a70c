# SPDX-License-Identifier: MIT
"""The check of each MIME type a rich output may hold: its data from a sandbox in, the
data to keep out, or ``EntryRefused`` saying why it was left out.

Every check is bounded by its input's length: the PNG chunks and the JPEG segments are
walked (a length field is compared with what is there, never allocated), the HTML's
nesting is counted before ``nh3`` parses it, the JSON goes through ``untrusted.loads``,
the SVG through ``rich_svg``.  No regex here can backtrack: each is a run of one class.
``nh3``, ``re``, ``json`` and ``zlib`` are imported by the checks that use them.
"""

from __future__ import annotations

import functools
from types import MappingProxyType

from .rich_svg import SvgRefused, clean_svg

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from collections.abc import Callable, Mapping

__all__ = [
    "CHECKS",
    "HTML_ATTRIBUTES",
    "HTML_TAGS",
    "MAX_HTML_DEPTH",
    "MAX_PIXELS_SIDE",
    "EntryRefused",
    "check_html",
    "check_jpeg",
    "check_json",
    "check_latex",
    "check_markdown",
    "check_png",
    "check_svg",
    "check_text",
]

#: The largest width or height of a PNG or JPEG, in pixels.
MAX_PIXELS_SIDE = 16384
#: How deep HTML may nest, counted from its tags before it is parsed (an upper bound of
#: the parsed depth; ``nh3``'s time grows with the square of the depth).
MAX_HTML_DEPTH = 512

#: The HTML tags kept: text, lists, tables (a pandas ``DataFrame``'s among them), images.
HTML_TAGS = frozenset(
    [
        "a",
        "abbr",
        "b",
        "blockquote",
        "br",
        "caption",
        "code",
        "col",
        "colgroup",
        "dd",
        "del",
        "details",
        "div",
        "dl",
        "dt",
        "em",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "hr",
        "i",
        "img",
        "ins",
        "kbd",
        "li",
        "mark",
        "ol",
        "p",
        "pre",
        "q",
        "s",
        "samp",
        "small",
        "span",
        "strong",
        "sub",
        "summary",
        "sup",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "u",
        "ul",
        "var",
    ]
)
#: The attributes kept on those tags (``"*"``: on any); no ``style``, ``id`` or handler.
HTML_ATTRIBUTES: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "*": frozenset({"class", "title", "lang", "dir"}),
        "a": frozenset({"href"}),
        "img": frozenset({"src", "alt", "width", "height"}),
        "table": frozenset({"border"}),
        "th": frozenset({"colspan", "rowspan", "align", "valign", "scope"}),
        "td": frozenset({"colspan", "rowspan", "align", "valign"}),
        "col": frozenset({"span"}),
        "colgroup": frozenset({"span"}),
        "ol": frozenset({"start", "type"}),
    }
)
#: Tags left out with everything inside them.
_HTML_DROPPED_WITH_CONTENT = frozenset({"script", "style", "template", "noscript", "iframe"})
#: Elements without an end tag: they do not nest.
_HTML_VOID = frozenset(
    [
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    ]
)
_IMAGE_DATA_URLS = ("data:image/png;base64,", "data:image/jpeg;base64,")
#: LaTeX commands that make links, load code or set HTML attributes in MathJax.
_LATEX_REFUSED = frozenset(
    [
        "href",
        "url",
        "require",
        "class",
        "cssId",
        "style",
        "unicode",
        "html",
        "htmlClass",
        "htmlStyle",
        "htmlId",
        "htmlData",
        "data",
        "csname",
    ]
)

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: PNG chunks walked at most (libpng writes 8 KiB of image data a chunk).
_MAX_CHUNKS = 100_000
#: JPEG segments before the scan walked at most (a real image has tens).
_MAX_SEGMENTS = 10_000
#: ``FF`` fill bytes a JPEG may put before a marker.
_MAX_FILL = 64
#: JPEG markers that start a frame, holding the image's size.
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
#: JPEG markers without a length: SOI, EOI, RSTn, TEM.
_JPEG_BARE = frozenset({0xD8, 0xD9, 0x01, *range(0xD0, 0xD8)})


class EntryRefused(ValueError):
    """One MIME type's data was left out of its bundle; the message says why."""


def _side(width: int, height: int, what: str) -> None:
    for name, value in (("width", width), ("height", height)):
        if not 0 < value <= MAX_PIXELS_SIDE:
            raise EntryRefused(f"{what} {name} {value} is not within 1 to {MAX_PIXELS_SIDE}")


def check_png(data: bytes) -> bytes:
    """A whole PNG: its signature, an ``IHDR`` first (its CRC right, each side within
    ``MAX_PIXELS_SIDE``), chunks that fit one after the other, an ``IDAT``, ``IEND`` at
    the very end.  A truncated file fails the walk."""
    import struct
    import zlib

    if not data.startswith(_PNG_SIGNATURE) or len(data) < 8 + 25 + 12:
        raise EntryRefused("not a PNG (no signature or too short)")
    view = memoryview(data)
    length, kind = struct.unpack_from(">I4s", data, 8)
    if kind != b"IHDR" or length != 13:
        raise EntryRefused("the PNG does not start with its IHDR chunk")
    width, height, depth, colour = struct.unpack_from(">IIBB", data, 16)
    if struct.unpack_from(">I", data, 29)[0] != zlib.crc32(view[12:29]):
        raise EntryRefused("the PNG's IHDR chunk has a wrong CRC")
    _side(width, height, "the PNG's")
    if depth not in (1, 2, 4, 8, 16) or colour not in (0, 2, 3, 4, 6):
        raise EntryRefused("the PNG's IHDR has an unknown bit depth or colour type")
    offset, seen, kind, chunks = 8, set(), b"", 0
    while offset < len(data):
        if chunks > _MAX_CHUNKS:
            raise EntryRefused(f"the PNG has more than {_MAX_CHUNKS} chunks")
        if offset + 12 > len(data):
            raise EntryRefused("the PNG is truncated inside a chunk header")
        length, kind = struct.unpack_from(">I4s", data, offset)
        offset += 12 + length
        if offset > len(data):
            raise EntryRefused("the PNG is truncated: a chunk runs past its end")
        seen.add(kind)
        chunks += 1
        if kind == b"IEND":
            break
    if offset != len(data) or kind != b"IEND" or b"IDAT" not in seen:
        raise EntryRefused("the PNG does not end with IEND after its image data")
    return data


def check_jpeg(data: bytes) -> bytes:
    """A JPEG: ``FF D8 FF`` first, ``FF D9`` last (after zero padding), the segments
    before the scan fitting one after the other, a frame header among them whose sides
    are within ``MAX_PIXELS_SIDE``."""
    import struct

    if not data.startswith(b"\xff\xd8\xff") or not data.rstrip(b"\0").endswith(b"\xff\xd9"):
        raise EntryRefused("not a JPEG (no FF D8 FF start or FF D9 end)")
    offset, size = 2, None
    for _ in range(_MAX_SEGMENTS):
        start = offset
        while offset < len(data) and offset - start <= _MAX_FILL and data[offset] == 0xFF:
            offset += 1
        if offset == start or offset - start > _MAX_FILL or offset + 3 > len(data):
            raise EntryRefused("the JPEG's segments do not follow each other")
        marker = data[offset]
        offset += 1
        if marker in _JPEG_BARE:
            continue
        (length,) = struct.unpack_from(">H", data, offset)
        if length < 2 or offset + length > len(data):
            raise EntryRefused("the JPEG is truncated: a segment runs past its end")
        if marker in _JPEG_SOF:
            if length < 7:
                raise EntryRefused("the JPEG's frame header is too short")
            height, width = struct.unpack_from(">HH", data, offset + 3)
            size = (width, height)
        offset += length
        if marker == 0xDA:
            break
    else:
        raise EntryRefused(f"the JPEG has more than {_MAX_SEGMENTS} segments before its scan")
    if size is None:
        raise EntryRefused("the JPEG has no frame header before its scan")
    _side(*size, "the JPEG's")
    return data


def check_svg(text: str) -> str:
    """The SVG rebuilt from ``rich_svg``'s allowlists."""
    try:
        return clean_svg(text)
    except SvgRefused as exc:
        raise EntryRefused(f"the SVG was refused: {exc}") from None


@functools.cache
def _tags() -> re.Pattern[str]:
    """An HTML tag's opening: ``<`` or ``</`` and a name (a run of one class: linear)."""
    import re

    return re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9]*)")


def _html_depth(text: str) -> int:
    """An upper bound of the HTML's nesting: start tags (but void ones) less end tags,
    at their highest."""
    depth = deepest = 0
    for match in _tags().finditer(text):
        if match.group(1):
            depth = max(depth - 1, 0)
        elif match.group(2).lower() not in _HTML_VOID:
            depth += 1
            deepest = max(deepest, depth)
    return deepest


def _html_attribute(tag: str, name: str, value: str) -> str | None:
    """``nh3``'s attribute filter: an image only from a PNG or JPEG ``data:`` URL, a link
    never to ``data:``."""
    lowered = value.strip().lower()
    if tag == "img" and name == "src":
        return value if lowered.startswith(_IMAGE_DATA_URLS) else None
    if tag == "a" and name == "href":
        return value if lowered.startswith(("http:", "https:", "mailto:")) else None
    return value


def check_html(text: str) -> str:
    """The HTML cleaned by ``nh3``: ``HTML_TAGS`` with ``HTML_ATTRIBUTES``, scripts and
    style sheets dropped with their content, comments dropped, links only to ``http``,
    ``https`` or ``mailto`` (never relative), each given ``rel="noopener noreferrer
    nofollow"`` and no ``target``, images only from PNG or JPEG ``data:`` URLs."""
    depth = _html_depth(text)
    if depth > MAX_HTML_DEPTH:
        raise EntryRefused(f"the HTML nests {depth} tags deep (at most {MAX_HTML_DEPTH})")
    import nh3

    return nh3.clean(
        text,
        tags=set(HTML_TAGS),
        clean_content_tags=set(_HTML_DROPPED_WITH_CONTENT),
        attributes={tag: set(names) for tag, names in HTML_ATTRIBUTES.items()},
        attribute_filter=_html_attribute,
        strip_comments=True,
        link_rel="noopener noreferrer nofollow",
        url_schemes={"http", "https", "mailto", "data"},
        # The filter above keeps no relative URL already: this is the second lock.
        url_relative="deny",
    )


@functools.cache
def _schemes() -> re.Pattern[str]:
    """The URL schemes that run code, before their colon (ASCII letters, no nesting)."""
    import re

    return re.compile(r"(?<![a-z])(javascript|vbscript)(?=\\?:)", re.IGNORECASE)


def check_markdown(text: str) -> str:
    """Markdown with no raw HTML and no image: ``&`` and ``<`` escaped (so no tag,
    autolink or entity forms; inside code they show as ``&amp;`` and ``&lt;``), ``![``
    written ``!\\[`` (an image would have the reader's browser fetch a URL the sandbox
    chose, a way out for its data), and a zero-width space between ``javascript`` or
    ``vbscript`` and its colon, so no link runs code."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace("![", "!\\[")
    return _schemes().sub("\\1\u200b", text)


@functools.cache
def _latex_commands() -> re.Pattern[str]:
    import re

    return re.compile(r"\\([a-zA-Z]+)")


def check_latex(text: str) -> str:
    """LaTeX without the MathJax commands that link, load extensions or set HTML
    attributes (``\\href``, ``\\require``, ``\\class``, ...): refused whole when it has
    one."""
    for match in _latex_commands().finditer(text):
        if match.group(1) in _LATEX_REFUSED:
            raise EntryRefused(f"the LaTeX uses \\{match.group(1)}")
    return text


def check_text(text: str) -> str:
    """Plain text, kept as it is: its front ends escape it."""
    return text


def check_json(text: str) -> str:
    """The JSON text parsed by ``untrusted.loads`` (nesting within 32, finite numbers,
    integers within 64 bits), written back compact."""
    import json

    from .untrusted import loads

    try:
        value = loads(text.encode("utf-8"), max_bytes=None)
    except ValueError as exc:
        raise EntryRefused(f"the JSON was refused: {exc}") from None
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError as exc:
        raise EntryRefused(f"the JSON was refused: {exc}") from None


#: Each MIME type's check, in the order a notebook prefers them, and its data's type.
CHECKS: dict[str, tuple[type, Callable[..., bytes | str]]] = {
    "image/png": (bytes, check_png),
    "image/jpeg": (bytes, check_jpeg),
    "image/svg+xml": (str, check_svg),
    "text/html": (str, check_html),
    "text/markdown": (str, check_markdown),
    "text/latex": (str, check_latex),
    "application/json": (str, check_json),
    "text/plain": (str, check_text),
}
