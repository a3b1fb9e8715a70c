# SPDX-License-Identifier: MIT
"""An SVG image from a sandbox, made safe to show: parsed with bounds, rebuilt from an
allowlist, written out anew.

The text is parsed by expat (``pyexpat``, imported on first use) with no DTD read:
``<!ENTITY`` is refused before parsing and by the parser's handlers, a ``<!DOCTYPE``
is allowed only as matplotlib writes it (``svg``, naming the SVG DTD, which expat never
fetches) and refused with an internal subset (``[...]``), and any external entity
reference stops the parse: no entity is ever declared (no billion laughs) or fetched (no
XXE).  The handlers count as they go and stop the parse at
the first element deeper than ``MAX_DEPTH`` or past ``MAX_ELEMENTS``: a document nested
10,000 levels costs 65 start tags, and nothing recurses.

What is written out is rebuilt from the parse, never copied from the text: only the SVG
elements of ``ELEMENTS`` (any other element, ``<script>`` and ``<foreignObject>``
included, is left out with everything inside it), only the attributes of ``ATTRIBUTES``
(no ``on*`` handler is among them), a link (``href``, ``xlink:href``) only to an
element of the same document (``#id``) or to a PNG or JPEG ``data:`` URL, and CSS (the
``style`` attribute and element, and every attribute value) only when each ``url()`` in
it is ``url(#id)``, each function it calls is a colour, ``calc`` or a transform, and it
has no ``@`` rule and no ``\\`` escape; a ``style`` attribute sets only paint, text and
opacity, a ``<style>`` element (whose rules reach the whole page when the SVG is shown
inline) only paint, and the root has no ``transform``: nothing sizes or places a box
over the page around it.  Text is kept inside the elements that show or
name text; comments and processing instructions are dropped.  Matplotlib's SVG keeps its
drawing: paths, ``<defs>``, ``<use xlink:href="#...">``, ``<clipPath>``, its ``style``
attributes and element, embedded PNG images.
"""

from __future__ import annotations

import functools

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import re

__all__ = ["ATTRIBUTES", "ELEMENTS", "MAX_DEPTH", "MAX_ELEMENTS", "SvgRefused", "clean_svg"]

#: Levels of elements an SVG may nest (matplotlib's figures need about 8).
MAX_DEPTH = 64
#: Elements an SVG may hold (a scatter plot of 10,000 points has about that many).
MAX_ELEMENTS = 200_000

_SVG = "http://www.w3.org/2000/svg"
_XLINK = "http://www.w3.org/1999/xlink"
_XML = "http://www.w3.org/XML/1998/namespace"

#: The SVG elements kept: shapes, text, grouping and reuse, paint servers, clipping.
ELEMENTS = frozenset(
    [
        "svg",
        "g",
        "defs",
        "symbol",
        "use",
        "path",
        "rect",
        "circle",
        "ellipse",
        "line",
        "polyline",
        "polygon",
        "text",
        "tspan",
        "textPath",
        "title",
        "desc",
        "clipPath",
        "mask",
        "linearGradient",
        "radialGradient",
        "stop",
        "pattern",
        "marker",
        "image",
        "style",
    ]
)
#: Elements whose text content is kept (elsewhere only white space is expected).
_TEXT = frozenset({"text", "tspan", "textPath", "title", "desc", "style"})
#: Elements that may link, and so carry ``href``/``xlink:href``.
_LINKING = frozenset({"use", "image", "linearGradient", "radialGradient", "pattern", "textPath"})

#: The attributes kept without a namespace: geometry, presentation, text and paint.
ATTRIBUTES = frozenset(
    [
        "id",
        "class",
        "style",
        "transform",
        "x",
        "y",
        "x1",
        "y1",
        "x2",
        "y2",
        "cx",
        "cy",
        "r",
        "rx",
        "ry",
        "fx",
        "fy",
        "width",
        "height",
        "d",
        "points",
        "pathLength",
        "viewBox",
        "preserveAspectRatio",
        "version",
        "fill",
        "fill-opacity",
        "fill-rule",
        "stroke",
        "stroke-width",
        "stroke-linecap",
        "stroke-linejoin",
        "stroke-miterlimit",
        "stroke-dasharray",
        "stroke-dashoffset",
        "stroke-opacity",
        "opacity",
        "clip-path",
        "clip-rule",
        "clipPathUnits",
        "mask",
        "maskUnits",
        "maskContentUnits",
        "font-family",
        "font-size",
        "font-style",
        "font-weight",
        "font-variant",
        "font-stretch",
        "text-anchor",
        "text-decoration",
        "dominant-baseline",
        "alignment-baseline",
        "baseline-shift",
        "letter-spacing",
        "word-spacing",
        "writing-mode",
        "direction",
        "dx",
        "dy",
        "rotate",
        "textLength",
        "lengthAdjust",
        "startOffset",
        "method",
        "spacing",
        "gradientUnits",
        "gradientTransform",
        "spreadMethod",
        "offset",
        "stop-color",
        "stop-opacity",
        "patternUnits",
        "patternContentUnits",
        "patternTransform",
        "markerWidth",
        "markerHeight",
        "markerUnits",
        "refX",
        "refY",
        "orient",
        "marker-start",
        "marker-mid",
        "marker-end",
        "display",
        "visibility",
        "overflow",
        "color",
        "color-interpolation",
        "image-rendering",
        "shape-rendering",
        "text-rendering",
        "vector-effect",
        "paint-order",
        "mix-blend-mode",
        "isolation",
        "type",
        "media",
    ]
)
#: The CSS properties a ``<style>`` element may set: paint alone, since its rules reach
#: the whole page when the SVG is shown inline (``*{font-size: 0}`` would blank it).
_SHEET_PROPERTIES = frozenset(
    """fill fill-opacity fill-rule stroke stroke-width stroke-linecap stroke-linejoin
    stroke-miterlimit stroke-dasharray stroke-dashoffset stroke-opacity stop-color
    stop-opacity paint-order vector-effect shape-rendering clip-rule marker-start
    marker-mid marker-end color-interpolation""".split()  # noqa: SIM905
)
#: The CSS properties a ``style`` attribute may set: paint, text and opacity, nothing
#: that places or sizes a box (an inline SVG's root could otherwise cover the page).
_STYLE_PROPERTIES = _SHEET_PROPERTIES | frozenset(
    """opacity font font-family font-size font-style font-weight font-variant
    font-stretch text-anchor text-decoration dominant-baseline alignment-baseline
    baseline-shift letter-spacing word-spacing white-space color clip-path mask
    text-rendering image-rendering visibility mix-blend-mode isolation""".split()  # noqa: SIM905
)
#: CSS functions allowed in a style or an attribute value (``url`` only as ``url(#id)``).
_CSS_FUNCTIONS = frozenset(
    [
        "url",
        "rgb",
        "rgba",
        "hsl",
        "hsla",
        "calc",
        "translate",
        "translatex",
        "translatey",
        "rotate",
        "scale",
        "scalex",
        "scaley",
        "matrix",
        "skewx",
        "skewy",
    ]
)


class SvgRefused(ValueError):
    """The SVG was left out of its bundle: not well-formed, a DTD, too deep or too large,
    not an ``<svg>`` document.  The message says which."""


@functools.cache
def _css_functions() -> re.Pattern[str]:
    """A CSS function's name, found only at the start of a run of name characters (the
    look-behind), so that a long run is scanned once, not once per position."""
    import re

    return re.compile(r"(?<![\w-])([\w-]+)\(\s*([\"']?)\s*(.?)", re.ASCII)


def css_is_safe(text: str) -> bool:
    """Whether the CSS ``text`` (a declaration list or a style sheet) loads nothing: no
    ``@`` rule, no escape, every function in ``_CSS_FUNCTIONS`` and every ``url()`` a
    ``url(#id)``.  One linear pass; a false "unsafe" only drops the style."""
    if "(" not in text:
        return "@" not in text and "\\" not in text
    if "@" in text or "\\" in text:
        return False
    for match in _css_functions().finditer(text.lower()):
        name, _, first = match.groups()
        if name not in _CSS_FUNCTIONS or (name == "url" and first != "#"):
            return False
    return True


def declarations_are_safe(text: str, allowed: frozenset[str]) -> bool:
    """Whether the CSS declarations ``text`` (``fill: red; stroke: #000``) are safe
    (``css_is_safe``), without comments or braces, each setting a property of
    ``allowed``."""
    if "{" in text or "}" in text or "/*" in text or not css_is_safe(text):
        return False
    for declaration in text.split(";"):
        name, colon, _ = declaration.partition(":")
        if (colon or name.strip()) and name.strip().lower() not in allowed:
            return False
    return True


@functools.cache
def _selector() -> re.Pattern[str]:
    """A selector of names, ids, classes, ``*`` and combinators (one class: linear)."""
    import re

    return re.compile(r"[\w\s#.*,>+~:-]*", re.ASCII)


def style_sheet_is_safe(text: str) -> bool:
    """Whether a ``<style>`` element's text is only rules of plain selectors whose
    declarations set paint (``_SHEET_PROPERTIES``): matplotlib's
    ``*{stroke-linejoin: round; stroke-linecap: butt}`` is."""
    rules = text.split("}")
    if rules[-1].strip():
        return False
    for rule in rules[:-1]:
        selector, brace, body = rule.partition("{")
        if not brace or not _selector().fullmatch(selector):
            return False
        if not declarations_are_safe(body, _SHEET_PROPERTIES):
            return False
    return True


def link_is_safe(value: str) -> bool:
    """Whether a link stays in the document (``#id``) or is a PNG or JPEG ``data:`` URL
    of base64 characters alone."""
    value = value.strip()
    if value.startswith("#"):
        return len(value) > 1 and not any(c.isspace() for c in value)
    for prefix in ("data:image/png;base64,", "data:image/jpeg;base64,"):
        if value[: len(prefix)].lower() == prefix:
            import base64
            import binascii

            try:
                base64.b64decode("".join(value[len(prefix) :].split()), validate=True)
            except (binascii.Error, ValueError):
                return False
            return True
    return False


def _attribute(element: str, name: str, value: str) -> str | None:
    """The attribute as written out (``xlink:href``), or None to leave it out."""
    if " " in name:
        namespace, local = name.split(" ", 1)
        if namespace == _XLINK and local == "href":
            shown = "xlink:href"
        elif namespace == _XML and local == "space":
            return "xml:space" if value in ("default", "preserve") else None
        else:
            return None
    elif name == "href":
        shown = "href"
    elif name == "style":
        return name if declarations_are_safe(value, _STYLE_PROPERTIES) else None
    elif name in ATTRIBUTES:
        return name if css_is_safe(value) else None
    else:
        return None
    return shown if element in _LINKING and link_is_safe(value) else None


def _escape(text: str, quote: bool) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if quote:
        text = text.replace('"', "&quot;").replace("\n", "&#10;").replace("\t", "&#9;")
        text = text.replace("\r", "&#13;")
    return text


class _Rebuild:
    """expat's handlers: the allowed elements written out as they are parsed, bounded.

    A ``<style>`` element's text is gathered whole and checked at its end (expat may hand
    it over in pieces, and a piece alone could hide a ``url(`` split across two), and
    nothing inside it is an element: CSS reads the text of its children as one.
    """

    def __init__(self) -> None:
        self.out: list[str] = []
        #: Each open element's name, or None for one left out (and all inside it).
        self.stack: list[str | None] = []
        self.count = 0
        #: The text of the open ``<style>`` element, in pieces.
        self.css: list[str] = []

    def start(self, name: str, attributes: list[str]) -> None:
        self.count += 1
        if len(self.stack) >= MAX_DEPTH:
            raise SvgRefused(f"nested deeper than {MAX_DEPTH} elements")
        if self.count > MAX_ELEMENTS:
            raise SvgRefused(f"more than {MAX_ELEMENTS} elements")
        namespace, _, local = name.rpartition(" ")
        if not self.stack and (namespace not in ("", _SVG) or local != "svg"):
            raise SvgRefused("the document is not an <svg> element")
        kept = namespace in ("", _SVG) and local in ELEMENTS
        if not kept or (self.stack and self.stack[-1] in (None, "style")):
            self.stack.append(None)
            return
        self.stack.append(local)
        self.out.append(f"<{local}")
        if len(self.stack) == 1:
            self.out.append(f' xmlns="{_SVG}" xmlns:xlink="{_XLINK}"')
        for index in range(0, len(attributes), 2):
            value = attributes[index + 1]
            shown = _attribute(local, attributes[index], value)
            if shown == "transform" and len(self.stack) == 1:
                continue  # the root moved or scaled over the page
            if shown is not None:
                self.out.append(f' {shown}="{_escape(value, quote=True)}"')
        self.out.append(">")

    def end(self, name: str) -> None:
        local = self.stack.pop()
        if local == "style":
            css = "".join(self.css)
            self.css.clear()
            if style_sheet_is_safe(css):
                self.out.append(_escape(css, quote=False))
        if local is not None:
            self.out.append(f"</{local}>")

    def text(self, data: str) -> None:
        local = self.stack[-1] if self.stack else None
        if local == "style":
            self.css.append(data)
        elif local in _TEXT:
            self.out.append(_escape(data, quote=False))


def _refuse_entity(*_: object) -> None:
    raise SvgRefused("an entity declaration")


def _refuse_external(
    context: str, base: str | None, system_id: str | None, public_id: str | None
) -> int:
    raise SvgRefused("an external entity")


def _doctype(name: str, system_id: object, public_id: object, internal_subset: int) -> None:
    """expat's DOCTYPE handler: only ``<!DOCTYPE svg ...>`` naming the SVG DTD, as
    matplotlib writes it, which expat never reads; any declaration of its own (an
    internal subset) is refused."""
    if internal_subset or name != "svg":
        raise SvgRefused("a DTD of its own (<!DOCTYPE with [...] or not svg)")


def clean_svg(text: str) -> str:
    """The SVG ``text`` rebuilt from the allowlists, or ``SvgRefused``."""
    if "<!entity" in text.lower():
        raise SvgRefused("an entity declaration (<!ENTITY)")
    from xml.parsers import expat

    rebuild = _Rebuild()
    parser = expat.ParserCreate("utf-8", namespace_separator=" ")
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.ordered_attributes = True
    parser.buffer_text = True
    parser.StartDoctypeDeclHandler = _doctype
    parser.EntityDeclHandler = _refuse_entity
    parser.ExternalEntityRefHandler = _refuse_external
    parser.StartElementHandler = rebuild.start
    parser.EndElementHandler = rebuild.end
    parser.CharacterDataHandler = rebuild.text
    try:
        parser.Parse(text.encode("utf-8"), True)
    except expat.ExpatError as exc:
        raise SvgRefused(f"not well-formed XML: {exc}") from None
    if not rebuild.out:
        raise SvgRefused("no <svg> element")
    return "".join(rebuild.out)
